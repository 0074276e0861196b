import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Two processes hand a buffer back and forth through shared memory: each copies the other's bytes out of a mapped
 * file into its own, then its own in for the other. Prints GB/s copied per process over each reading of TURNS turns.
 * Run as "PingPong FILE BYTES READINGS TURNS 0" and "PingPong FILE BYTES READINGS TURNS 1" at once.
 */
public class PingPong {
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    public static void main(String[] args) throws Exception {
        Path file = Path.of(args[0]);
        int bytes = Integer.parseInt(args[1]);
        int readings = Integer.parseInt(args[2]);
        int turns = Integer.parseInt(args[3]);
        int me = Integer.parseInt(args[4]);
        MappedByteBuffer shared;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            shared = ch.map(FileChannel.MapMode.READ_WRITE, 0, 64 + 2L * bytes);
        }
        ByteBuffer own = ByteBuffer.allocateDirect(bytes);
        ByteBuffer mine = shared.slice(64 + me * bytes, bytes);
        ByteBuffer theirs = shared.slice(64 + (1 - me) * bytes, bytes);
        long turn = 0;
        StringBuilder out = new StringBuilder();
        for (int r = 0; r < readings; r++) {
            long t0 = System.nanoTime();
            long moved = 0;
            for (int t = 0; t < turns; t++) {
                // turn t: rank t % 2 copies in; the other copies out once the flag says t + 1
                if (turn % 2 == me) {
                    mine.clear();
                    own.clear();
                    mine.put(own);
                    LONGS.setRelease(shared, 0, turn + 1);
                } else {
                    while ((long) LONGS.getAcquire(shared, 0) != turn + 1) {
                        Thread.onSpinWait();
                    }
                    own.clear();
                    theirs.clear();
                    own.put(theirs);
                }
                moved += bytes;
                turn++;
            }
            out.append(String.format("%.1f ", moved / (double) (System.nanoTime() - t0)));
        }
        System.out.println(out);
    }
}
