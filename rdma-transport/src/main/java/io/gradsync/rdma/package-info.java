/**
 * The RDMA transport behind gradsync's transport SPI: DiSNI endpoints (RC queue pairs through RDMA CM),
 * messages written with RDMA WRITE with immediate into the peer's registered receive slots, credits
 * returned by RDMA writes of a counter, and a DaRPC control plane that trades the receive rings.
 */
package io.gradsync.rdma;
