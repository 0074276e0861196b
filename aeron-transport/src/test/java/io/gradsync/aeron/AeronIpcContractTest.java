package io.gradsync.aeron;

/** The transport contract over {@code aeron-ipc}. */
class AeronIpcContractTest extends AeronContract {

    AeronIpcContractTest() {
        super("aeron-ipc");
    }
}
