package io.gradsync.gpu;

import io.gradsync.core.DataType;
import io.gradsync.core.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.stream.IntStream;

/**
 * Compares a device's results with the host's, bit for bit. The one allowance: where both operands are NaN,
 * any NaN passes, since the host itself does not fix which of the two comes out: the JIT may swap an
 * addition's operands, and HotSpot's compiled {@code Math.max}/{@code min} (an intrinsic) returns the second
 * NaN where the interpreter returns the first (seen on JDK 17, x86-64). reduce.cu returns the first. Every
 * other element, NaNs and signed zeros included, must have the host's bits.
 */
final class BitComparison {
    private static final int CHUNK = 1 << 20;

    /**
     * The outcome.
     *
     * @param mismatches elements whose bits differ (beyond the allowance)
     * @param nanAllowances elements that differ only as the allowance permits (two NaN operands)
     * @param first the first mismatch described ({@code a, b, host, device} in hex), or {@code null}
     */
    record Result(long mismatches, long nanAllowances, String first) {
        boolean passed() {
            return mismatches == 0;
        }
    }

    private BitComparison() {
    }

    /**
     * Compares {@code count} elements: {@code expected} and {@code actual} from their byte 0, the operands
     * {@code in} from their element offsets; {@code op} {@code null} (a division): every bit.
     */
    static Result compare(DataType type, ReduceOp op, Operands in, ByteBuffer expected, ByteBuffer actual, long count) {
        int size = type.bytes();
        int chunks = (int) ((count + CHUNK - 1) / CHUNK);
        Result[] results = new Result[chunks];
        IntStream.range(0, chunks).parallel().forEach(chunk -> {
            long from = (long) chunk * CHUNK;
            int n = (int) Math.min(CHUNK, count - from);
            ByteBuffer want = slice(expected, from * size, n * size);
            ByteBuffer got = slice(actual, from * size, n * size);
            long mismatches = 0;
            long allowed = 0;
            String first = null;
            int at = want.mismatch(got); // vectorised; elements one by one only after a difference
            for (int element = at < 0 ? n : at / size; element < n; element++) {
                long e = bits(want, (long) element * size, type);
                long g = bits(got, (long) element * size, type);
                if (e == g) {
                    continue;
                }
                long i = from + element;
                long x = bits(in.a(), (in.aFrom() + i) * size, type);
                long y = bits(in.b(), (in.bFrom() + i) * size, type);
                if (bothNanAllowed(type, op, x, y) && isNan(type, e) && isNan(type, g)) {
                    allowed++;
                } else {
                    mismatches++;
                    if (first == null) {
                        first = "element " + i + ": a=" + hex(type, x) + " b=" + hex(type, y) + " host=" + hex(type, e)
                                + " device=" + hex(type, g);
                    }
                }
            }
            results[chunk] = new Result(mismatches, allowed, first);
        });
        return Arrays.stream(results).reduce(new Result(0, 0, null), (r, s) ->
                new Result(r.mismatches() + s.mismatches(), r.nanAllowances() + s.nanAllowances(), r.first() != null ? r.first() : s.first()));
    }

    private static boolean bothNanAllowed(DataType type, ReduceOp op, long x, long y) {
        return op != null && isNan(type, x) && isNan(type, y);
    }

    static boolean isNan(DataType type, long bits) {
        return switch (type) {
            case FLOAT32 -> Float.isNaN(Float.intBitsToFloat((int) bits));
            case FLOAT64 -> Double.isNaN(Double.longBitsToDouble(bits));
            case BFLOAT16 -> (bits & 0x7FFF) > 0x7F80;
            case FLOAT16 -> (bits & 0x7FFF) > 0x7C00;
            default -> false;
        };
    }

    static long bits(ByteBuffer buffer, long at, DataType type) {
        int i = (int) at;
        return switch (type.bytes()) {
            case 2 -> buffer.getShort(i) & 0xFFFFL;
            case 4 -> buffer.getInt(i) & 0xFFFFFFFFL;
            default -> buffer.getLong(i);
        };
    }

    private static String hex(DataType type, long bits) {
        return String.format("0x%0" + type.bytes() * 2 + "x", bits);
    }

    private static ByteBuffer slice(ByteBuffer buffer, long from, long length) {
        return buffer.slice((int) from, (int) length).order(ByteOrder.nativeOrder());
    }
}
