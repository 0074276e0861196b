package io.gradsync.djl;

/**
 * The replicas of a data-parallel model are not the same model: thrown on every rank alike, naming the first parameter
 * that differs. At the start, the ranks built different models (a parameter's name, shape or type differs); later,
 * something outside the gradient averaging changed one rank's parameters (an update on one rank only, a
 * non-deterministic kernel in the optimizer, a parameter loaded on one rank).
 */
public final class ReplicasDifferException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    private final String parameter;

    ReplicasDifferException(String message, String parameter) {
        super(message);
        this.parameter = parameter;
    }

    /** The name of the first parameter (in the block's order) that differs; null when the parameter counts differ. */
    public String parameter() {
        return parameter;
    }
}
