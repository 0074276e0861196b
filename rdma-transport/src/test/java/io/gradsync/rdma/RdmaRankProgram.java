package io.gradsync.rdma;

import io.gradsync.core.multiprocess.RankProgram;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * One rank of the RDMA multi-process tests: {@link RankProgram}, then, once its communicator is closed, the RDMA
 * resources its process still owns ({@code rdma resource show}: QPs, CQs, MRs, PDs, CM ids), printed as
 * "rank R: rdma resources left after close: none" or the list.
 */
public final class RdmaRankProgram {

    private RdmaRankProgram() {
    }

    public static void main(String[] args) throws Exception {
        RankProgram.run(args, () -> System.out.println("rank " + System.getenv().getOrDefault("RANK", "?")
                + ": rdma resources left after close: " + leftovers()));
    }

    /** The RDMA resources that {@code rdma resource show} still lists for this process, or "none". */
    static String leftovers() {
        String pid = Long.toString(ProcessHandle.current().pid());
        List<String> left = new ArrayList<>();
        for (String kind : new String[] {"qp", "cq", "mr", "pd", "cm_id"}) {
            try {
                Process p = new ProcessBuilder("rdma", "resource", "show", kind).redirectErrorStream(true).start();
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                p.waitFor();
                for (String line : out.split("\n")) {
                    if (line.matches(".*\\bpid " + pid + "\\b.*")) {
                        left.add(kind + ": " + line.trim());
                    }
                }
            } catch (Exception e) {
                left.add(kind + ": cannot run rdma resource show: " + e);
            }
        }
        return left.isEmpty() ? "none" : String.join("; ", left);
    }
}
