package io.gradsync.core.select;

import java.util.List;

/**
 * Least-squares fit of one link class's α and β to measured AllReduce times, with γ measured apart
 * (ring and halving-doubling reduce half of what they move, so their times alone cannot tell β from
 * γ) and the other class's parameters known. Errors are relative ({@code (predicted - measured) /
 * measured}), so microsecond and second calls weigh alike; a negative estimate is pinned at 0 and the
 * other refitted.
 */
public final class CostModelFit {

    /** One measurement: the terms of the call that was timed, and its time in seconds. */
    public record Observation(String label, CostTerms terms, double seconds) {
    }

    private CostModelFit() {
    }

    /**
     * @param known the model whose other class (and nothing of {@code link} but γ) is taken as given
     * @param gamma the measured γ of {@code link}
     * @return the fitted parameters of {@code link}
     */
    public static LinkCost fit(List<Observation> observations, CostModel known, LinkClass link, double gamma) {
        LinkClass other = link == LinkClass.INTRA ? LinkClass.INTER : LinkClass.INTRA;
        double smm = 0;
        double smb = 0;
        double sbb = 0;
        double smy = 0;
        double sby = 0;
        for (Observation o : observations) {
            double weight = 1 / (o.seconds() * o.seconds());
            double y = o.seconds() - o.terms().seconds(other, known.cost(other)) - o.terms().reduced(link) * gamma;
            double m = o.terms().messages(link);
            double b = o.terms().bytes(link);
            smm += weight * m * m;
            smb += weight * m * b;
            sbb += weight * b * b;
            smy += weight * m * y;
            sby += weight * b * y;
        }
        double det = smm * sbb - smb * smb;
        double alpha = det == 0 ? 0 : (smy * sbb - sby * smb) / det;
        double beta = det == 0 ? 0 : (sby * smm - smy * smb) / det;
        if (alpha < 0 || det == 0) {
            alpha = 0;
            beta = sbb == 0 ? 0 : Math.max(0, sby / sbb);
        } else if (beta < 0) {
            beta = 0;
            alpha = smm == 0 ? 0 : Math.max(0, smy / smm);
        }
        return new LinkCost(alpha, beta, gamma);
    }
}
