/**
 * The RDMA transport behind gradsync's transport SPI, on DiSNI and DaRPC, with gradsync's own
 * implementation of DiSNI's JNI library ({@code libdisni}) shipped inside this module's jar.
 *
 * <p>{@link io.gradsync.rdma.RdmaTransportProvider} ({@code rdma}): DiSNI endpoints (RC queue pairs through
 * RDMA CM), messages written with RDMA WRITE with immediate into the peer's registered receive slots,
 * credits returned by RDMA writes of a counter, and a DaRPC control plane that trades the receive rings.
 *
 * <p>Nothing needs installing beyond rdma-core's user-space libraries: {@link io.gradsync.rdma.NativeLibrary#load()}
 * extracts the library and makes DiSNI's own {@code System.loadLibrary("disni")} find it without
 * {@code java.library.path}. Every gradsync entry point that uses DiSNI calls it first; code that uses DiSNI
 * directly must too.
 */
package io.gradsync.rdma;
