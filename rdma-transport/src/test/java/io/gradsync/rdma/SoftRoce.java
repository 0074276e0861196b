package io.gradsync.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaEventChannel;
import com.ibm.disni.verbs.SVCPollCq;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the tests tagged "softroce" share: they need an RDMA device, and run in the soft-RoCE guest
 * (rdma-transport/softroce/run-tests), where rxe0 sits on dummy0 with the address in GRADSYNC_RDMA_ADDR.
 */
final class SoftRoce {
    static final String TAG = "softroce";
    static final int TIMEOUT_MS = 20_000;
    private static final AtomicInteger NEXT_PORT = new AtomicInteger(20_000 + ThreadLocalRandom.current().nextInt(20_000));

    private SoftRoce() {
    }

    /** Loads libdisni (counting native calls) and fails unless there is an RDMA device. */
    static void requireDevice() {
        Natives.load();
        NativeLibrary.requireDevice();
    }

    static InetAddress address() throws IOException {
        String address = System.getenv("GRADSYNC_RDMA_ADDR");
        return InetAddress.getByName(address != null && !address.isBlank() ? address : "10.232.0.1");
    }

    /** An RDMA CM port (its own port space, not TCP's) no other test of this JVM uses. */
    static InetSocketAddress freshEndpoint() throws IOException {
        return new InetSocketAddress(address(), NEXT_PORT.getAndIncrement());
    }

    /** The next CM event on the channel, which must be of the given type, acknowledged. */
    static RdmaCmEvent expectEvent(RdmaEventChannel channel, RdmaCmEvent.EventType type) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
        while (System.nanoTime() < deadline) {
            RdmaCmEvent event = channel.getCmEvent(200);
            if (event != null) {
                event.ackEvent();
                assertEquals(type, RdmaCmEvent.EventType.values()[event.getEvent()], "CM event");
                return event;
            }
        }
        return fail("no " + type + " within " + TIMEOUT_MS + " ms");
    }

    /**
     * Makes the RDMA CM open the device (librdmacm keeps a verbs context per device for the life of the process),
     * so that resource counts taken afterwards only move with what the tests create.
     */
    static void warmUpDevice() throws IOException {
        RdmaEventChannel channel = RdmaEventChannel.createEventChannel();
        RdmaCmId id = channel.createId(RdmaCm.RDMA_PS_TCP);
        id.bindAddr(freshEndpoint());
        assertNotNull(id.getVerbs());
        id.destroyId();
        channel.destroyEventChannel();
    }

    /** Polls the CQ until n completions came (or the timeout passed), returning copies of them. */
    static List<IbvWC> poll(IbvCQ cq, int n) throws IOException {
        IbvWC[] slots = new IbvWC[16];
        for (int i = 0; i < slots.length; i++) {
            slots[i] = new IbvWC();
        }
        SVCPollCq poll = cq.poll(slots, slots.length);
        List<IbvWC> completions = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
        try {
            while (completions.size() < n) {
                int got = poll.execute().getPolls();
                for (int i = 0; i < got; i++) {
                    completions.add(slots[i].clone());
                }
                if (got == 0) {
                    if (System.nanoTime() > deadline) {
                        fail("got " + completions.size() + " of " + n + " completions within " + TIMEOUT_MS + " ms");
                    }
                    Thread.onSpinWait();
                }
            }
        } finally {
            poll.free();
        }
        return completions;
    }

    /**
     * The resource counts `rdma resource show` reports for the device (pd, cq, qp, cm_id, mr, ctx, srq). The
     * kernel holds some itself (rxe's GSI QP and its CQ and PD).
     */
    static Map<String, Long> resources() throws IOException, InterruptedException {
        Process process = new ProcessBuilder("rdma", "resource", "show").redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!process.waitFor(30, TimeUnit.SECONDS) || process.exitValue() != 0) {
            throw new IOException("rdma resource show failed: " + output);
        }
        Map<String, Long> counts = new LinkedHashMap<>();
        for (String line : output.split("\n")) {
            // 0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 0 srq 0
            String[] words = line.trim().split("\\s+");
            if (words.length < 4 || !words[0].endsWith(":") || !words[1].endsWith(":")) {
                continue;
            }
            String device = words[1].substring(0, words[1].length() - 1);
            for (int i = 2; i + 1 < words.length; i += 2) {
                counts.merge(device + "." + words[i], Long.parseLong(words[i + 1]), Long::sum);
            }
        }
        if (counts.isEmpty()) {
            throw new IOException("no device in `rdma resource show`: " + output);
        }
        return counts;
    }

    /** Waits (a little: the kernel releases some objects asynchronously) for the counts to be as before. */
    static void assertResourcesBackTo(Map<String, Long> before, Map<String, Long> allowedExtra)
            throws IOException, InterruptedException {
        Map<String, Long> now = resources();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!withinAllowance(before, now, allowedExtra) && System.nanoTime() < deadline) {
            Thread.sleep(100);
            now = resources();
        }
        if (!withinAllowance(before, now, allowedExtra)) {
            fail("RDMA resources not released: before " + before + ", after " + now
                    + (allowedExtra.isEmpty() ? "" : ", allowed extra " + allowedExtra));
        }
    }

    private static boolean withinAllowance(Map<String, Long> before, Map<String, Long> now, Map<String, Long> extra) {
        if (!before.keySet().equals(now.keySet())) {
            return false;
        }
        for (Map.Entry<String, Long> e : before.entrySet()) {
            long have = now.get(e.getKey());
            long allowed = e.getValue() + extra.getOrDefault(e.getKey().substring(e.getKey().indexOf('.') + 1), 0L);
            if (have < e.getValue() || have > allowed) {
                return false;
            }
        }
        return true;
    }
}
