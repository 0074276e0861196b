package io.gradsync.gpu;

import java.nio.ByteBuffer;

/** The two inputs of a checked reduction: direct buffers, each read from its element {@code aFrom} or {@code bFrom}. */
record Operands(ByteBuffer a, long aFrom, ByteBuffer b, long bFrom) {
}
