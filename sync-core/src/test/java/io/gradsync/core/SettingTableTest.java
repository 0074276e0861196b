package io.gradsync.core;

import static io.gradsync.core.settings.SettingsContract.accepts;
import static io.gradsync.core.settings.SettingsContract.refuses;
import static io.gradsync.core.settings.SettingsContract.row;

import io.gradsync.core.settings.SettingsContract;
import java.util.List;

/**
 * Every setting of sync-core, one row each, checked as {@link SettingsContract} says: the edges of its range are
 * accepted; values past them, and malformed ones, are refused naming the property, the value and the range; a setting
 * without a row, or a property read without a setting, fails; docs/operations.md lists each as the code defines it.
 */
class SettingTableTest extends SettingsContract {
    private static final List<String> TIMEOUT_EDGES = accepts("1", "1ms", "1000us", "86400000", "24h", "PT24H", "30s");
    private static final List<String> TIMEOUTS_REFUSED = refuses("0", "999us", "86400001", "25h", "9223372036854775807",
            "99999999999999999999", "-5s", "1 minute", "PT0S", "PT-1S");

    private static final List<Row> ROWS = List.of(
            row("gradsync.chunk.bytes", accepts("8", "16M", "16384K", "256k", "262144"),
                    refuses("7", "0", "16777217", "17M", "2147483647", "2G", "256Q", "-1", "4.5M", "99999999999999999999")),
            row("gradsync.direct.min.bytes", accepts("0", "64K", "2147483647"), refuses("2G", "-1", "lots")),
            row("gradsync.direct.staging", accepts("auto", "true", "FALSE"), refuses("yes", "1")),
            row("gradsync.pipeline.depth", accepts("1", "32"), refuses("0", "33", "-1", "four", "4K")),
            row("gradsync.inflight", accepts("auto", "1", "1024"), refuses("0", "1025", "eight")),
            row("gradsync.inflight.bytes", accepts("0", "64K", "1M", "1T"), refuses("-1", "2T", "lots")),
            row("gradsync.ahead.messages", accepts("0", "8"), refuses("-1", "9")),
            row("gradsync.caller.runs", accepts("true", " FALSE "), refuses("yes", "0", "ture")),
            row("gradsync.timeout.ms", TIMEOUT_EDGES, TIMEOUTS_REFUSED),
            row("gradsync.rendezvous.timeout.ms", TIMEOUT_EDGES, TIMEOUTS_REFUSED),
            row("gradsync.rendezvous.handshake.timeout.ms", TIMEOUT_EDGES, TIMEOUTS_REFUSED),
            row("gradsync.idle.strategy", accepts("busy-spin", "yield", "backoff"), refuses("spinning", "busy spin")),
            row("gradsync.allreduce.algorithm", accepts("auto", "ring", "direct", "RHD"), refuses("rings", "ring,rhd")),
            row("gradsync.allreduce", accepts("tree:0-64K;ring@512K:64K-max"), refuses("tree:0-", "rings:0-max")),
            row("gradsync.costmodel.file", accepts("cost-model.properties"), refuses()),
            row("gradsync.wire.compression", accepts("none", "bf16", "fp16"), refuses("fp8", "half")),
            row("gradsync.transport", accepts("auto", "shm", "aeron-udp", "aeron", "rdma"), refuses("tcp", "aeron_udp")),
            row("gradsync.trace", accepts("traces"), refuses()),
            row("gradsync.trace.events", accepts("1", "4194304"), refuses("0", "-1", "4194305", "2000000000")),
            row("gradsync.flight.entries", accepts("0", "1048576"), refuses("-1", "1048577", "lots")),
            row("gradsync.flight.dir", accepts("flight"), refuses()),
            row("gradsync.auth", accepts("secret", "none", "NONE"), refuses("off", "yes")),
            row("gradsync.rendezvous.server", accepts("rank0", "external", "EXTERNAL"), refuses("launcher", "rank 0")),
            row("gradsync.shm.dir.root", accepts("shm-root"), refuses()),
            row("gradsync.shm.cross.memory", accepts("true", "false"), refuses("1", "on")),
            row("gradsync.memory", accepts("foreign", "unsafe"), refuses("panama")),
            row("gradsync.kernels", accepts("vector", "scalar"), refuses("simd", "auto")));

    @Override
    protected Class<?> module() {
        return GradSyncConfiguration.class;
    }

    @Override
    protected List<Row> rows() {
        return ROWS;
    }
}
