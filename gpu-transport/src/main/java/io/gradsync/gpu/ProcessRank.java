package io.gradsync.gpu;

import io.gradsync.core.Communicator;
import java.util.List;

/**
 * One rank of {@link ProcessesStage}, in a process of its own: joins the job from torchrun's environment over the
 * {@code cuda} transport, runs {@link AllReduceStage}'s checks and timings on its device and a loop that allocates a new
 * buffer every step ({@link AllReduceStage#churn}), prints its report.
 */
final class ProcessRank {
    /** Steps of {@link AllReduceStage#churn}: past the export table's entries. */
    private static final int CHURN_STEPS = DeviceSharedMemory.ENTRIES + 76;
    private ProcessRank() {
    }

    public static void main(String[] args) {
        boolean quick = args.length > 0 && args[0].equals("--quick");
        try (Communicator c = Communicator.connect(CudaTransport.NAME)) {
            // the provider's device: one instance per driver and ordinal in a process
            CudaDevice device = CudaDevice.open(CudaConfiguration.device(c.localRank(), JCudaDriverApi.open().deviceCount()));
            List<String> report = AllReduceStage.rankRun(c, device, AllReduceStage.counts(quick), AllReduceStage.sizes(quick),
                    quick ? 3 : AllReduceStage.RUNS, quick ? 1 : AllReduceStage.WARM_UPS);
            report.add(AllReduceStage.churn(c, device, quick ? 8 : CHURN_STEPS));
            report.forEach(System.out::println);
        } catch (RuntimeException | Error e) {
            System.out.println("FAILED " + e);
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }
}
