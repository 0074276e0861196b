package io.gradsync.examples.train;

import io.gradsync.core.Communicator;
import io.gradsync.core.GradSyncConfiguration;
import io.gradsync.core.transport.local.LocalTransport;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/** Runs a rank body either as this process's rank of a launched job, or as N threads of this JVM. */
public final class Ranks {
    /** What one rank does. */
    public interface Body<R> {
        R run(Communicator comm) throws Exception;
    }

    private Ranks() {
    }

    /** True when a launcher (gradsync-run, torchrun, srun, mpirun) started this process as a rank. */
    public static boolean launched() {
        return System.getenv("RANK") != null || System.getenv("OMPI_COMM_WORLD_RANK") != null
                || System.getenv("SLURM_PROCID") != null || System.getenv("GRADSYNC_RANK") != null;
    }

    /** This process's rank of a launched job over {@code transport}. */
    public static <R> R process(String transport, Body<R> body) throws Exception {
        try (Communicator comm = Communicator.connect(transport)) {
            return body.run(comm);
        }
    }

    /** {@code n} ranks as threads over the in-JVM transport; returns each rank's result in rank order. */
    public static <R> List<R> threads(int n, Body<R> body) throws Exception {
        try (LocalTransport job = LocalTransport.create(n, GradSyncConfiguration.transportOptions())) {
            ExecutorService pool = Executors.newFixedThreadPool(n);
            try {
                List<Future<R>> futures = new ArrayList<>();
                for (int r = 0; r < n; r++) {
                    Communicator comm = Communicator.create(job.endpoint(r));
                    futures.add(pool.submit(() -> {
                        try (comm) {
                            return body.run(comm);
                        }
                    }));
                }
                List<R> out = new ArrayList<>();
                for (Future<R> f : futures) {
                    try {
                        out.add(f.get());
                    } catch (ExecutionException e) {
                        if (e.getCause() instanceof Exception ex) {
                            throw ex;
                        }
                        throw e;
                    }
                }
                return out;
            } finally {
                pool.shutdownNow();
            }
        }
    }
}
