package io.gradsync.core.bucket;

import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Kernels;
import io.gradsync.core.memory.Region;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.IntFunction;
import java.util.stream.IntStream;

/**
 * The gradients of a step (types and counts in arrival order) and the buckets they are packed into.
 * Fixed once; reused every step. Buckets are filled per type in arrival order: the first bucket of each
 * type holds up to {@code firstBucketBytes}, later ones up to {@code bucketBytes}; a gradient larger
 * than the cap gets a bucket of its own.
 */
final class Layout {
    final DataType[] types;
    final int[] counts;
    final long firstBucketBytes;
    final long bucketBytes;
    /** Per gradient: its bucket and its byte offset in it. */
    final int[] bucketOf;
    final long[] offsetOf;
    final Bucket[] buckets;
    /** Bucket ids in the order they become full (the order of their last gradient). */
    final int[] readyOrder;
    /** Per gradient: a view of its place in its bucket. */
    final GradientBuffer[] views;
    /** The first byte of every non-empty view, ascending, and the position of the view starting there. */
    private final long[] viewStarts;
    private final int[] viewAtStart;

    /** One bucket: off-heap memory for gradients of one type. */
    static final class Bucket {
        final int id;
        final DataType type;
        final int[] gradients;
        final GradientBuffer buffer;
        final long bytes;
        /** Gradients of the current step copied in (touched by the step's upstream thread only). */
        int arrived;
        /** When it was handed to the communicator this step (Timeline time), and its Timeline sequence number. */
        long submitNanos;
        long traceSeq;
        int traceName;

        Bucket(int id, DataType type, int[] gradients, GradientBuffer buffer) {
            this.id = id;
            this.type = type;
            this.gradients = gradients;
            this.buffer = buffer;
            this.bytes = buffer.byteSize();
        }

        GradientBuffer buffer() {
            return buffer;
        }
    }

    private Layout(DataType[] types, int[] counts, long firstBucketBytes, long bucketBytes, IntFunction<ByteBuffer> allocator) {
        this.types = types;
        this.counts = counts;
        this.firstBucketBytes = firstBucketBytes;
        this.bucketBytes = bucketBytes;
        int n = types.length;
        bucketOf = new int[n];
        offsetOf = new long[n];
        views = new GradientBuffer[n];
        buckets = allocate(assign(), allocator);
        readyOrder = readyOrder(buckets);
        int[] nonEmpty = IntStream.range(0, n).filter(p -> counts[p] > 0).boxed()
                .sorted(Comparator.comparingLong(p -> views[p].region().address())).mapToInt(Integer::intValue).toArray();
        viewAtStart = nonEmpty;
        viewStarts = Arrays.stream(nonEmpty).mapToLong(p -> views[p].region().address()).toArray();
    }

    /** Which gradients share a bucket, and its type. */
    private record Members(List<List<Integer>> gradients, List<DataType> types) {
    }

    /**
     * Puts each gradient, in order, into the open bucket of its type, or a new one when it would overflow the cap (a
     * type's first bucket {@code firstBucketBytes}, later ones {@code bucketBytes}); fills {@link #bucketOf} and
     * {@link #offsetOf}.
     */
    private Members assign() {
        Map<DataType, Integer> open = new EnumMap<>(DataType.class);
        Map<DataType, Long> openBytes = new EnumMap<>(DataType.class);
        Members members = new Members(new ArrayList<>(), new ArrayList<>());
        List<Long> caps = new ArrayList<>();
        for (int p = 0; p < types.length; p++) {
            DataType t = types[p];
            long bytes = (long) counts[p] * t.bytes();
            Integer b = open.get(t);
            if (b != null && openBytes.get(t) + bytes > caps.get(b) && openBytes.get(t) > 0) {
                b = null;
            }
            if (b == null) {
                b = members.gradients().size();
                caps.add(open.containsKey(t) || hasBucketOf(members.types(), t) ? bucketBytes : firstBucketBytes);
                members.gradients().add(new ArrayList<>());
                members.types().add(t);
                open.put(t, b);
                openBytes.put(t, 0L);
            }
            bucketOf[p] = b;
            offsetOf[p] = openBytes.get(t);
            openBytes.put(t, openBytes.get(t) + bytes);
            members.gradients().get(b).add(p);
        }
        return members;
    }

    /** Each bucket's memory, and each gradient's view of its place in it ({@link #views}). */
    private Bucket[] allocate(Members members, IntFunction<ByteBuffer> allocator) {
        Bucket[] made = new Bucket[members.gradients().size()];
        for (int b = 0; b < made.length; b++) {
            DataType t = members.types().get(b);
            int[] g = members.gradients().get(b).stream().mapToInt(Integer::intValue).toArray();
            long total = 0;
            for (int p : g) {
                total += (long) counts[p] * t.bytes();
            }
            if (total > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("bucket of " + total + " bytes exceeds 2 GiB");
            }
            ByteBuffer memory = allocator.apply((int) total);
            made[b] = new Bucket(b, t, g, GradientBuffer.wrap(memory, t));
            for (int p : g) {
                ByteBuffer slice = memory.slice((int) offsetOf[p], counts[p] * t.bytes()).order(ByteOrder.nativeOrder());
                views[p] = GradientBuffer.wrap(slice, t);
            }
        }
        return made;
    }

    /** Bucket ids in the order of their last gradient: the order they become full when gradients come in order. */
    private static int[] readyOrder(Bucket[] buckets) {
        return Arrays.stream(buckets).sorted(Comparator.comparingInt(b -> b.gradients[b.gradients.length - 1]))
                .mapToInt(b -> b.id).toArray();
    }

    private static boolean hasBucketOf(List<DataType> bucketTypes, DataType t) {
        return bucketTypes.contains(t);
    }

