package io.gradsync.core.engine;

import java.util.List;

/**
 * The codes that mark a call's messages with the AllReduce algorithm that runs it, so that ranks that chose
 * differently fail at the first message ({@link CollectiveDescriptor#withPlan}). The codec knows algorithms by
 * name only: the registry ({@code algorithm.AllReduceAlgorithms}) must name each of its entries here, which a test
 * checks.
 */
final class PlanCodes {
    /** Append only: a name's position, from 1, is its wire code. */
    private static final List<String> NAMES = List.of("ring", "rhd", "tree", "btree", "hier", "hier-leader", "rd", "direct");
    /** The code of an algorithm that is none of these (a user's own): the largest the descriptor holds. */
    static final int OTHER = 0x7F;

    private PlanCodes() {
    }

    /** The code of the algorithm called {@code name}, from 1; {@link #OTHER} for a name not listed. */
    static int codeOf(String name) {
        int index = NAMES.indexOf(name);
        return index < 0 ? OTHER : index + 1;
    }

    /** The name for a code, for error messages. */
    static String nameOf(int code) {
        return code >= 1 && code <= NAMES.size() ? NAMES.get(code - 1) : "another algorithm";
    }
}
