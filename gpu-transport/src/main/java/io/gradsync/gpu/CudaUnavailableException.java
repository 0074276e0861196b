package io.gradsync.gpu;

/** This process cannot use CUDA at all: no driver, no device, or JCuda's library cannot load. Says which. */
public class CudaUnavailableException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public CudaUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
