package io.gradsync.rdma;

import static io.gradsync.core.settings.SettingsContract.accepts;
import static io.gradsync.core.settings.SettingsContract.refuses;
import static io.gradsync.core.settings.SettingsContract.row;

import io.gradsync.core.settings.SettingsContract;
import java.util.List;

/** Every setting of the RDMA transport, one row each, checked as {@link SettingsContract} says. */
class RdmaSettingTableTest extends SettingsContract {
    private static final List<Row> ROWS = List.of(
            row("gradsync.rdma.address", accepts("10.0.0.1"), refuses()),
            row("gradsync.rdma.interface", accepts("ib0"), refuses()),
            row("gradsync.rdma.port", accepts("0", "65535"), refuses("-1", "65536", "http")),
            row("gradsync.rdma.verb", accepts("write-imm", "send", "SEND"), refuses("read", "write")),
            row("gradsync.rdma.cq.size", accepts("0", "2147483647"), refuses("-1", "2147483648", "1K")),
            row("gradsync.rdma.idle", accepts("busy-poll", "channel"), refuses("poll")),
            row("gradsync.rdma.connect.timeout.ms", accepts("1", "30s", "24h"), refuses("0", "25h", "9223372036854775807")),
            row("gradsync.rdma.retry.count", accepts("0", "7"), refuses("-1", "8")),
            row("gradsync.rdma.send.in.place", accepts("true", "false"), refuses("sometimes")),
            row("gradsync.rdma.registration.cache.bytes", accepts("0", "256m", "1T"), refuses("-1", "1025G", "2T", "lots")),
            row("gradsync.rdma.libdisni", accepts("libdisni.so"), refuses()));

    @Override
    protected Class<?> module() {
        return RdmaConfiguration.class;
    }

    @Override
    protected List<Row> rows() {
        return ROWS;
    }
}
