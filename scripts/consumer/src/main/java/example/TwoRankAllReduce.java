package example;

import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;

/**
 * One rank of a 2-rank job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GRADSYNC_JOB_SECRET from the launcher),
 * over the transport named by the first argument (default aeron).
 */
public final class TwoRankAllReduce {
    public static void main(String[] args) {
        try (Communicator comm = Communicator.connect(args.length > 0 ? args[0] : "aeron")) {
            float[] gradient = new float[1000];
            for (int i = 0; i < gradient.length; i++) {
                gradient[i] = (comm.rank() + 1) * i;
            }
            comm.allReduceBlocking(GradientBuffer.wrap(gradient), ReduceOp.SUM);
            int n = comm.size();
            for (int i = 0; i < gradient.length; i++) {
                float expected = (float) n * (n + 1) / 2 * i;
                if (gradient[i] != expected) {
                    System.out.println("rank " + comm.rank() + ": element " + i + " is " + gradient[i] + ", expected " + expected);
                    System.exit(1);
                }
            }
            System.out.println("rank " + comm.rank() + " of " + n + " over " + comm.transportName() + ": allreduce OK");
        }
    }
}
