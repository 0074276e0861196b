package io.gradsync.aeron;

/** The transport contract over {@code aeron-udp}. */
class AeronUdpContractTest extends AeronContract {

    AeronUdpContractTest() {
        super("aeron-udp");
    }
}
