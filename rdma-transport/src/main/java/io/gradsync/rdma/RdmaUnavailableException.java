package io.gradsync.rdma;

/**
 * RDMA cannot be used in this process: the platform is not linux-x86_64, rdma-core's user-space libraries are
 * missing, the native library could not be loaded, or there is no RDMA device. The message says which and what
 * to do about it.
 */
public class RdmaUnavailableException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * @param message what is missing and how to get it
     */
    public RdmaUnavailableException(String message) {
        super(message);
    }

    /**
     * @param message what is missing and how to get it
     * @param cause the underlying failure
     */
    public RdmaUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
