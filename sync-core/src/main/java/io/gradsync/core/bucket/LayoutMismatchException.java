package io.gradsync.core.bucket;

/**
 * The ranks' gradient layouts differ: not every rank fed the same sequence of gradient types and sizes
 * (or the same bucket sizes) in its first step, or a rank's first step failed. Thrown on every rank, with
 * the same message naming the first difference.
 */
public class LayoutMismatchException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    public LayoutMismatchException(String message) {
        super(message);
    }
}
