package io.gradsync.aeron;

import static io.gradsync.core.settings.SettingsContract.accepts;
import static io.gradsync.core.settings.SettingsContract.refuses;
import static io.gradsync.core.settings.SettingsContract.row;

import io.gradsync.core.settings.SettingsContract;
import java.util.List;

/** Every setting of the Aeron transport, one row each, checked as {@link SettingsContract} says. */
class AeronSettingTableTest extends SettingsContract {
    private static final List<Row> ROWS = List.of(
            row("gradsync.aeron.dir.root", accepts("aeron-root"), refuses()),
            row("gradsync.aeron.mtu", accepts("128", "1408", "65504", "8K"), refuses("96", "1400", "65536", "64K", "0", "-32")),
            row("gradsync.aeron.udp.segment", accepts("auto", "off", "OFF", "512", "1472", "65507"),
                    refuses("511", "65508", "100", "sometimes", "-1")),
            row("gradsync.aeron.driver", accepts("auto", "host", "process"), refuses("rank", "shared")),
            row("gradsync.aeron.driver.threading", accepts("shared-network", "shared", "dedicated", "invoker"), refuses("two")),
            row("gradsync.aeron.driver.idle", accepts("backoff", "busy-spin"), refuses("yield", "spin")),
            row("gradsync.aeron.socket.buffer", accepts("64K", "4M", "1G"), refuses("65535", "0", "2G", "big")),
            row("gradsync.aeron.connect.timeout.ms", accepts("1", "30s", "24h"), refuses("0", "25h", "9223372036854775807")));

    @Override
    protected Class<?> module() {
        return AeronConfiguration.class;
    }

    @Override
    protected List<Row> rows() {
        return ROWS;
    }
}
