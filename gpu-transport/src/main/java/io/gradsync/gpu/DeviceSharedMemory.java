package io.gradsync.gpu;

import io.gradsync.core.memory.DeviceMemory;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import io.gradsync.core.transport.CrossMemoryReads;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.SharedMemory;
import io.gradsync.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The shared memory of a communicator over the {@code cuda} transport on a host transport that shares memory (every
 * rank on one host): the host transport's for host buffers, and for buffers in the device's memory a name its peers
 * turn into a device pointer of their own, so that the direct AllReduce reads its peers' device buffers in place
 * with the device's kernels, never staging them through the host.
 * <ul>
 *   <li>Every rank a thread of this process: the name is the device address itself; ranks on other devices of the
 *       process read it through peer access, which each rank enables at set-up towards the devices of the others.</li>
 *   <li>Otherwise, CUDA IPC (NCCL's registered buffers, PyTorch's shared CUDA tensors): a rank exports the
 *       allocation that holds a buffer ({@code cuMemGetAddressRange}, {@code cuIpcGetMemHandle}; allocations of
 *       {@value #MIN_EXPORT_BYTES} bytes or more) into an entry of its export table, host shared memory its peers
 *       map at set-up; the name is the entry and the offset in the allocation. A process maps the handle once
 *       ({@code cuIpcOpenMemHandle}, {@link CudaDevice#importAllocation}) and keeps the mapping while the entry
 *       holds the same handle: a training loop's gradients cost one open per process and allocation. A peer in this
 *       same process reads the entry's base pointer instead (a process cannot open its own handle).</li>
 * </ul>
 * Ranks name no device buffer where two processes cannot map each other's memory, or two devices of one process have
 * no peer access between them (found at set-up, {@link #processesMapEachOther}). Memory CUDA cannot export
 * (allocations under {@value #MIN_EXPORT_BYTES} bytes, virtual-memory-management allocations without a shareable
 * handle, more than {@value #ENTRIES} live allocations) gets no name: the direct
 * AllReduce copies it through a window of this device's memory that does ({@link #allocateDevice}). Used by the
 * communicator's progress thread, and {@link #handleOf} by the caller's too (the selector asks it).
 */
final class DeviceSharedMemory implements SharedMemory {
    private static final System.Logger LOG = System.getLogger(DeviceSharedMemory.class.getName());
    /** Marks a handle as naming device memory: host handles never set it, and device addresses stay below it. */
    static final long DEVICE = 1L << 62;
    /** Marks a device handle as an export table entry and offset rather than an address. */
    private static final long EXPORTED = 1L << 61;
    private static final int OFFSET_BITS = 40;
    private static final long OFFSET_MASK = (1L << OFFSET_BITS) - 1;
    /**
     * The smallest allocation exported. CUDA carves smaller ones out of shared 2 MiB chunks, whose IPC handle names
     * the chunk: one handle for several allocations, mapped once per process. From this size on an allocation has
     * its own handle, and its mapping starts at its base (PyTorch exports its allocator's segments likewise).
     */
    static final long MIN_EXPORT_BYTES = 2L << 20;
    /** Export table entries: an IPC handle, the allocation's base pointer in its process, and its size. */
    static final int ENTRIES = 1024;
    private static final int ENTRY_BYTES = 128;
    /** How many allocations a rank remembers (exported or not) before it forgets the freed ones. */
    private static final int KNOWN_ALLOCATIONS = 4 * ENTRIES;
    private static final int BASE_AT = IpcHandle.BYTES;
    private static final int SIZE_AT = IpcHandle.BYTES + 8;
    private static final int GATHERED_BYTES = 32;
    /**
     * The process each driver is, told apart from every other that may join a job: one driver per process in
     * production ({@link JCudaDriverApi#open}); the tests' host-memory drivers each stand for a process.
     */
    private static final Map<CudaDriver, UUID> PROCESSES = Collections.synchronizedMap(new IdentityHashMap<>());

    private final SharedMemory host;
    private final CudaDevice device;
    private final CudaDriver driver;
    private final int rank;
    /** Where each rank runs: its process and device serial (the first 24 bytes of what it gathered). */
    private final byte[][] where;
    private final boolean oneProcess;
    /** False where device buffers are never named to the peers (they stage). */
    private final boolean shareable;
    private final ByteBuffer table;
    /** This rank's allocations by buffer id. */
    private final Map<Long, Export> exports = new HashMap<>();
    private final long[] peerTables;
    private final Map<Long, Integer> exportedBases = new HashMap<>();
    /** Entries of freed allocations, taken again before {@link #nextEntry}. */
    private final ArrayDeque<Integer> freeEntries = new ArrayDeque<>();
    private int nextEntry;
    /** How many remembered allocations make the next export look for freed ones. */
    private int reclaimAt = KNOWN_ALLOCATIONS;
    private final Map<Long, Mapping> opened = new HashMap<>();
    /** What {@link #allocateDevice} allocated. */
    private final List<Long> windows = new ArrayList<>();

    /** An allocation of this rank's, as its export table names it. */
    private record Export(long base, long size, int entry) {
    }

    /** A peer's exported allocation mapped here. */
    private record Mapping(IpcHandle handle, long pointer) {
    }

    private DeviceSharedMemory(SharedMemory host, CudaDevice device, int rank, byte[][] gathered, ByteBuffer exports,
                               boolean peersMapped) {
        this.host = host;
        this.device = device;
        this.driver = device.driver();
        this.rank = rank;
        this.table = exports;
        this.where = new byte[gathered.length][];
        this.peerTables = new long[gathered.length];
        for (int r = 0; r < gathered.length; r++) {
            where[r] = Arrays.copyOf(gathered[r], 24);
            peerTables[r] = ByteBuffer.wrap(gathered[r]).getLong(24);
        }
        this.oneProcess = Arrays.stream(where).allMatch(w -> sameProcess(w, where[rank]));
        this.shareable = peersMapped;
    }

    /**
     * The shared memory of an endpoint over {@code host}'s ({@code null} where it shares none: then none either),
     * after an all-gather of where the ranks run, which every rank makes when it opens the transport.
     */
    static DeviceSharedMemory of(SharedMemory host, CudaDevice device, JobContext job) {
        ByteBuffer exports = host == null ? null : host.allocate(ENTRIES * ENTRY_BYTES);
        ByteBuffer mine = ByteBuffer.allocate(GATHERED_BYTES);
        UUID process = PROCESSES.computeIfAbsent(device.driver(), d -> UUID.randomUUID());
        mine.putLong(process.getMostSignificantBits()).putLong(process.getLeastSignificantBits()).putLong(device.serial())
                .putLong(exports == null ? -1 : host.handleOf(Region.ofDirect(exports)));
        byte[][] gathered = job.allGather(mine.array());
        boolean peersMapped = processesMapEachOther(device, job, gathered);
        return host == null ? null : new DeviceSharedMemory(host, device, job.rank(), gathered, exports, peersMapped);
    }

    /**
     * Whether every process of the job can map the device memory of every other through CUDA IPC: in a job of several
     * processes, the first rank of each exports a probe allocation, maps every other process's probe and unmaps it,
     * and the ranks all-gather how it went. Where any pair cannot (GPUs without peer access between them, containers
     * that hide each other's devices) no device buffer is named to the peers, and AllReduce stages through host memory
     * where its first direct call would otherwise fail; the rank that could not says why. Before saying how it went,
     * every rank lets its device reach the devices of its own process's other ranks (peer access), which their
     * buffers named by address need; a pair of devices without it stages likewise. Two all-gathers that every rank
     * makes at set-up; nothing is allocated where all ranks are threads of one process.
     */
    static boolean processesMapEachOther(CudaDevice device, JobContext job, byte[][] gathered) {
        int rank = job.rank();
        boolean severalProcesses = !Arrays.stream(gathered).allMatch(g -> sameProcess(g, gathered[rank]));
        boolean firstOfItsProcess = true;
        for (int r = 0; r < rank; r++) {
            firstOfItsProcess &= !sameProcess(gathered[r], gathered[rank]);
        }
        boolean probing = severalProcesses && firstOfItsProcess;
        CudaDriver driver = device.driver();
        long probe = 0;
        byte[] mine = new byte[1 + IpcHandle.BYTES];
        String failure = null;
        if (probing) {
            try {
                device.makeCurrent();
                probe = driver.memAlloc(MIN_EXPORT_BYTES);
                System.arraycopy(driver.ipcGetMemHandle(probe).toBytes(), 0, mine, 1, IpcHandle.BYTES);
                mine[0] = 1;
            } catch (CudaException e) {
                failure = "cannot export its device memory: " + e.getMessage();
            }
        }
        byte[][] outcomes;
        try {
            byte[][] probes = job.allGather(mine);
            for (int peer = 0; peer < probes.length && probing && failure == null; peer++) {
                if (probes[peer][0] == 1 && !sameProcess(gathered[peer], gathered[rank])) {
                    failure = mapAndUnmap(device, peer, IpcHandle.of(Arrays.copyOfRange(probes[peer], 1, 1 + IpcHandle.BYTES)));
                }
            }
            if (failure == null) {
                failure = reachDevicesOfThisProcess(device, rank, gathered);
            }
            outcomes = job.allGather(new byte[] {(byte) (failure == null ? 1 : 0)});
        } finally {
            if (probe != 0) {
                device.makeCurrent();
                driver.memFree(probe); // every peer had unmapped it before it said how it went
            }
        }
        if (failure != null) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + " " + failure + ": device buffers of this job are not read "
                    + "in place; their AllReduce stages through host memory");
        }
        return Arrays.stream(outcomes).allMatch(o -> o[0] == 1);
    }

    /**
     * Null when this rank's device reaches the memory of every other device its process's ranks run on (peer access,
     * enabled here), else why not: ranks of one process name their buffers by address, which a kernel on another
     * device reads only so.
     */
    private static String reachDevicesOfThisProcess(CudaDevice device, int rank, byte[][] gathered) {
        for (int peer = 0; peer < gathered.length; peer++) {
            long serial = ByteBuffer.wrap(gathered[peer]).getLong(16);
            if (!sameProcess(gathered[peer], gathered[rank]) || serial == device.serial()) {
                continue;
            }
            CudaDevice other = CudaDevice.withSerial(device.driver(), serial);
            String failure = other == null ? "cannot find rank " + peer + "'s device in its process" : device.reach(other);
            if (failure != null) {
                return failure;
            }
        }
        return null;
    }

    /** Null when {@code peer}'s probe maps here (and is unmapped again), else why not. */
    private static String mapAndUnmap(CudaDevice device, int peer, IpcHandle handle) {
        try {
            device.importAllocation(handle);
            device.releaseAllocation(handle);
            return null;
        } catch (CudaException e) {
            return "cannot map rank " + peer + "'s device memory on " + device.name() + ": " + e.getMessage();
        }
    }

    private static boolean sameProcess(byte[] a, byte[] b) {
        return Arrays.equals(a, 0, 16, b, 0, 16);
    }

    @Override
    public ByteBuffer allocate(int bytes) {
        return host.allocate(bytes);
    }

    /** This rank's device, where its peers map what it names (decided at set-up for the whole job). */
    @Override
    public boolean sharesDevice(DeviceMemory memory) {
        return shareable && memory == device;
    }

    /**
     * A window of this device's memory that the peers map: an allocation of at least {@value #MIN_EXPORT_BYTES} bytes,
     * so that CUDA exports it on its own; freed at {@link #close}.
     */
    @Override
    public synchronized Region allocateDevice(DeviceMemory memory, long bytes) {
        if (!sharesDevice(memory)) {
            throw new UnsupportedOperationException("no shared memory of " + memory.name() + " on rank " + rank);
        }
        device.makeCurrent();
        long window = driver.memAlloc(Math.max(bytes, MIN_EXPORT_BYTES));
        windows.add(window);
        return Region.ofDevice(device, window, bytes);
    }

    @Override
    public long handleOf(Region region) {
        if (!region.isDevice()) {
            long handle = host.handleOf(region);
            return (handle & DEVICE) == 0 ? handle : -1;
        }
        if (!shareable || region.base() != device || region.address() >= DEVICE) {
            return -1;
        }
        if (oneProcess) {
            return region.address() | DEVICE;
        }
        return exported(region.address(), region.byteLength());
    }

    /**
     * The name of {@code bytes} at {@code address} in an exported allocation, exporting it first; -1 if CUDA cannot.
     * An allocation is known by its buffer id, one driver query a call; a new one (another id, though at the same
     * base) is exported again, so that its entry never names freed memory. Synchronised: the caller's thread asks
     * too, when the selector chooses.
     */
    private synchronized long exported(long address, long bytes) {
        Export export;
        try {
            device.makeCurrent();
            long id = driver.pointerBufferId(address);
            export = exports.get(id);
            if (export == null) {
                export = export(id, address);
            }
        } catch (CudaException e) {
            return -1;
        }
        long offset = address - export.base();
        if (export.entry() < 0 || offset + bytes > export.size() || offset > OFFSET_MASK) {
            return -1;
        }
        return DEVICE | EXPORTED | (long) export.entry() << OFFSET_BITS | offset;
    }

    /** Exports the allocation {@code id} that holds {@code address} into the table entry of its base (entry -1: not exportable). */
    private Export export(long id, long address) {
        long[] range = driver.memGetAddressRange(address);
        long base = range[0];
        long size = range[1];
        Integer entry = exportedBases.get(base);
        boolean tableFull = size >= MIN_EXPORT_BYTES && entry == null && nextEntry == ENTRIES && freeEntries.isEmpty();
        if (tableFull || exports.size() >= reclaimAt) {
            reclaimFreedEntries();
            reclaimAt = Math.max(KNOWN_ALLOCATIONS, 2 * exports.size()); // many live ones: not a scan per new one
        }
        if (size < MIN_EXPORT_BYTES || entry == null && nextEntry == ENTRIES && freeEntries.isEmpty()) {
            entry = -1;
        } else {
            byte[] handle = driver.ipcGetMemHandle(base).toBytes();
            if (entry == null) {
                entry = freeEntries.isEmpty() ? nextEntry++ : freeEntries.pop();
                exportedBases.put(base, entry);
            }
            int at = entry * ENTRY_BYTES;
            table.put(at, handle);
            table.putLong(at + BASE_AT, base);
            table.putLong(at + SIZE_AT, size);
        }
        exports.values().removeIf(e -> e.base() == base); // the allocation this one replaced at its base
        Export export = new Export(base, size, entry);
        exports.put(id, export);
        return export;
    }

    /**
     * Forgets the allocations that have been freed since they were named (their base no longer holds the allocation
     * with their buffer id) and gives their entries back, when the table is full or too many are remembered. A peer never reads such an entry again: it reads an
     * entry only for a call that names it, and a buffer is freed only after its last call completed. Each entry
     * given back is cleared (size 0), so that a name of it would fail rather than map another allocation.
     */
    private void reclaimFreedEntries() {
        for (Iterator<Map.Entry<Long, Export>> it = exports.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<Long, Export> known = it.next();
            Export export = known.getValue();
            if (!freed(known.getKey(), export.base())) {
                continue;
            }
            it.remove();
            if (export.entry() >= 0) {
                exportedBases.remove(export.base());
                freeEntries.push(export.entry());
                int at = export.entry() * ENTRY_BYTES;
                table.put(at, new byte[IpcHandle.BYTES]);
                table.putLong(at + BASE_AT, 0);
                table.putLong(at + SIZE_AT, 0);
            }
        }
    }

    /** Whether the allocation {@code id} that was at {@code base} has been freed. */
    private boolean freed(long id, long base) {
        try {
            return driver.pointerBufferId(base) != id;
        } catch (CudaException e) {
            return true; // no allocation there any more
        }
    }

    @Override
    public Region peerRegion(int peer, long handle, long bytes) {
        if ((handle & DEVICE) == 0) {
            return host.peerRegion(peer, handle, bytes);
        }
        if ((handle & EXPORTED) == 0) {
            if (!oneProcess) {
                throw new TransportException(peer, "rank " + peer + " named a device buffer by its address, but not every "
                        + "rank of the job runs on one device of one process");
            }
            return Region.ofDevice(device, handle & ~DEVICE, bytes);
        }
        int entry = (int) ((handle & ~(DEVICE | EXPORTED)) >>> OFFSET_BITS);
        long offset = handle & OFFSET_MASK;
        if (entry >= ENTRIES || peerTables[peer] < 0) {
            throw new TransportException(peer, "rank " + peer + " named export entry " + entry + " of a table it has not shared");
        }
        Region peerTable = host.peerRegion(peer, peerTables[peer], (long) ENTRIES * ENTRY_BYTES);
        byte[] entryBytes = new byte[ENTRY_BYTES];
        Region into = Region.ofArray(entryBytes, 0, ENTRY_BYTES);
        Kernels.copy(peerTable.base(), peerTable.offset() + (long) entry * ENTRY_BYTES, into.base(), into.offset(), ENTRY_BYTES);
        ByteBuffer read = ByteBuffer.wrap(entryBytes).order(ByteOrder.nativeOrder());
        long base = read.getLong(BASE_AT);
        long size = read.getLong(SIZE_AT);
        if (offset + bytes > size) {
            throw new TransportException(peer, "rank " + peer + " named bytes " + offset + ".." + (offset + bytes)
                    + " of its exported allocation " + entry + ", which has " + size);
        }
        if (sameProcess(where[peer], where[rank])) {
            return Region.ofDevice(device, base + offset, bytes); // this process: its pointer is ours (peer access on another device)
        }
        return Region.ofDevice(device, open(peer, entry, IpcHandle.of(Arrays.copyOf(entryBytes, IpcHandle.BYTES)), size) + offset,
                bytes);
    }

    /**
     * The pointer here of {@code peer}'s export {@code entry}, mapped once for as long as the entry holds {@code handle};
     * the mapping must be as large as the allocation the peer exported, else offsets in it would not be the peer's.
     */
    private long open(int peer, int entry, IpcHandle handle, long size) {
        long key = (long) peer << 32 | entry;
        Mapping mapping = opened.get(key);
        if (mapping != null && mapping.handle().equals(handle)) {
            return mapping.pointer();
        }
        long[] mapped;
        try {
            mapped = device.importAllocation(handle);
        } catch (CudaException e) {
            throw new TransportException(peer, "rank " + peer + "'s device buffer cannot be mapped on " + device.name() + ": "
                    + e.getMessage());
        }
        if (mapping != null) {
            // the allocation the entry named before was freed by its owner after its last call, which completed after
            // every rank's device work on it: nothing queued here reads the old mapping any more
            device.releaseAllocation(mapping.handle());
        }
        opened.put(key, new Mapping(handle, mapped[0]));
        if (mapped[1] < size) {
            throw new TransportException(peer, "rank " + peer + " exported an allocation of " + size + " bytes, which maps as "
                    + mapped[1] + " bytes on " + device.name() + ": its offsets would not be the same here");
        }
        return mapped[0];
    }

    @Override
    public void resolvedByAll(long handle) {
        if ((handle & DEVICE) == 0) {
            host.resolvedByAll(handle);
        }
    }

    @Override
    public CrossMemoryReads crossMemoryReads() {
        return host.crossMemoryReads();
    }

    /** Releases the peers' allocations mapped here, and frees the windows; the device work that used them must be done. */
    synchronized void close() {
        for (Mapping mapping : opened.values()) {
            device.releaseAllocation(mapping.handle());
        }
        opened.clear();
        if (!windows.isEmpty()) {
            device.makeCurrent();
            windows.forEach(driver::memFree);
            windows.clear();
        }
    }
}
