package io.gradsync.core.launch;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/**
 * The parsed command line of {@code gradsync-run}: {@code [options] [--] COMMAND [ARGS...]}. Options
 * take their value as the next argument or after {@code =} ({@code --nproc=4}, and {@code -n4} for the
 * short form); the command starts after {@code --} or at the first argument that is not an option.
 *
 * @param nproc       ranks to start
 * @param nnodes      simulated hosts; {@code nproc} is a multiple of it
 * @param nodePrefix  tokens put before the command, {@code {node}} not yet replaced; empty for none
 * @param masterAddr  the MASTER_ADDR for the ranks
 * @param masterPort  the MASTER_PORT for the ranks; 0 to pick a free one
 * @param grace       time between SIGTERM and SIGKILL when stopping ranks
 * @param stopDelay   after a rank fails, how long the others get to fail on their own (and say why)
 *                    before they are stopped
 * @param deadline    limit for the whole job; zero for none
 * @param minRanks    the fewest ranks the job goes on with: a rank's failure stops the others only when fewer would
 *                    be left (running, or done with status 0); {@code nproc} (the default) stops them at the first failure
 * @param maxRestarts how many times, in all, a failed rank is started again (with its old rank) instead of counting as
 *                    a failure; 0 by default
 * @param binding     what --bind-to asked for: each rank bound to its own share of the CPUs ({@link CpuBinding}),
 *                    none, or as mpirun by default
 * @param prefixOutput whether output lines get a {@code [rank] } prefix
 * @param help        whether help was asked for (the other fields are then defaults)
 * @param command     the command and its arguments
 */
