package io.gradsync.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gradsync.core.check.CheckPattern;
import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.Link;
import io.gradsync.core.transport.SendSlot;
import io.gradsync.core.memory.Region;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A caller learns that its collective finished only after the transport has worked ({@link Endpoint#doWork()})
 * since the collective's last send. A transport that moves queued messages in its duty cycle (Aeron with the
 * rank's own media driver) would otherwise hold the last ones until the rank's next call, and its peers with them.
 */
class LastSendsLeaveBeforeCompletionTest {

    @ParameterizedTest(name = "{0}, ranks={1}")
    @CsvSource({"ring, 2", "ring, 3", "rhd, 4", "rhd, 5", "tree, 3"})
    void theTransportWorksAfterTheLastSend(String algorithm, int ranks) {
        List<CountingEndpoint> endpoints = new ArrayList<>();
        try (LocalJob job = new LocalJob(ranks, 1024, 4, Duration.ofSeconds(60), algorithm, e -> {
            CountingEndpoint counting = new CountingEndpoint(e);
            endpoints.add(counting);
            return counting;
        })) {
            job.run(c -> {
                CountingEndpoint mine = endpoints.get(c.rank());
                for (int count : new int[] {1, ranks + 1, 10_007, 100_003}) {
                    GradientBuffer buffer = GradientBuffer.allocateDirect(DataType.FLOAT32, count);
                    CheckPattern.fill(buffer, ReduceOp.SUM, c.rank());
                    long sentBefore = mine.sent.get();
                    c.allReduceBlocking(buffer, ReduceOp.SUM);
                    assertEquals(0, CheckPattern.countWrong(buffer, ReduceOp.SUM, c.size()));
                    assertTrue(mine.sent.get() > sentBefore, "rank " + c.rank() + " sent nothing for " + count);
                    assertEquals(0, mine.sentSinceWork.get(), () -> "rank " + c.rank() + ", " + count + " elements: "
                            + mine.sentSinceWork.get() + " messages sent after the transport last worked");
                }
                return null;
            });
        }
    }

    /** Counts the messages committed since the last {@link #doWork()}. */
    private static final class CountingEndpoint extends ForwardingEndpoint {
        final AtomicLong sent = new AtomicLong();
        final AtomicLong sentSinceWork = new AtomicLong();

        CountingEndpoint(Endpoint delegate) {
            super(delegate);
        }

        @Override
        public int doWork() {
            sentSinceWork.set(0);
            return super.doWork();
        }

        @Override
        public Link link(int peer) {
            return new ForwardingLink(super.link(peer)) {
                @Override
                public SendSlot tryClaim(int length) {
                    SendSlot slot = super.tryClaim(length);
                    return slot == null ? null : new SendSlot() {
                        @Override
                        public Region payload() {
                            return slot.payload();
                        }

                        @Override
                        public void commit(long call, long descriptor, long arguments) {
                            slot.commit(call, descriptor, arguments);
                            sent.incrementAndGet();
                            sentSinceWork.incrementAndGet();
                        }
                    };
                }
            };
        }
    }
}
