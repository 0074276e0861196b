package io.gradsync.core.select;

/**
 * What one AllReduce costs on its critical path, before prices are put on it: per link class, the
 * messages (each costs α), the bytes moved (β each) and the bytes reduced (γ each). Keeping the counts
 * apart from the parameters makes the model linear in them, which is what calibration fits.
 */
public record CostTerms(double intraMessages, double intraBytes, double intraReduced,
                        double interMessages, double interBytes, double interReduced) {

    static final CostTerms ZERO = new CostTerms(0, 0, 0, 0, 0, 0);

    /** {@code messages} messages, {@code bytes} bytes moved and {@code reduced} bytes reduced on {@code link}. */
    static CostTerms on(LinkClass link, double messages, double bytes, double reduced) {
        return link == LinkClass.INTRA
                ? new CostTerms(messages, bytes, reduced, 0, 0, 0)
                : new CostTerms(0, 0, 0, messages, bytes, reduced);
    }

    CostTerms plus(CostTerms other) {
        return new CostTerms(intraMessages + other.intraMessages, intraBytes + other.intraBytes,
                intraReduced + other.intraReduced, interMessages + other.interMessages,
                interBytes + other.interBytes, interReduced + other.interReduced);
    }

    public double messages(LinkClass link) {
        return link == LinkClass.INTRA ? intraMessages : interMessages;
    }

    public double bytes(LinkClass link) {
        return link == LinkClass.INTRA ? intraBytes : interBytes;
    }

    public double reduced(LinkClass link) {
        return link == LinkClass.INTRA ? intraReduced : interReduced;
    }

    /** The price of these terms on one link class. */
    public double seconds(LinkClass link, LinkCost cost) {
        return messages(link) * cost.alpha() + bytes(link) * cost.beta() + reduced(link) * cost.gamma();
    }
}
