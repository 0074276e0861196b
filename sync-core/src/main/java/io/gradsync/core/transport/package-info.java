/**
 * The transport SPI: what an algorithm needs from the network, and no more.
 *
 * <p>The contract is built around receive slots owned by the receiver. A sender claims a slot
 * ({@link io.gradsync.core.transport.Link#tryClaim(int)}), fills it and commits it; the receiver polls
 * the message, consumes it and releases it, which returns the credit. This one shape fits the
 * in-JVM transport (the slot is shared memory: zero copy), Aeron ({@code tryClaim} into the term
 * buffer, {@code controlledPeek} and position release on the image) and RDMA (write-with-immediate
 * into the peer's registered slot, credits returned with the receiver's release). Algorithms never
 * block inside the SPI: they decide how to wait and for how long.
 */
package io.gradsync.core.transport;
