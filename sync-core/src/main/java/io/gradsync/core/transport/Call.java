package io.gradsync.core.transport;

/**
 * A collective call as every one of its messages is stamped, and as a rank announces it on the control
 * plane: its identity, what it is, and the arguments every rank must agree on. Transports carry the three
 * words without interpreting them.
 *
 * @param id the call's identity on its communicator, the same on every rank for the same logical call
 * @param descriptor what the call is: kind, element count, type, operator, algorithm
 * @param arguments the other arguments that must agree: root and chunk size
 */
public record Call(long id, long descriptor, long arguments) {
}
