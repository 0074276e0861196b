/**
 * How separate processes become one job: {@link io.gradsync.core.bootstrap.LaunchEnvironment} reads who
 * this process is from the launcher's variables (torchrun, Slurm, Open MPI, {@code gradsync-run}) and the
 * job secret, which is required, and {@link io.gradsync.core.bootstrap.Rendezvous} meets the other ranks at
 * rank 0 (both ends proving they know the secret), learns which ranks share a host, and stays connected as
 * the job's control plane.
 */
package io.gradsync.core.bootstrap;
