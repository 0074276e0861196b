package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The kernels' loops on the JDK 22+ foreign path, one hidden copy of {@link SegmentKernels} per
 * combination of memory segment classes (first input, second input, output).
 *
 * <p>Why copies: a segment access is a chain of calls on the segment's class inside the JDK. The JIT
 * inlines that chain where the type profile at the access shows one class, and profiles belong to
 * methods. One copy of the loops serving every call sees user arrays, direct buffers and mapped
 * shared-memory slots at the same accesses; its profile is then mixed, every access becomes a call,
 * and JMH measured the kernels about 50 times slower. Testing the class at each access inside one copy
 * was tried and was worse for heap gradients: C2 hoisted one class's range checks ahead of the loop
 * ("profiled loop predicates") and deoptimised whenever a call brought another class
 * (docs/benchmarks.md). A hidden class has methods, and so profiles, of its own: with a copy per
 * combination every loop sees one class per operand, as on JDK 17 with {@code Unsafe}.
 *
 * <p>Up to {@value #KINDS} segment classes get copies (a job meets three or four: heap arrays of its
 * types, direct buffers, mapped files); calls with any other class share one copy, correct but not
 * specialised, and so do all calls where {@code SegmentKernels.class} cannot be read as a resource (a
 * class loader that serves no class files). Copies are defined on first use and kept for the JVM's life.
 */
final class KernelCopies {

    /** What a copy does: the loops of {@link Kernels} and {@link WireCodec}. */
    interface Loops {
        // Three operands as (segment, offset) pairs, as the kernels take them (see Kernels.reduce).
        @SuppressWarnings("checkstyle:ParameterNumber")
        void reduce(DataType type, ReduceOp op, MemorySegment a, long aOff, MemorySegment b, long bOff,
                    MemorySegment dst, long dstOff, int count);

        void divide(DataType type, MemorySegment dst, long dstOff, int count, int divisor);

        void encode(DataType wire, MemorySegment src, long srcOff, MemorySegment dst, long dstOff, int count);

        void decode(DataType wire, MemorySegment src, long srcOff, MemorySegment dst, long dstOff, int count);

        void round(DataType wire, MemorySegment base, long offset, int count);

        // Three operands as (segment, offset) pairs, as the kernels take them (see Kernels.reduce).
        @SuppressWarnings("checkstyle:ParameterNumber")
        void reduceWire(DataType wire, ReduceOp op, MemorySegment a, long aOff, MemorySegment b, long bOff,
                        MemorySegment dst, long dstOff, int count);
    }

    /**
     * What a copy of {@link SegmentVectorKernels} does: {@link Loops#reduce} and {@link Loops#divide} a vector at a
     * time, for the types and operators {@link VectorReductions} says they cover, on memory that is not mapped.
     */
    interface VectorLoops {
        // Three operands as (segment, offset) pairs, as the kernels take them (see Kernels.reduce).
        @SuppressWarnings("checkstyle:ParameterNumber")
        void reduce(DataType type, ReduceOp op, MemorySegment a, long aOff, MemorySegment b, long bOff,
                    MemorySegment dst, long dstOff, int count);

        void divide(DataType type, MemorySegment dst, long dstOff, int count, int divisor);
    }

    static final int KINDS = 8;
    /**
     * The segment classes met so far, a class's index its kind; copied on write. A scan of a few
     * classes costs less per kernel call than a {@code ClassValue} lookup.
     */
    private static volatile Class<?>[] kinds = {};
    private static final AtomicReferenceArray<Loops> COPIES = new AtomicReferenceArray<>(KINDS * KINDS * KINDS);
    private static final Loops SHARED = new SegmentKernels();
    private static final byte[] CLASS_FILE = classFile("SegmentKernels.class");
    /**
     * Whether the Vector API loops run: where the vector kernels do ({@link Kernels#HALF_VECTORS}, which
     * {@code gradsync.kernels} chooses), as they link against the module a JVM resolves only when asked.
     */
    static final boolean VECTORS = Kernels.HALF_VECTORS != null;
    private static final AtomicReferenceArray<VectorLoops> VECTOR_COPIES = new AtomicReferenceArray<>(KINDS * KINDS * KINDS);
    private static final VectorLoops VECTOR_SHARED = VECTORS ? sharedVectorLoops() : null;
    private static final byte[] VECTOR_CLASS_FILE = VECTORS ? classFile("SegmentVectorKernels.class") : null;

    private KernelCopies() {
    }

    /** The copy for these segments' classes. */
    static Loops of(MemorySegment a, MemorySegment b, MemorySegment dst) {
        return copyFor(COPIES, CLASS_FILE, SHARED, a, b, dst);
    }

    /** The copy of the Vector API loops for these segments' classes; only where they run ({@link #VECTORS}). */
    static VectorLoops vectorsOf(MemorySegment a, MemorySegment b, MemorySegment dst) {
        return copyFor(VECTOR_COPIES, VECTOR_CLASS_FILE, VECTOR_SHARED, a, b, dst);
    }

    /** The copy in {@code copies} for these segments' classes, defined on first use; {@code shared} past the kinds. */
    private static <T> T copyFor(AtomicReferenceArray<T> copies, byte[] classFile, T shared, MemorySegment a,
                                 MemorySegment b, MemorySegment dst) {
        int ka = kind(a.getClass());
        int kb = kind(b.getClass());
        int kd = kind(dst.getClass());
        if ((ka | kb | kd) < 0 || classFile == null) {
            return shared;
        }
        int slot = (ka * KINDS + kb) * KINDS + kd;
        T copy = copies.get(slot);
        return copy != null ? copy : define(copies, classFile, slot);
    }

    private static int kind(Class<?> type) {
        Class<?>[] known = kinds;
        for (int i = 0; i < known.length; i++) {
            if (known[i] == type) {
                return i;
            }
        }
        return addKind(type);
    }

    /** The new class's kind, or -1 once {@value #KINDS} classes have kinds (it allocates nothing then). */
    private static synchronized int addKind(Class<?> type) {
        Class<?>[] known = kinds;
        for (int i = 0; i < known.length; i++) {
            if (known[i] == type) {
                return i;
            }
        }
        if (known.length == KINDS) {
            return -1;
        }
        Class<?>[] more = Arrays.copyOf(known, known.length + 1);
        more[known.length] = type;
        kinds = more;
        return known.length;
    }

    private static synchronized <T> T define(AtomicReferenceArray<T> copies, byte[] classFile, int slot) {
        T copy = copies.get(slot);
        if (copy == null) {
            try {
                MethodHandles.Lookup hidden = MethodHandles.lookup().defineHiddenClass(classFile, true);
                @SuppressWarnings("unchecked")
                T made = (T) hidden.findConstructor(hidden.lookupClass(), MethodType.methodType(void.class)).invoke();
                copy = made;
            } catch (Throwable e) {
                throw new IllegalStateException("cannot define a copy of the kernels", e);
            }
            copies.set(slot, copy);
        }
        return copy;
    }

    /** By name: the class links against the Vector API's module. */
    private static VectorLoops sharedVectorLoops() {
        try {
            return (VectorLoops) Class.forName(KernelCopies.class.getPackageName() + ".SegmentVectorKernels")
                    .getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot load the Vector API kernels", e);
        }
    }

    private static byte[] classFile(String name) {
        try (InputStream in = SegmentKernels.class.getResourceAsStream(name)) {
            return in == null ? null : in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
