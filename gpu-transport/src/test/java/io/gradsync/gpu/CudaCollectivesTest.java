package io.gradsync.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.BroadcastAlgorithm;
import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.algorithm.AllReduceAlgorithms;
import io.gradsync.core.algorithm.DirectAllReduce;
import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.memory.Elements;
import io.gradsync.core.memory.HalfFloats;
import io.gradsync.core.memory.Region;
import io.gradsync.core.select.AllReduceChoice;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.Transports;
import io.gradsync.core.transport.local.InMemoryJob;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.io.TempDir;

/**
 * Collectives of device buffers over the {@code cuda} transport, on the host-memory device, checked as nccl-tests
 * {@code -c} checks: exact expected values on every rank, inputs unchanged, the ranks' results identical; the other
 * collectives equal to the same collective of host buffers; what cannot reduce device memory refuses it by name; a
 * device fault on one rank is an error on every rank, not a hang.
 */
class CudaCollectivesTest {
    /** 4 KiB messages: the larger counts cross in hundreds of chunks, each staged through pinned memory. */
    private static final TransportOptions SMALL_SLOTS = new TransportOptions(4096, 4);
    private static final Duration RANK_TIMEOUT = Duration.ofSeconds(60);
    /** Elements of the IPC cases: float32 and bfloat16 buffers of 2 MiB or more, so that their allocations are exported. */
    private static final int IPC_COUNT = 1_048_579;
    private static final ReduceOp[] IPC_OPS = {ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX};

    @TempDir
    Path directory;
    private HostMemoryCudaDriver driver;
    private CudaDevice device;

    @BeforeEach
    void start() {
        driver = new HostMemoryCudaDriver(directory);
        device = CudaDevice.open(driver, 0);
    }

    @AfterEach
    void stop() {
        driver.close();
    }

    static Stream<Arguments> jobs() {
        return Stream.of(Arguments.of("ring", 2), Arguments.of("ring", 3), Arguments.of("rhd", 3), Arguments.of("rhd", 4),
                Arguments.of("tree", 3), Arguments.of("btree", 4), Arguments.of("rd", 3),
                Arguments.of("direct", 2), Arguments.of("direct", 3), Arguments.of("direct", 4));
    }

    @ParameterizedTest(name = "{0} ranks={1}")
    @MethodSource("jobs")
    void everyCountOpTypeAndPlacementIsExactOnEveryRank(String algorithm, int ranks) throws Exception {
        List<List<String>> reports = DeviceRanks.run(device, ranks, SMALL_SLOTS, algorithm, RANK_TIMEOUT, c -> {
            List<String> report = new ArrayList<>();
            for (int count : new int[] {0, 1, ranks - 1, ranks + 1, 10_007}) {
                for (DataType type : DataType.values()) {
                    for (ReduceOp op : ReduceOp.values()) {
                        report.add(allReduceCase(c, type, op, count, (count + type.ordinal() + op.ordinal()) % 2 == 0));
                    }
                }
            }
            return report;
        });
        for (int r = 0; r < ranks; r++) {
            List<String> wrong = reports.get(r).stream().filter(s -> s.startsWith("WRONG")).toList();
            assertTrue(wrong.isEmpty(), "rank " + r + ": " + wrong);
            assertEquals(reports.get(0), reports.get(r), "rank " + r + " differs from rank 0");
        }
    }

    @Test
    void largeBuffersCrossInManyChunks() throws Exception {
        List<List<String>> reports = DeviceRanks.run(device, 3, SMALL_SLOTS, "ring", RANK_TIMEOUT, c -> List.of(
                allReduceCase(c, DataType.FLOAT32, ReduceOp.SUM, 300_007, false),
                allReduceCase(c, DataType.BFLOAT16, ReduceOp.AVG, 300_007, true)));
        for (List<String> report : reports) {
            assertTrue(report.stream().noneMatch(s -> s.startsWith("WRONG")), report.toString());
            assertEquals(reports.get(0), report);
        }
    }

    /**
     * Ranks that share the device in this process read each other's device buffers in place: the selector runs
     * direct from its threshold on (and the size's choice, staged through the host, below it), exact on every rank.
     */
    @Test
    void ranksSharingTheDeviceInOneProcessReduceDirectFromTheThresholdOn() throws Exception {
        List<List<String>> reports = DeviceRanks.run(device, 3, SMALL_SLOTS, null, RANK_TIMEOUT, c -> {
            List<String> report = new ArrayList<>();
            for (int count : new int[] {1000, 100_003}) {
                GradientBuffer buffer = device.allocate(DataType.FLOAT32, count);
                try {
                    report.add(count + " " + c.allReduceChoice(buffer, buffer).algorithm().name());
                } finally {
                    device.free(buffer);
                }
                report.add(allReduceCase(c, DataType.FLOAT32, ReduceOp.SUM, count, true));
                report.add(allReduceCase(c, DataType.BFLOAT16, ReduceOp.AVG, count, false));
            }
            return report;
        });
        for (List<String> report : reports) {
            assertTrue(report.stream().noneMatch(s -> s.startsWith("WRONG")), report.toString());
            assertEquals(reports.get(0), report);
        }
        assertTrue(reports.get(0).get(0).startsWith("1000 ") && !reports.get(0).get(0).endsWith(" direct"), reports.get(0).get(0));
        assertEquals("100003 direct", reports.get(0).get(3));
    }