    /** @param allocator makes each bucket's memory, zeroed, in native byte order */
    static Layout of(DataType[] types, int[] counts, long firstBucketBytes, long bucketBytes, IntFunction<ByteBuffer> allocator) {
        if (types.length != counts.length) {
            throw new IllegalArgumentException(types.length + " types but " + counts.length + " counts");
        }
        for (int p = 0; p < types.length; p++) {
            if (types[p] == null) {
                throw new NullPointerException("type of gradient #" + p);
            }
            if (counts[p] < 0) {
                throw new IllegalArgumentException("gradient #" + p + " has count " + counts[p]);
            }
        }
        return new Layout(types.clone(), counts.clone(), firstBucketBytes, bucketBytes, allocator);
    }

    int size() {
        return types.length;
    }

    boolean matches(int p, GradientBuffer g) {
        return p < types.length && g.dataType() == types[p] && g.count() == counts[p];
    }

    /**
     * The position of {@code g} in the step: a view of bucket memory ({@link GradientBuckets#allocate}) knows
     * its own place, wherever in the step it is fed; any other gradient takes the place it arrives at,
     * {@code arrival}. Looks up the view's first byte: no allocation.
     */
    int positionOf(GradientBuffer g, int arrival) {
        if (arrival < views.length && isView(arrival, g)) {
            return arrival;
        }
        Region r = g.region();
        if (!r.isOffHeap()) {
            return arrival;
        }
        if (r.byteLength() == 0) {
            for (int p = 0; p < views.length; p++) {
                if (views[p] == g) {
                    return p;
                }
            }
            return arrival;
        }
        int i = Arrays.binarySearch(viewStarts, r.address());
        return i >= 0 && views[viewAtStart[i]].byteSize() == r.byteLength() ? viewAtStart[i] : arrival;
    }

    /**
     * Why gradient {@code g}, arriving {@code arrival}-th, cannot take position {@code p}, or null (and then
     * {@code fed[p]} is set): its type or count differs, or the position was fed already this step (a view
     * fed twice, or a view fed out of its order beside plain gradients that took its place first).
     */
    String misplaced(int p, int arrival, GradientBuffer g, boolean[] fed) {
        if (!matches(p, g)) {
            return GradientBuckets.mismatch(this, p, g);
        }
        if (fed[p]) {
            return "gradient #" + p + " fed twice in one step (again as the gradient arriving at #" + arrival + ")"
                    + (p != arrival ? ": it is the bucket view of #" + p + ", whose place was taken" : "");
        }
        fed[p] = true;
        return null;
    }

    /** True when {@code g} is the view of gradient {@code p} (zero-copy: nothing to move). */
    boolean isView(int p, GradientBuffer g) {
        if (g == views[p]) {
            return true;
        }
        Region a = g.region();
        Region v = views[p].region();
        return a.startsAt(v, 0) && a.byteLength() == v.byteLength();
    }

    /** Copies (or, when {@code add}, adds) gradient {@code p} into its bucket. */
    void copyIn(int p, GradientBuffer g, boolean add) {
        if (isView(p, g) || counts[p] == 0) {
            return;
        }
        Region dst = views[p].region();
        Region src = g.region();
        if (add) {
            Kernels.reduce(types[p], ReduceOp.SUM, dst.base(), dst.offset(), src.base(), src.offset(),
                    dst.base(), dst.offset(), counts[p]);
        } else {
            Kernels.copy(src.base(), src.offset(), dst.base(), dst.offset(), dst.byteLength());
        }
    }

    /** Copies gradient {@code p}'s reduced value from its bucket into {@code g}. */
    void copyOut(int p, GradientBuffer g) {
        if (isView(p, g) || counts[p] == 0) {
            return;
        }
        Region src = views[p].region();
        Region dst = g.region();
        Kernels.copy(src.base(), src.offset(), dst.base(), dst.offset(), src.byteLength());
    }

    /** A hash of the gradient sequence and the bucket sizes; never 0 (0 marks a failed step). */
    long fingerprint() {
        long h = 0xcbf29ce484222325L;
        h = mix(h, types.length);
        h = mix(h, firstBucketBytes);
        h = mix(h, bucketBytes);
        for (int p = 0; p < types.length; p++) {
            h = mix(h, types[p].ordinal());
            h = mix(h, counts[p]);
        }
        return h == 0 ? 1 : h;
    }

    private static long mix(long h, long v) {
        for (int i = 0; i < 8; i++) {
            h ^= (v >>> (8 * i)) & 0xFF;
            h *= 0x100000001b3L;
        }
        return h;
    }

    /** One gradient's description, e.g. {@code float32[4096]}. */
    static String describe(DataType type, int count) {
        return type.name().toLowerCase(Locale.ROOT) + "[" + count + "]";
    }

    /** Gradient {@code p} packed as a long: type in the top bits, count below. */
    static long encode(DataType type, int count) {
        return ((long) (type.ordinal() + 1) << 40) | (count & 0xFFFFFFFFL);
    }

    static String decode(long e) {
        int t = (int) (e >>> 40) - 1;
        if (t < 0 || t >= DataType.values().length) {
            return "?";
        }
        return describe(DataType.values()[t], (int) (e & 0xFFFFFFFFL));
    }

    String summary() {
        StringBuilder b = new StringBuilder();
        b.append(types.length).append(" gradients in ").append(buckets.length).append(" buckets (");
        for (int i = 0; i < buckets.length; i++) {
            if (i > 0) {
                b.append(", ");
            }
            Bucket k = buckets[i];
            b.append(k.type.name().toLowerCase(Locale.ROOT)).append(' ').append(k.gradients.length).append(" grads ")
                    .append(k.bytes).append(" B");
        }
        return b.append(')').toString();
    }
}