record LaunchOptions(int nproc, int nnodes, List<String> nodePrefix, String masterAddr, int masterPort,
                     Duration grace, Duration stopDelay, Duration deadline, int minRanks, int maxRestarts, CpuBinding.Policy binding,
                     boolean prefixOutput, boolean help, List<String> command) {

    static final String NODE_PLACEHOLDER = "{node}";
    static final String DEFAULT_MASTER_ADDR = "127.0.0.1";
    static final Duration DEFAULT_GRACE = Duration.ofSeconds(5);
    static final Duration DEFAULT_STOP_DELAY = Duration.ofSeconds(3);

    static final String USAGE = String.join(System.lineSeparator(),
            "usage: gradsync-run -n N [options] [--] COMMAND [ARGS...]",
            "       gradsync-run status [PID]   where each rank of this user's running jobs (or of launcher PID) is",
            "Starts N ranks of COMMAND on this machine, each with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,",
            "GROUP_RANK, MASTER_ADDR, MASTER_PORT, GRADSYNC_JOB_ID and GRADSYNC_JOB_SECRET set, and supervises them:",
            "when one fails, the others are stopped (but see --min-ranks) and its status is the launcher's.",
            "  -n, --nproc N         ranks to start (required, >= 1)",
            "      --nnodes H        simulated hosts (default 1); N must be divisible by H; rank r is on node r/(N/H)",
            "      --node-prefix T   command prefix for each rank, split on whitespace, {node} replaced by its node",
            "      --master-addr A   MASTER_ADDR (default " + DEFAULT_MASTER_ADDR + ")",
            "      --master-port P   MASTER_PORT (default: a free TCP port on the master address)",
            "      --grace S         seconds between SIGTERM and SIGKILL when stopping ranks (default 5)",
            "      --stop-delay S    after a rank fails, seconds the others get to exit on their own before",
            "                        they are stopped, so they can report the failure they saw (default 3)",
            "      --deadline S      stop all ranks after S seconds and exit 124 (default 0: no deadline)",
            "      --min-ranks M     go on while at least M ranks run, for ranks that shrink their communicator",
            "                        after a failure: a rank's failure stops the others only when fewer would be",
            "                        left; the job succeeds when M ranks exit with 0 (default N: the first failure",
            "                        stops the job)",
            "      --max-restarts K  start a failed rank again, with its rank and GRADSYNC_RESTART=<i> set, up to K",
            "                        times in all (default 0), for ranks that take a restarted rank back in",
            "      --bind-to B       core: bind each rank to its own equal share of this process's CPUs (taskset),",
            "                        as mpirun --bind-to core; none: let the scheduler place them. Default, as",
            "                        mpirun's: core for 1 or 2 ranks (when taskset exists and each gets a CPU), else none",
            "      --no-prefix       do not prefix output lines with [rank]",
            "  -h, --help            show this help",
            "");

    LaunchOptions {
        nodePrefix = List.copyOf(nodePrefix);
        command = List.copyOf(command);
    }

    /** Parses {@code args}; a {@link UsageException} names the first problem found. */
    static LaunchOptions parse(String[] args) throws UsageException {
        return new Parser(args).parse();
    }

    /** The options read so far, and where in the arguments. */
    private static final class Parser {
        private final String[] args;
        private int i;
        private Integer nproc;
        private int nnodes = 1;
        private List<String> nodePrefix = List.of();
        private String masterAddr = DEFAULT_MASTER_ADDR;
        private int masterPort;
        private Duration grace = DEFAULT_GRACE;
        private Duration stopDelay = DEFAULT_STOP_DELAY;
        private Duration deadline = Duration.ZERO;
        private Integer minRanks;
        private int maxRestarts;
        private boolean prefixOutput = true;
        private CpuBinding.Policy binding = CpuBinding.Policy.MPIRUN_DEFAULT;
        private boolean help;

        Parser(String[] args) {
            this.args = args;
        }

        LaunchOptions parse() throws UsageException {
            for (; i < args.length && !help; i++) {
                String arg = args[i];
                if (arg.equals("--")) {
                    i++;
                    break;
                }
                if (!arg.startsWith("-") || arg.equals("-")) {
                    break;
                }
                option(arg);
            }
            if (help) {
                return new LaunchOptions(1, 1, List.of(), DEFAULT_MASTER_ADDR, 0, DEFAULT_GRACE, DEFAULT_STOP_DELAY,
                        Duration.ZERO, 1, 0, CpuBinding.Policy.NONE, true, true, List.of());
            }
            List<String> command = Arrays.asList(args).subList(i, args.length);
            if (nproc == null) {
                throw new UsageException("-n/--nproc is required");
            }
            if (nproc % nnodes != 0) {
                throw new UsageException("--nproc " + nproc + " is not divisible by --nnodes " + nnodes);
            }
            if (command.isEmpty()) {
                throw new UsageException("no command to run (give it after --)");
            }
            if (minRanks != null && minRanks > nproc) {
                throw new UsageException("--min-ranks " + minRanks + " is more than the " + nproc + " ranks started");
            }
            return new LaunchOptions(nproc, nnodes, nodePrefix, masterAddr, masterPort, grace, stopDelay, deadline,
                    minRanks != null ? minRanks : nproc, maxRestarts, binding, prefixOutput, false, command);
        }

        /** One option: {@code --name value}, {@code --name=value}, {@code -nN} or a switch. */
        private void option(String arg) throws UsageException {
            String name = arg;
            String inline = null;
            int equals = arg.indexOf('=');
            if (arg.startsWith("--") && equals > 0) {
                name = arg.substring(0, equals);
                inline = arg.substring(equals + 1);
            } else if (arg.startsWith("-n") && !arg.startsWith("--") && arg.length() > 2) {
                name = "-n";
                inline = arg.substring(2);
            }
            switch (name) {
                case "-h", "--help" -> help = true;
                case "--no-prefix" -> {
                    if (inline != null) {
                        throw new UsageException("--no-prefix takes no value");
                    }
                    prefixOutput = false;
                }
                case "-n", "--nproc" -> nproc = positiveInt(name, value(name, inline));
                case "--nnodes" -> nnodes = positiveInt(name, value(name, inline));
                case "--node-prefix" -> {
                    String template = value(name, inline).trim();
                    nodePrefix = template.isEmpty() ? List.of() : Arrays.asList(template.split("\\s+"));
                }
                case "--master-addr" -> masterAddr = masterAddress(value(name, inline));
                case "--master-port" -> masterPort = port(positiveInt(name, value(name, inline)));
                case "--grace" -> grace = seconds(name, value(name, inline));
                case "--stop-delay" -> stopDelay = seconds(name, value(name, inline));
                case "--deadline" -> deadline = seconds(name, value(name, inline));
                case "--min-ranks" -> minRanks = positiveInt(name, value(name, inline));
                case "--max-restarts" -> maxRestarts = nonNegativeInt(name, value(name, inline));
                case "--bind-to" -> binding = binding(value(name, inline));
                default -> throw new UsageException("unknown option " + arg);
            }
        }

        /** The option's value: given inline, or the next argument. */
        private String value(String name, String inline) throws UsageException {
            return inline != null ? inline : valueAfter(args, ++i, name);
        }

        private static String masterAddress(String address) throws UsageException {
            if (address.isBlank()) {
                throw new UsageException("--master-addr is empty");
            }
            return address;
        }

        private static int port(int port) throws UsageException {
            if (port > 65_535) {
                throw new UsageException("--master-port must be a TCP port (1 to 65535), got " + port);
            }
            return port;
        }

        private static CpuBinding.Policy binding(String binding) throws UsageException {
            return switch (binding) {
                case "core" -> CpuBinding.Policy.CORE;
                case "none" -> CpuBinding.Policy.NONE;
                default -> throw new UsageException("--bind-to must be core or none, got '" + binding + "'");
            };
        }
    }

    private static String valueAfter(String[] args, int index, String name) throws UsageException {
        if (index >= args.length) {
            throw new UsageException(name + " needs a value");
        }
        return args[index];
    }

    private static int positiveInt(String name, String value) throws UsageException {
        return atLeast(1, name, value);
    }

    private static int nonNegativeInt(String name, String value) throws UsageException {
        return atLeast(0, name, value);
    }

    private static int atLeast(int least, String name, String value) throws UsageException {
        int n;
        try {
            n = Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            throw new UsageException(name + " needs a whole number, got '" + value + "'");
        }
        if (n < least) {
            throw new UsageException(name + " must be at least " + least + ", got " + n);
        }
        return n;
    }

    /** Whole or decimal seconds, at least 0, to the millisecond. */
    private static Duration seconds(String name, String value) throws UsageException {
        BigDecimal s;
        try {
            s = new BigDecimal(value.trim());
        } catch (NumberFormatException e) {
            throw new UsageException(name + " needs a number of seconds, got '" + value + "'");
        }
        if (s.signum() < 0) {
            throw new UsageException(name + " must not be negative, got " + value);
        }
        if (s.compareTo(BigDecimal.valueOf(1_000_000_000L)) > 0) {
            throw new UsageException(name + " is too large, got " + value);
        }
        return Duration.ofMillis(s.movePointRight(3).setScale(0, RoundingMode.CEILING).longValueExact());
    }
}
