package io.gradsync.core.launch;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;

/**
 * {@code --bind-to core}: each rank runs on its own share of the CPUs the launcher may use, as Open MPI's
 * {@code mpirun} binds ranks to cores, so the scheduler cannot put two busy ranks on one CPU while another
 * idles (with two ranks on two CPUs, unbound, a 4 KiB AllReduce measured 15–46 µs against 2.3–3.5 µs
 * bound). The shares are contiguous and equal, by rank over all the ranks this launcher starts (simulated
 * nodes share this machine); with more ranks than CPUs, rank {@code r} gets CPU {@code r mod cpus}. The
 * binding is {@code taskset -c LIST} put before the rank's command, so it holds for every process and
 * thread the rank starts.
 *
 * <p>Without {@code --bind-to}, the launcher binds as {@code mpirun} does by default: to cores for one or two
 * ranks, and not at all above that ({@code mpirun} binds to sockets there, which on a machine of one socket is
 * every CPU); and only where a binding is possible ({@code taskset} on the PATH, a CPU for each rank), since
 * nobody asked for it.
 */
final class CpuBinding {
    /** Up to how many ranks {@code mpirun} binds each to a core by default. */
    static final int MPIRUN_CORE_BINDING_RANKS = 2;

    /** What {@code --bind-to} asked for. */
    enum Policy {
        CORE, NONE, MPIRUN_DEFAULT
    }

    private final List<Integer> cpus;
    private final int ranks;

    /**
     * @param cpus  the CPUs the launcher may use, in order
     * @param ranks how many ranks share them
     */
    CpuBinding(List<Integer> cpus, int ranks) {
        if (cpus.isEmpty()) {
            throw new IllegalArgumentException("no CPUs to bind to");
        }
        this.cpus = List.copyOf(cpus);
        this.ranks = ranks;
    }

    /**
     * The binding of {@code ranks} ranks over this process's CPUs that {@code policy} asks for; null for none.
     *
     * @throws UsageException when {@code policy} is {@link Policy#CORE} and {@code taskset} is not on
     *                        {@code environment}'s PATH or the CPUs cannot be read
     */
    static CpuBinding forLaunch(Policy policy, int ranks, Map<String, String> environment) throws UsageException {
        return switch (policy) {
            case NONE -> null;
            case CORE -> {
                if (!hasTaskset(environment)) {
                    throw new UsageException("--bind-to core needs taskset on the PATH (Debian/Ubuntu: util-linux; RHEL: util-linux-core)");
                }
                yield new CpuBinding(allowedCpus(), ranks);
            }
            case MPIRUN_DEFAULT -> {
                if (ranks > MPIRUN_CORE_BINDING_RANKS || !hasTaskset(environment)) {
                    yield null;
                }
                List<Integer> cpus;
                try {
                    cpus = allowedCpus();
                } catch (UsageException e) {
                    yield null;
                }
                yield cpus.size() >= ranks ? new CpuBinding(cpus, ranks) : null;
            }
        };
    }

    private static boolean hasTaskset(Map<String, String> environment) {
        return RankProcessSpec.runnable("taskset", environment.getOrDefault("PATH", ""));
    }

    /** The CPUs this process may run on, from {@code Cpus_allowed_list} in {@code /proc/self/status}. */
    static List<Integer> allowedCpus() throws UsageException {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("Cpus_allowed_list:")) {
                    return parseList(line.substring(line.indexOf(':') + 1));
                }
            }
        } catch (IOException | IllegalArgumentException e) {
            throw new UsageException("--bind-to core: cannot read this process's CPUs from /proc/self/status: " + e.getMessage());
        }
        throw new UsageException("--bind-to core: /proc/self/status has no Cpus_allowed_list (not Linux?)");
    }

    /** A Linux CPU list ({@code 0-3,8,10-11}) as CPU numbers, in order. */
    static List<Integer> parseList(String list) {
        List<Integer> cpus = new ArrayList<>();
        for (String part : list.trim().split(",")) {
            String range = part.trim();
            int dash = range.indexOf('-');
            try {
                int first = Integer.parseInt(dash < 0 ? range : range.substring(0, dash));
                int last = dash < 0 ? first : Integer.parseInt(range.substring(dash + 1));
                if (first < 0 || last < first) {
                    throw new IllegalArgumentException("bad CPU range '" + range + "' in '" + list.trim() + "'");
                }
                for (int cpu = first; cpu <= last; cpu++) {
                    cpus.add(cpu);
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad CPU list '" + list.trim() + "'");
            }
        }
        return cpus;
    }

    /** The CPUs of {@code rank}, as a list for {@code taskset -c}. */
    String cpusOf(int rank) {
        if (ranks > cpus.size()) {
            return Integer.toString(cpus.get(rank % cpus.size()));
        }
        int share = cpus.size() / ranks;
        StringJoiner list = new StringJoiner(",");
        for (int i = rank * share; i < (rank + 1) * share; i++) {
            list.add(Integer.toString(cpus.get(i)));
        }
        return list.toString();
    }

    /** What goes before {@code rank}'s command. */
    List<String> prefix(int rank) {
        return List.of("taskset", "-c", cpusOf(rank));
    }
}