    /**
     * Three ranks in two processes on one host (two drivers over one directory, as two processes' drivers over one
     * machine): ranks 0 and 1 share process A's device and read each other's buffers by address, rank 2 in process
     * B reads theirs, and they its, through CUDA IPC (allocations of 2 MiB and more). The selector runs direct;
     * every result is exact and the same on every rank; a process maps each peer allocation once, over repeated
     * calls and for both ranks of process A, as CUDA maps an allocation once per context.
     */
    @Test
    void ranksInTwoProcessesReadEachOthersDeviceBuffersThroughIpc() throws Exception {
        try (HostMemoryCudaDriver other = new HostMemoryCudaDriver(directory)) {
            List<List<String>> reports = onDevices(new CudaDevice[] {device, device, CudaDevice.open(other, 0)}, (c, mine) -> {
                List<String> report = new ArrayList<>();
                report.add(choices(c, mine));
                for (DataType type : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) {
                    for (ReduceOp op : IPC_OPS) {
                        report.add(allReduceCase(c, mine, type, op, IPC_COUNT, op == ReduceOp.SUM));
                    }
                }
                GradientBuffer kept = mine.allocate(DataType.FLOAT32, IPC_COUNT);
                for (int call = 0; call < 5; call++) {
                    c.allReduceBlocking(kept, ReduceOp.SUM);
                }
                mine.free(kept);
                return report;
            });
            // under 2 MiB an allocation is not exported: direct through a window of the device's memory
            assertEquals("direct direct", reports.get(0).get(0));
            // each rank exported 2 allocations a case (1 in place) and 1 kept over five calls: process B maps those of
            // ranks 0 and 1, process A rank 2's, each allocation once
            // (and at set-up each process maps the other's probe once: B rank 0's, A rank 2's)
            int exported = 2 * (2 * IPC_OPS.length - 1) + 1;
            assertEquals(2 * exported + 1, other.calls("cuIpcOpenMemHandle"), "mapped by process B");
            assertEquals(exported + 1, driver.calls("cuIpcOpenMemHandle"), "mapped by process A");
        }
    }

