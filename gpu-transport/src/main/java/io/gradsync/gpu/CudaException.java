package io.gradsync.gpu;

import jcuda.driver.CUresult;

/** A CUDA driver call failed: names the call and its {@code CUresult}. */
public class CudaException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String call;
    private final int result;

    public CudaException(String call, int result) {
        this(call, result, null);
    }

    /** With a note on what the failure means or what to do ({@code null} for none). */
    public CudaException(String call, int result, String note) {
        super(call + " failed: " + CUresult.stringFor(result) + " (" + result + ")" + (note == null ? "" : ": " + note));
        this.call = call;
        this.result = result;
    }

    /** The driver call, {@code cuMemAlloc}. */
    public String call() {
        return call;
    }

    /** The {@code CUresult} it returned. */
    public int result() {
        return result;
    }
}
