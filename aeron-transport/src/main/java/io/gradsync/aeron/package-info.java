/**
 * The Aeron transport: UDP between hosts, IPC between ranks of one host, behind gradsync's transport
 * SPI. Open it with {@code Communicator.connect("aeron")} (or {@code aeron-ipc}, {@code aeron-udp}).
 */
package io.gradsync.aeron;
