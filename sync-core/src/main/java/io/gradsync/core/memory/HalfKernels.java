package io.gradsync.core.memory;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.settings.Setting;

/**
 * The bfloat16 and float16 reductions and conversions at vector width, where the JVM offers the Vector API: each element is
 * widened to float32, combined and rounded back by scalar code otherwise ({@link HalfFloats}), which runs at
 * about a tenth of a copy's speed. The Vector API is an incubator module ({@code jdk.incubator.vector}, JDK 16
 * and later) that a JVM resolves only when asked ({@code --add-modules jdk.incubator.vector}); without it the
 * scalar kernels run, with the same results bit for bit.
 */
interface HalfKernels {
    /**
     * Which kernels run: {@code vector} (needs the module) or {@code scalar}. The vector kernels are the 16-bit ones on
     * every JDK and, on JDK 22+ (memory segments), the float32, float64 and int32 reductions and int64's sum.
     */
    Setting<String> CHOICE = Setting.oneOf("gradsync.kernels", null, "vector", "scalar")
            .unsetMeans("vector when the JVM has jdk.incubator.vector, scalar otherwise");

    String MODULE = "jdk.incubator.vector";

    /** {@code dst[i] = a[i] op b[i]} as {@link Kernels#reduce} says, for {@code type} BFLOAT16 or FLOAT16. */
    // Three operands as (base, offset) pairs, as in Kernels.
    @SuppressWarnings("checkstyle:ParameterNumber")
    void reduce(DataType type, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff, int count);

    /** {@code dst[i] = dst[i] / divisor} as {@link Kernels#divide} says, for BFLOAT16 or FLOAT16. */
    void divide(DataType type, Object dst, long dstOff, int count, int divisor);

    /** float32 to {@code wire} as {@link WireCodec#encode} says. */
    void encode(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count);

    /** {@code wire} to float32 as {@link WireCodec#decode} says. */
    void decode(DataType wire, Object src, long srcOff, Object dst, long dstOff, int count);

    /** float32 through {@code wire} and back, in place, as {@link WireCodec#round} says. */
    void round(DataType wire, Object base, long offset, int count);

    /** {@code dst[i] = a[i] op float32(b[i])}, {@code a} and {@code dst} float32, as {@link WireCodec#reduce} says. */
    @SuppressWarnings("checkstyle:ParameterNumber")
    void reduceWire(DataType wire, ReduceOp op, Object a, long aOff, Object b, long bOff, Object dst, long dstOff, int count);

    /** The vector kernels if {@link #CHOICE} asks for them or leaves it to the JVM and the JVM has the module; else null. */
    static HalfKernels load() {
        String choice = CHOICE.get();
        boolean present = ModuleLayer.boot().findModule(MODULE).isPresent();
        if ("scalar".equals(choice) || choice == null && !present) {
            return null;
        }
        if (!present) {
            throw new IllegalArgumentException("-D" + CHOICE.name() + "=vector needs the JVM option --add-modules " + MODULE);
        }
        try {
            // by name: the class links against the module, which a JVM without it cannot load
            return (HalfKernels) Class.forName(HalfKernels.class.getPackageName() + ".HalfVectorKernels")
                    .getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException | LinkageError e) {
            // a vector shape without a half-width one for the 16-bit lanes, or an incubator API that changed
            if (choice == null) {
                System.getLogger(HalfKernels.class.getName()).log(System.Logger.Level.WARNING,
                        "16-bit kernels: the Vector API kernels did not load, the scalar ones run", e);
                return null;
            }
            throw new IllegalStateException("-D" + CHOICE.name() + "=vector: the Vector API kernels did not load", e);
        }
    }
}
