package io.gradsync.aeron;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.check.CheckPattern;

/** In-place AllReduce of every operator, float32 and int64, at each count, checked element by element on this rank. */
final class AllReduceMatrix {

    private AllReduceMatrix() {
    }

    static void assertExact(Communicator comm, int... counts) {
        for (ReduceOp op : ReduceOp.values()) {
            for (DataType type : new DataType[] {DataType.FLOAT32, DataType.INT64}) {
                for (int count : counts) {
                    GradientBuffer buffer = GradientBuffer.allocateDirect(type, count);
                    CheckPattern.fill(buffer, op, comm.rank());
                    comm.allReduceBlocking(buffer, op);
                    assertEquals(0, CheckPattern.countWrong(buffer, op, comm.size()),
                            "rank " + comm.rank() + " " + type + " " + op + " count " + count);
                }
            }
        }
    }
}