    /**
     * Buffers under 2 MiB, whose allocations CUDA does not export, in two processes: the direct AllReduce runs through
     * windows of each rank's device memory that it does export, exact on every rank for every count (0, 1, odd, over
     * a window's 64 KiB), in place and not, its one pass and its pairwise way; windows are reused, so repeated calls
     * map nothing new.
     */
    @Test
    void smallBuffersOfProcessesGoDirectThroughWindowsOfTheirDevice() throws Exception {
        try (HostMemoryCudaDriver other = new HostMemoryCudaDriver(directory)) {
            List<List<String>> reports = onDevices(new CudaDevice[] {device, device, CudaDevice.open(other, 0)}, (c, mine) -> {
                AllReduceChoice onePass = new AllReduceChoice(AllReduceAlgorithms.named("direct"), 4096); // one per communicator
                AllReduceChoice pairwise = new AllReduceChoice(DirectAllReduce.pairwise(), 4096);
                List<String> report = new ArrayList<>();
                for (int count : new int[] {0, 1, 7, 100_003}) {
                    for (DataType type : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16, DataType.INT64}) {
                        for (ReduceOp op : IPC_OPS) {
                            boolean inPlace = (count + op.ordinal()) % 2 == 0;
                            report.add(allReduceCase(c, mine, type, op, count, inPlace, onePass));
                            report.add(allReduceCase(c, mine, type, op, count, !inPlace, pairwise));
                        }
                    }
                }
                HostMemoryCudaDriver process = c.rank() == 2 ? other : driver;
                GradientBuffer kept = mine.allocate(DataType.FLOAT32, 1000);
                c.allReduce(kept, kept, ReduceOp.SUM, onePass).block();
                c.barrierBlocking();
                long opened = process.calls("cuIpcOpenMemHandle");
                for (int call = 0; call < 20; call++) {
                    c.allReduce(kept, kept, ReduceOp.SUM, onePass).block();
                }
                c.barrierBlocking();
                mine.free(kept);
                report.add("mapped during 20 calls: " + (process.calls("cuIpcOpenMemHandle") - opened));
                return report;
            });
            assertEquals("mapped during 20 calls: 0", reports.get(0).get(reports.get(0).size() - 1));
        }
    }

    /**
     * Processes that cannot map each other's device memory (GPUs without peer access between them): the set-up probe
     * finds it, no device buffer is named to the peers, and an AllReduce that would go direct stages, exact on every
     * rank, where its first call failed before.
     */
    @Test
    void processesThatCannotMapEachOthersMemoryStageInsteadOfFailing() throws Exception {
        try (HostMemoryCudaDriver other = new HostMemoryCudaDriver(directory)) {
            other.refuseIpcOpens();
            List<List<String>> reports = onDevices(new CudaDevice[] {device, CudaDevice.open(other, 0)}, (c, mine) -> List.of(
                    choices(c, mine), allReduceCase(c, mine, DataType.FLOAT32, ReduceOp.SUM, IPC_COUNT, true),
                    allReduceCase(c, mine, DataType.BFLOAT16, ReduceOp.AVG, IPC_COUNT, false)));
            assertFalse(reports.get(0).get(0).contains("direct"), reports.get(0).get(0));
            assertEquals(1, driver.calls("cuIpcOpenMemHandle"), "process A: the probe's open only");
            assertEquals(1, other.calls("cuIpcOpenMemHandle"), "process B: the probe's open (refused) only");
        }
    }

    /**
     * A training loop that allocates a new gradient buffer every step, at a new base each time, and frees the last:
     * past the export table's {@value DeviceSharedMemory#ENTRIES} entries every call still runs direct and exact,
     * the freed allocations' entries given back, and the peer process unmaps each freed allocation when its entry
     * names the next (mapped and unmapped as often, but the one still in use).
     */
    @Test
    void freedAllocationsGiveTheirExportEntriesBackAndTheirMappingsAreReleased() throws Exception {
        int steps = DeviceSharedMemory.ENTRIES + 16;
        int count = (int) (DeviceSharedMemory.MIN_EXPORT_BYTES / Float.BYTES);
        try (HostMemoryCudaDriver other = new HostMemoryCudaDriver(directory)) {
            List<List<String>> reports = onDevices(new CudaDevice[] {device, CudaDevice.open(other, 0)}, (c, mine) -> {
                GradientBuffer host = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
                List<String> report = new ArrayList<>();
                for (int step = 0; step < steps; step++) {
                    GradientBuffer buffer = mine.allocate(DataType.FLOAT32, count);
                    try {
                        String chosen = c.allReduceChoice(buffer, buffer).algorithm().name();
                        boolean checked = step % 256 == 0 || step >= DeviceSharedMemory.ENTRIES - 2; // the data: now and then
                        if (checked) {
                            CheckPattern.fill(host, ReduceOp.SUM, c.rank());
                            mine.copyFromHost(host, buffer);
                        }
                        c.allReduceBlocking(buffer, ReduceOp.SUM);
                        long wrong = 0;
                        if (checked) {
                            mine.copyToHost(buffer, host);
                            wrong = CheckPattern.countWrong(host, ReduceOp.SUM, c.size());
                        }
                        if (!chosen.equals("direct") || wrong != 0) {
                            report.add("WRONG step " + step + ": " + chosen + ", " + wrong + " elements wrong");
                        }
                    } finally {
                        mine.free(buffer);
                    }
                }
                return report;
            });
            assertTrue(reports.get(0).isEmpty(), reports.get(0).toString());
            for (HostMemoryCudaDriver process : new HostMemoryCudaDriver[] {driver, other}) {
                assertEquals(steps + 1, process.calls("cuIpcOpenMemHandle"), "each peer allocation mapped once, and the set-up probe");
                assertTrue(process.calls("cuIpcCloseMemHandle") >= steps - 1, "and unmapped once its entry names the next: "
                        + process.calls("cuIpcCloseMemHandle"));
            }
        }
    }

    /**
     * Ranks of one process on two devices with peer access: each enables it at set-up, and the direct AllReduce reads
     * and writes the other device's buffers by address, in one pass and pairwise, exact on every rank, at every size
     * (no IPC: one process). A kernel reaching the other device's memory without peer access fails on the
     * host-memory device as on a GPU.
     */
    @Test
    void ranksOfOneProcessOnTwoDevicesReadEachOthersBuffersThroughPeerAccess() throws Exception {
        try (HostMemoryCudaDriver two = twoDevices()) {
            List<List<String>> reports = onDevices(new CudaDevice[] {CudaDevice.open(two, 0), CudaDevice.open(two, 1)}, (c, mine) -> {
                AllReduceChoice onePass = new AllReduceChoice(AllReduceAlgorithms.named("direct"), 4096);
                AllReduceChoice pairwise = new AllReduceChoice(DirectAllReduce.pairwise(), 4096);
                List<String> report = new ArrayList<>(List.of(choices(c, mine)));
                for (int count : new int[] {1, 10_007, IPC_COUNT}) {
                    for (DataType type : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) {
                        report.add(allReduceCase(c, mine, type, ReduceOp.SUM, count, true, onePass));
                        report.add(allReduceCase(c, mine, type, ReduceOp.AVG, count, false, pairwise));
                    }
                }
                return report;
            });
            assertEquals("direct direct", reports.get(0).get(0));
            assertEquals(0, two.calls("cuIpcOpenMemHandle"));
        }
    }

    private HostMemoryCudaDriver twoDevices() {
        return new HostMemoryCudaDriver(directory, List.of(new DeviceProperties(0, "host-memory device", 9, 0, 4, 2048, 1L << 30),
                new DeviceProperties(1, "host-memory device", 9, 0, 4, 2048, 1L << 30)));
    }

    /**
     * Ranks of one process on two devices without peer access between them cannot read each other's buffers: the
     * selector never picks direct for them, they stage, exactly; a call that asks for direct is refused by name.
     */
    @Test
    void ranksOfOneProcessOnTwoDevicesWithoutPeerAccessStageAndRefuseDirectByName() throws Exception {
        try (HostMemoryCudaDriver two = twoDevices()) {
            two.withoutPeerAccess();
            List<List<String>> reports = onDevices(new CudaDevice[] {CudaDevice.open(two, 0), CudaDevice.open(two, 1)},
                    (c, mine) -> {
                        GradientBuffer buffer = mine.allocate(DataType.FLOAT32, IPC_COUNT);
                        try {
                            IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> c.allReduce(
                                    buffer, buffer, ReduceOp.SUM, new AllReduceChoice(AllReduceAlgorithms.named("direct"), 4096)));
                            return List.of(choices(c, mine), allReduceCase(c, mine, DataType.FLOAT32, ReduceOp.SUM, IPC_COUNT, true),
                                    "refused by name: " + refused.getMessage().contains("device buffers go direct only where every "
                                            + "peer reads both in place"));
                        } finally {
                            mine.free(buffer);
                        }
                    });
            for (List<String> report : reports) {
                assertTrue(!report.get(0).contains("direct") && !report.get(1).startsWith("WRONG"), report.toString());
                assertEquals("refused by name: true", report.get(2));
            }
        }
    }

    /**
     * Direct forced where one rank's buffer is on the device and the other's in shared host memory: each rank alone
     * could run it, but one segment cannot be reduced from both kinds of memory; every rank fails naming the mismatch,
     * none reads device memory as host memory.
     */
    @Test
    void directWithOneRankOnTheDeviceAndTheOtherOnTheHostFailsOnBothNamingIt() throws Exception {
        List<DeviceRanks.Outcome<Object>> outcomes = DeviceRanks.outcomes(device, 2, SMALL_SLOTS, null, Duration.ofSeconds(20), c -> {
            GradientBuffer buffer = c.rank() == 0 ? device.allocate(DataType.FLOAT32, 100_003)
                    : GradientBuffer.wrap(c.allocate(100_003 * 4), DataType.FLOAT32);
            c.allReduce(buffer, buffer, ReduceOp.SUM, new AllReduceChoice(AllReduceAlgorithms.named("direct"), 4096)).block();
            return "completed";
        });
        for (int r = 0; r < 2; r++) {
            String error = String.valueOf(outcomes.get(r).error());
            assertTrue(error.contains("the direct allreduce needs every rank's alike"), "rank " + r + ": " + error);
        }
    }

    /**
     * The direct AllReduce reducing pairwise and copying (what ran before the one pass, and runs past its
     * {@value ReductionKernels#MAX_RANKS} ranks) gives the one pass's bits, exact on every rank, every type and operator.
     */
    @Test
    void thePairwiseDirectGivesTheOnePassesBits() throws Exception {
        List<List<String>> reports = DeviceRanks.run(device, 3, SMALL_SLOTS, null, RANK_TIMEOUT, c -> {
            AllReduceChoice onePass = new AllReduceChoice(AllReduceAlgorithms.named("direct"), 4096);
            AllReduceChoice pairwise = new AllReduceChoice(DirectAllReduce.pairwise(), 4096);
            List<String> report = new ArrayList<>();
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    String first = allReduceCase(c, device, type, op, 10_007, true, onePass);
                    String second = allReduceCase(c, device, type, op, 10_007, false, pairwise);
                    report.add(first.replace(" in place", "").equals(second) ? second : "WRONG one pass " + first + ", pairwise " + second);
                }
            }
            return report;
        });
        for (List<String> report : reports) {
            assertTrue(report.stream().noneMatch(s -> s.startsWith("WRONG")), report.toString());
            assertEquals(reports.get(0), report);
        }
    }

    /**
     * 16-bit SUM, PROD and AVG of real values (Gaussian, where rounding at every addition and rounding once differ): the
     * direct AllReduce of device buffers in one pass accumulates in float32 and rounds once, giving the bits the direct
     * AllReduce gives for the same values in host memory, on every rank.
     */
    @Test
    void theOnePassOf16BitFloatsGivesTheBitsOfTheHostsDirectAllReduce() throws Exception {
        int count = 10_007;
        List<List<String>> reports = DeviceRanks.run(device, 3, SMALL_SLOTS, null, RANK_TIMEOUT, c -> {
            List<String> report = new ArrayList<>();
            for (DataType type : new DataType[] {DataType.BFLOAT16, DataType.FLOAT16}) {
                for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.AVG}) {
                    GradientBuffer host = GradientBuffer.allocateDirect(type, count);
                    Random random = new Random(31L * c.rank() + type.ordinal());
                    for (int i = 0; i < count; i++) {
                        putGaussian(host, i, (float) (random.nextGaussian() * (op == ReduceOp.PROD ? 1 : 100)));
                    }
                    GradientBuffer onDevice = device.allocate(type, count);
                    try {
                        device.copyFromHost(host, onDevice);
                        c.allReduce(onDevice, onDevice, op, new AllReduceChoice(AllReduceAlgorithms.named("direct"), 4096)).block();
                        c.allReduce(host, host, op, new AllReduceChoice(AllReduceAlgorithms.named("direct"), 4096)).block();
                        GradientBuffer fromDevice = GradientBuffer.allocateDirect(type, count);
                        device.copyToHost(onDevice, fromDevice);
                        long differ = IntStream.range(0, count).filter(i -> fromDevice.getBits(i) != host.getBits(i)).count();
                        report.add(type + " " + op + (differ == 0 ? " " + fingerprint(host) : " WRONG: " + differ + " elements differ"));
                    } finally {
                        device.free(onDevice);
                    }
                }
            }
            return report;
        });
        for (List<String> report : reports) {
            assertTrue(report.stream().noneMatch(s -> s.contains("WRONG")), report.toString());
            assertEquals(reports.get(0), report);
        }
    }

    private static void putGaussian(GradientBuffer buffer, int index, float value) {
        short bits = buffer.dataType() == DataType.BFLOAT16 ? HalfFloats.floatToBfloat16(value) : HalfFloats.floatToFloat16(value);
        Region region = buffer.region();
        Elements.putShort(region.base(), region.offset() + 2L * index, bits);
    }

    /**
     * One rank reducing pairwise beside ranks that reduce in one pass would leave its segment unwritten in theirs
     * outputs and theirs in its: every rank fails naming it before anything is written, and every buffer still
     * holds its rank's input.
     */
    @Test
    void aRankReducingPairwiseBesideOnePassRanksFailsEveryRankBeforeAnythingIsWritten() throws Exception {
        List<DeviceRanks.Outcome<Object>> outcomes = DeviceRanks.outcomes(device, 3, SMALL_SLOTS, null, Duration.ofSeconds(20), c -> {
            AllReduceChoice choice = new AllReduceChoice(c.rank() == 0 ? DirectAllReduce.pairwise() : AllReduceAlgorithms.named("direct"),
                    4096);
            GradientBuffer host = GradientBuffer.allocateDirect(DataType.FLOAT32, 100_003);
            CheckPattern.fill(host, ReduceOp.SUM, c.rank());
            GradientBuffer buffer = device.allocate(DataType.FLOAT32, 100_003);
            try {
                device.copyFromHost(host, buffer);
                Throwable error = assertThrows(Throwable.class, () -> c.allReduce(buffer, buffer, ReduceOp.SUM, choice).block());
                device.copyToHost(buffer, host);
                throw new IllegalStateException(error.getMessage() + "; changed: " + CheckPattern.countChanged(host, ReduceOp.SUM, c.rank()));
            } finally {
                device.free(buffer);
            }
        });
        for (int r = 0; r < 3; r++) {
            String error = String.valueOf(outcomes.get(r).error());
            assertTrue(error.contains("every rank of a direct allreduce must run the same way") && error.endsWith("changed: 0"),
                    "rank " + r + ": " + error);
        }
    }

    /**
     * Buffers with the caller's stream: each rank queues its input's bytes on its own stream behind work that runs
     * until a gate opens, calls without synchronising, and reads the result back on that stream after the call. The
     * call's device work waits for the queued writes (staged by the ring, read in place by direct's one pass and its
     * pairwise way), so every rank is exact; a call that did not would reduce what the buffers held before.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("streamAlgorithms")
    void aCallOnBuffersWithTheCallersStreamComesAfterTheWorkQueuedThere(String algorithm) throws Exception {
        int ranks = 3;
        int count = 100_003;
        CountDownLatch submitted = new CountDownLatch(ranks);
        CountDownLatch gate = new CountDownLatch(1);
        Thread opener = new Thread(() -> {
            try {
                submitted.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            LockSupport.parkNanos(Duration.ofMillis(300).toNanos()); // long enough for calls that do not wait to finish
            gate.countDown();
        });
        opener.start();
        List<List<String>> reports = DeviceRanks.run(device, ranks, SMALL_SLOTS, null, RANK_TIMEOUT, c -> {
            AllReduceChoice choice = algorithm.equals("direct pairwise") ? new AllReduceChoice(DirectAllReduce.pairwise(), 4096)
                    : new AllReduceChoice(AllReduceAlgorithms.named(algorithm), 4096);
            long stream = driver.streamCreate();
            ByteBuffer pinned = driver.memHostAlloc(4L * count); // asynchronous copies go through page-locked memory
            GradientBuffer pattern = GradientBuffer.wrap(pinned, DataType.FLOAT32);
            CheckPattern.fill(pattern, ReduceOp.SUM, c.rank());
            GradientBuffer buffer = device.allocate(DataType.FLOAT32, count);
            GradientBuffer result = pattern;
            try {
                // zeros: what a call that does not wait reduces
                device.copyFromHost(GradientBuffer.allocateDirect(DataType.FLOAT32, count), buffer);
                driver.launchHostFunction(stream, () -> awaitOpen(gate)); // the stream held, as behind a long kernel
                driver.memcpyHtoDAsync(buffer.region().address(), pattern.region().address(), pattern.byteSize(), stream);
                CompletableFuture<?> call = c.allReduce(buffer.onStream(stream), buffer.onStream(stream), ReduceOp.SUM, choice)
                        .toFuture();
                submitted.countDown();
                call.get();
                driver.memcpyDtoHAsync(result.region().address(), buffer.region().address(), result.byteSize(), stream);
                driver.streamSynchronize(stream);
                long wrong = CheckPattern.countWrong(result, ReduceOp.SUM, ranks);
                return List.of(wrong == 0 ? "exact " + fingerprint(result) : "WRONG: " + wrong + " elements");
            } finally {
                device.free(buffer);
                driver.memFreeHost(pinned);
                driver.streamDestroy(stream);
            }
        });
        opener.join();
        for (List<String> report : reports) {
            assertTrue(report.get(0).startsWith("exact"), report.toString());
            assertEquals(reports.get(0), report);
        }
    }

    /** A stream that is none of the device's: the rank that gave it fails naming it, and its peers fail too, not hang. */
    @Test
    void aCallersStreamThatIsNoStreamIsAnErrorOnEveryRank() throws Exception {
        List<DeviceRanks.Outcome<Object>> outcomes = DeviceRanks.outcomes(device, 3, SMALL_SLOTS, "ring", Duration.ofSeconds(20),
                c -> {
                    GradientBuffer buffer = device.allocate(DataType.FLOAT32, 4096);
                    try {
                        c.allReduceBlocking(c.rank() == 1 ? buffer.onStream(0x7777) : buffer, ReduceOp.SUM);
                        return "completed";
                    } finally {
                        device.free(buffer);
                    }
                });
        String failed = String.valueOf(outcomes.get(1).error());
        assertTrue(failed.contains("rank 1, allreduce #0: the caller's stream 0x7777 of the cuda:0 region of 16384 bytes is not a "
                + "stream of cuda:0's primary context"), failed);
        for (int r : new int[] {0, 2}) {
            assertNotNull(outcomes.get(r).error(), "rank " + r + " completed");
        }
    }

    private static void awaitOpen(CountDownLatch gate) {
        try {
            if (!gate.await(RANK_TIMEOUT.toNanos(), TimeUnit.NANOSECONDS)) {
                throw new IllegalStateException("the gate never opened");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    static Stream<String> streamAlgorithms() {
        return Stream.of("ring", "direct", "direct pairwise");
    }

    /** The algorithms the defaults choose for a small (400 KB) and a large (4 MiB) float32 buffer on {@code device}. */
    private static String choices(Communicator c, CudaDevice device) {
        GradientBuffer small = device.allocate(DataType.FLOAT32, 100_003);
        GradientBuffer large = device.allocate(DataType.FLOAT32, IPC_COUNT);
        try {
            return c.allReduceChoice(small, small).algorithm().name() + " " + c.allReduceChoice(large, large).algorithm().name();
        } finally {
            device.free(small);
            device.free(large);
        }
    }

    /** What a rank on its own device does. */
    interface OnDevice {
        List<String> run(Communicator c, CudaDevice device) throws Exception;
    }

    /**
     * Runs {@code body} on ranks as threads, rank {@code r} over {@code cuda} on {@code devices[r]} and {@code shm};
     * returns each rank's report after checking that none failed, none is wrong, and all are the same.
     */
    private static List<List<String>> onDevices(CudaDevice[] devices, OnDevice body) throws Exception {
        List<DeviceRanks.Outcome<List<String>>> outcomes = DeviceRanks.outcomes(devices, SMALL_SLOTS, null, RANK_TIMEOUT,
                c -> body.run(c, devices[c.rank()]));
        List<List<String>> reports = new ArrayList<>();
        for (int r = 0; r < devices.length; r++) {
            assertEquals(null, outcomes.get(r).error(), "rank " + r);
            List<String> report = outcomes.get(r).value();
            assertTrue(report.stream().noneMatch(s -> s.startsWith("WRONG")), "rank " + r + ": " + report);
            assertEquals(outcomes.get(0).value(), report, "rank " + r + " differs from rank 0");
            reports.add(report);
        }
        return reports;
    }

    /** Reduces the check pattern of {@code count} elements on the device; "WRONG ..." or the result's fingerprint. */
    private String allReduceCase(Communicator c, DataType type, ReduceOp op, int count, boolean inPlace) {
        return allReduceCase(c, device, type, op, count, inPlace);
    }

    /** As above, on {@code device}. */
    private static String allReduceCase(Communicator c, CudaDevice device, DataType type, ReduceOp op, int count, boolean inPlace) {
        return allReduceCase(c, device, type, op, count, inPlace, null);
    }

    /** {@code choice} null: the communicator's own choice. */
    @SuppressWarnings("checkstyle:ParameterNumber")
    private static String allReduceCase(Communicator c, CudaDevice device, DataType type, ReduceOp op, int count, boolean inPlace,
                                        AllReduceChoice choice) {
        String name = count + " " + type + " " + op + (inPlace ? " in place" : "");
        GradientBuffer host = GradientBuffer.allocateDirect(type, count);
        CheckPattern.fill(host, op, c.rank());
        GradientBuffer in = device.allocate(type, count);
        GradientBuffer out = inPlace ? in : device.allocate(type, count);
        try {
            device.copyFromHost(host, in);
            if (choice == null) {
                c.allReduceBlocking(in, out, op);
            } else {
                c.allReduce(in, out, op, choice).block();
            }
            GradientBuffer result = GradientBuffer.allocateDirect(type, count);
            device.copyToHost(out, result);
            long wrong = CheckPattern.countWrong(result, op, c.size());
            if (wrong != 0) {
                return "WRONG " + name + ": " + wrong + " elements";
            }
            if (!inPlace) {
                GradientBuffer input = GradientBuffer.allocateDirect(type, count);
                device.copyToHost(in, input);
                if (CheckPattern.countChanged(input, op, c.rank()) != 0) {
                    return "WRONG " + name + ": the input changed";
                }
            }
            return name + " " + fingerprint(result);
        } finally {
            device.free(in);
            if (!inPlace) {
                device.free(out);
            }
        }
    }

    static Stream<Arguments> collectives() {
        return Stream.of(
                Arguments.of("reduce-scatter", (Collective) (c, b) -> c.reduceScatterBlocking(b.in(), b.block(), ReduceOp.SUM),
                        "block"),
                Arguments.of("all-gather", (Collective) (c, b) -> c.allGatherBlocking(b.block(), b.out()), "out"),
                Arguments.of("broadcast tree", (Collective) (c, b) -> c.broadcastBlocking(b.in(), 1,
                        BroadcastAlgorithm.BINOMIAL_TREE), "in"),
                Arguments.of("broadcast chain", (Collective) (c, b) -> c.broadcastBlocking(b.in(), 2, BroadcastAlgorithm.CHAIN),
                        "in"),
                Arguments.of("reduce", (Collective) (c, b) -> c.reduceBlocking(b.in(), b.out(), ReduceOp.MAX, 2), "out"),
                Arguments.of("all-to-all", (Collective) (c, b) -> c.allToAllBlocking(b.in(), b.out()), "out"));
    }

    /** The buffers of one collective: an input, an output as large, and a block of {@code 1 / size} of it. */
    record Buffers(GradientBuffer in, GradientBuffer out, GradientBuffer block) {
        GradientBuffer named(String name) {
            return switch (name) {
                case "in" -> in;
                case "out" -> out;
                default -> block;
            };
        }
    }

    interface Collective extends BiConsumer<Communicator, Buffers> {
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("collectives")
    void theOtherCollectivesOfDeviceBuffersEqualThoseOfHostBuffers(String name, Collective collective, String result)
            throws Exception {
        int ranks = 3;
        int block = 3001;
        List<String> differences = new ArrayList<>();
        DeviceRanks.run(device, ranks, SMALL_SLOTS, "ring", RANK_TIMEOUT, c -> {
            for (DataType type : new DataType[] {DataType.FLOAT32, DataType.INT64, DataType.FLOAT16}) {
                Buffers host = new Buffers(filled(type, block * ranks, c.rank()), GradientBuffer.allocateDirect(type,
                        block * ranks), GradientBuffer.allocateDirect(type, block));
                Buffers onDevice = new Buffers(device.allocate(type, block * ranks), device.allocate(type, block * ranks),
                        device.allocate(type, block));
                device.copyFromHost(host.in(), onDevice.in());
                if (name.equals("all-gather")) {
                    host = new Buffers(host.in(), host.out(), filled(type, block, c.rank()));
                    device.copyFromHost(host.block(), onDevice.block());
                }
                collective.accept(c, host);
                collective.accept(c, onDevice);
                GradientBuffer expected = host.named(result);
                GradientBuffer actual = GradientBuffer.allocateDirect(type, expected.count());
                device.copyToHost(onDevice.named(result), actual);
                for (int i = 0; i < expected.count(); i++) {
                    if (expected.getBits(i) != actual.getBits(i)) {
                        synchronized (differences) {
                            differences.add("rank " + c.rank() + " " + type + " element " + i);
                        }
                        break;
                    }
                }
            }
            return null;
        });
        assertEquals(List.of(), differences);
    }

    @Test
    void aTransportThatDoesNotComputeOnTheDeviceRefusesItsBuffersByName() throws Exception {
        InMemoryJob job = InMemoryJob.create(1);
        try (Communicator c = Communicator.builder(Transports.open("shm", job.context(0), SMALL_SLOTS)).build()) {
            GradientBuffer onDevice = device.allocate(DataType.FLOAT32, 8);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> c.allReduceBlocking(onDevice, ReduceOp.SUM));
            assertTrue(e.getMessage().contains("transport shm does not compute on that memory")
                    && e.getMessage().contains("cuda:0"), e.getMessage());
        }
    }

    /**
     * Wire compression is for host float32: device buffers travel in their own type (the device's kernels send no
     * 16-bit wire), and a choice that names a wire is refused for them.
     */
    @Test
    void deviceBuffersTravelInTheirOwnTypeUnderWireCompression() throws Exception {
        InMemoryJob job = InMemoryJob.create(1);
        try (Communicator c = Communicator.builder(CudaTransport.over(Transports.open("shm", job.context(0), SMALL_SLOTS),
                device)).wireCompression(DataType.BFLOAT16).build()) {
            GradientBuffer host = GradientBuffer.wrap(new float[] {1.000_001f});
            GradientBuffer onDevice = device.allocate(DataType.FLOAT32, 1);
            device.copyFromHost(host, onDevice);
            c.allReduceBlocking(onDevice, ReduceOp.SUM);
            GradientBuffer result = GradientBuffer.wrap(new float[1]);
            device.copyToHost(onDevice, result);
            assertEquals(host.getBits(0), result.getBits(0), "a bfloat16 wire would have rounded 1.000001 to 1");

            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> c.allReduce(onDevice,
                    onDevice, ReduceOp.SUM, c.allReduceChoice(host, host)).block());
            assertTrue(e.getMessage().contains("BFLOAT16 wire"), e.getMessage());
        }
    }

    @Test
    void aDeviceFaultOnOneRankIsAnErrorOnEveryRank() throws Exception {
        int ranks = 3;
        List<DeviceRanks.Outcome<Object>> outcomes = DeviceRanks.outcomes(device, ranks, SMALL_SLOTS, "ring",
                Duration.ofSeconds(20), c -> {
                    // rank 1's input lies at an address no allocation holds: its first kernel fails on the device
                    GradientBuffer in = c.rank() == 1 ? device.wrap(0x10, 4096, DataType.FLOAT32)
                            : device.allocate(DataType.FLOAT32, 4096);
                    c.allReduceBlocking(in, device.allocate(DataType.FLOAT32, 4096), ReduceOp.SUM);
                    return "completed";
                });
        for (int r = 0; r < ranks; r++) {
            assertNotNull(outcomes.get(r).error(), "rank " + r + " completed");
        }
        // rank 1's first device operation on its input is a copy out of it or a reduction reading it, whichever its
        // pipeline issues first; either way the error names that operation and the bytes it could not reach
        String failed = String.valueOf(outcomes.get(1).error());
        assertTrue(failed.contains("rank 1, allreduce #0") && namesTheBadAccess(failed), failed);
        // ranks 0 and 2 share rank 1's context (threads of one process on one device): each reports rank 1's abort,
        // or, first, the context's sticky error at its own next device call, as CUDA reports it on every stream
        for (int r : new int[] {0, 2}) {
            String peer = String.valueOf(outcomes.get(r).error());
            assertTrue(namesTheBadAccess(peer) && (peer.contains("rank " + r + ", allreduce #0: rank 1 aborted the job")
                    || peer.contains("rank " + r + ", allreduce #0") && peer.contains("an earlier asynchronous error")), peer);
        }
    }

    private static boolean namesTheBadAccess(String message) {
        return message.contains("is not inside one") && (message.contains("CudaException: cuMemcpy")
                || message.contains("gs_reduce_float32_sum failed: CUDA_ERROR_ILLEGAL_ADDRESS"));
    }

    private static GradientBuffer filled(DataType type, int count, int rank) {
        GradientBuffer buffer = GradientBuffer.allocateDirect(type, count);
        CheckPattern.fill(buffer, ReduceOp.SUM, rank);
        return buffer;
    }

    private static long fingerprint(GradientBuffer b) {
        long h = 1125899906842597L;
        for (int i = 0; i < b.count(); i++) {
            h = 31 * h + b.getBits(i);
        }
        return h;
    }
}
