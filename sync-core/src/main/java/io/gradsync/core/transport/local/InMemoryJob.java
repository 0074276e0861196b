package io.gradsync.core.transport.local;

import io.gradsync.core.transport.Call;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.PeerAbort;
import io.gradsync.core.transport.StreamEnd;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicReferenceArray;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A job whose ranks are threads of this JVM: the {@link JobContext} of the in-JVM transport, and of
 * tests that run another transport's endpoints in one JVM. Its control plane is shared memory, so
 * announcements, aborts and stream ends reach peers at once.
 */
public final class InMemoryJob {
    private final int size;
    private final int[] hostOfRank;
    private final String instanceId;
    private final byte[] secret = new byte[32];
    private final Duration gatherTimeout;
    private final AtomicReferenceArray<Call> announced;
    private final AtomicReferenceArray<PeerAbort> aborts;
    private final Queue<StreamEnd>[] streamEnds;
    private final AtomicReferenceArray<Context> contexts;
    private final Object gatherLock = new Object();
    private final byte[][] gathering;
    private byte[][] gathered;
    private int gatherArrivals;
    private long gatherGeneration;

    @SuppressWarnings("unchecked")
    private InMemoryJob(int[] hostOfRank, Duration gatherTimeout) {
        this.size = hostOfRank.length;
        this.hostOfRank = hostOfRank;
        this.gatherTimeout = gatherTimeout;
        SecureRandom random = new SecureRandom();
        random.nextBytes(secret);
        byte[] id = new byte[8];
        random.nextBytes(id);
        this.instanceId = HexFormat.of().formatHex(id);
        this.announced = new AtomicReferenceArray<>(size);
        this.aborts = new AtomicReferenceArray<>(size);
        this.streamEnds = new Queue[size];
        for (int r = 0; r < size; r++) {
            streamEnds[r] = new ConcurrentLinkedQueue<>();
        }
        this.contexts = new AtomicReferenceArray<>(size);
        this.gathering = new byte[size][];
    }

    /** A job of {@code size} ranks on one host. */
    public static InMemoryJob create(int size) {
        if (size < 1) {
            throw new IllegalArgumentException("size must be >= 1, was " + size);
        }
        return new InMemoryJob(new int[size], Duration.ofMinutes(2));
    }

    /**
     * A job whose ranks pretend to run on several hosts: rank {@code r} on host {@code hostOfRank[r]},
     * hosts numbered in order of their first rank, e.g. {@code {0, 0, 1, 1}} or {@code {0, 1, 0, 1}}.
     */
    public static InMemoryJob create(int[] hostOfRank) {
        return new InMemoryJob(checkedHosts(Objects.requireNonNull(hostOfRank, "hostOfRank")), Duration.ofMinutes(2));
    }

    private static int[] checkedHosts(int[] hostOfRank) {
        if (hostOfRank.length < 1) {
            throw new IllegalArgumentException("size must be >= 1, was " + hostOfRank.length);
        }
        int nextHost = 0;
        for (int host : hostOfRank) {
            if (host < 0 || host > nextHost) {
                throw new IllegalArgumentException("hosts must be numbered 0, 1, ... in order of their first rank: "
                        + Arrays.toString(hostOfRank));
            }
            nextHost = Math.max(nextHost, host + 1);
        }
        return hostOfRank.clone();
    }

    public int size() {
        return size;
    }

    /** The context of {@code rank}; each rank's is handed out once. */
    public JobContext context(int rank) {
        Objects.checkIndex(rank, size);
        Context context = new Context(rank);
        if (!contexts.compareAndSet(rank, null, context)) {
            throw new IllegalStateException("the job context of rank " + rank + " was already taken");
        }
        return context;
    }

    private byte[][] allGather(int rank, byte[] data) {
        synchronized (gatherLock) {
            long generation = gatherGeneration;
            if (gathering[rank] != null) {
                throw new IllegalStateException("rank " + rank + " is already in an all-gather");
            }
            gathering[rank] = data.clone();
            if (++gatherArrivals == size) {
                gathered = gathering.clone();
                Arrays.fill(gathering, null);
                gatherArrivals = 0;
                gatherGeneration++;
                gatherLock.notifyAll();
                return gathered;
            }
            long deadline = System.nanoTime() + gatherTimeout.toNanos();
            while (gatherGeneration == generation) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new IllegalStateException("rank " + rank + ": all-gather did not complete within "
                            + gatherTimeout.toMillis() + " ms; ranks that have not reached it: " + missingFromGather());
                }
                try {
                    gatherLock.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("rank " + rank + ": interrupted in an all-gather", e);
                }
            }
            return gathered;
        }
    }

    private String missingFromGather() {
        StringBuilder missing = new StringBuilder("[");
        for (int r = 0; r < size; r++) {
            if (gathering[r] == null) {
                missing.append(missing.length() > 1 ? ", " : "").append(r);
            }
        }
        return missing.append(']').toString();
    }

    private final class Context implements JobContext {
        private final int rank;
        private volatile boolean abortedHere;

        Context(int rank) {
            this.rank = rank;
        }

        @Override
        public int rank() {
            return rank;
        }

        @Override
        public int size() {
            return size;
        }

        @Override
        public int hostOf(int peer) {
            return hostOfRank[Objects.checkIndex(peer, size)];
        }

        @Override
        public String instanceId() {
            return instanceId;
        }

        @Override
        public InetAddress localAddress() {
            return InetAddress.getLoopbackAddress();
        }

        @Override
        public byte[][] allGather(byte[] data) {
            return InMemoryJob.this.allGather(rank, data);
        }

        @Override
        public int derivedKey(String label) {
            try {
                Mac mac = Mac.getInstance("HmacSHA256");
                mac.init(new SecretKeySpec(secret, "HmacSHA256"));
                return ByteBuffer.wrap(mac.doFinal(label.getBytes(StandardCharsets.UTF_8))).getInt();
            } catch (GeneralSecurityException e) {
                throw new IllegalStateException("HmacSHA256 unavailable", e);
            }
        }

        @Override
        public void announce(Call call) {
            announced.set(rank, call);
        }

        @Override
        public Call announced(int peer) {
            return announced.get(peer);
        }

        @Override
        public void abort(long call, String reason, boolean disagreement) {
            abortedHere = true;
            PeerAbort notice = new PeerAbort(rank, call, reason, disagreement);
            for (int peer = 0; peer < size; peer++) {
                if (peer != rank) {
                    aborts.compareAndSet(peer, null, notice);
                }
            }
        }

        @Override
        public PeerAbort pendingAbort() {
            return aborts.get(rank);
        }

        @Override
        public boolean aborted() {
            return abortedHere || aborts.get(rank) != null;
        }

        @Override
        public void endStream(long stream, long calls, String reason) {
            StreamEnd notice = new StreamEnd(rank, stream, calls, reason);
            for (int peer = 0; peer < size; peer++) {
                if (peer != rank) {
                    streamEnds[peer].add(notice);
                }
            }
        }

        @Override
        public StreamEnd pollStreamEnd() {
            return streamEnds[rank].poll();
        }

        @Override
        public void close() {
            // nothing is held per rank; the job's memory goes with the last reference
        }
    }
}
