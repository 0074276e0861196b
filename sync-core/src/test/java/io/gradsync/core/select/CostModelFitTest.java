package io.gradsync.core.select;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The fit recovers parameters from times that follow the model exactly. */
class CostModelFitTest {
    @Test
    void recoversIntraAlphaAndBetaFromRingAndHalvingDoublingTimes() {
        LinkCost truth = new LinkCost(12e-6, 0.3e-9, 0.15e-9);
        CostModel model = new CostModel(truth, CostModel.INTER_DEFAULT);
        List<CostModelFit.Observation> observations = new ArrayList<>();
        for (int n : new int[] {2, 3, 4}) {
            for (long bytes = 8; bytes <= (16 << 20); bytes *= 8) {
                for (String algorithm : List.of("ring", "rhd")) {
                    CostTerms terms = AllReduceCosts.terms(algorithm, Topology.blocks(1, n), bytes, 256 << 10);
                    observations.add(new CostModelFit.Observation(algorithm, terms, model.seconds(terms)));
                }
            }
        }
        LinkCost fitted = CostModelFit.fit(observations, CostModel.defaults(), LinkClass.INTRA, truth.gamma());
        assertEquals(truth.alpha(), fitted.alpha(), truth.alpha() * 1e-6);
        assertEquals(truth.beta(), fitted.beta(), truth.beta() * 1e-6);
    }

    @Test
    void fitsInterWithIntraKnown() {
        CostModel model = new CostModel(new LinkCost(5e-6, 0.2e-9, 0.1e-9), new LinkCost(80e-6, 1.2e-9, 0.1e-9));
        List<CostModelFit.Observation> observations = new ArrayList<>();
        for (long bytes = 8; bytes <= (16 << 20); bytes *= 4) {
            for (String algorithm : List.of("ring", "rhd")) {
                CostTerms terms = AllReduceCosts.terms(algorithm, Topology.blocks(2, 2), bytes, 64 << 10);
                observations.add(new CostModelFit.Observation(algorithm, terms, model.seconds(terms)));
            }
        }
        CostModel known = model.with(LinkClass.INTER, CostModel.INTER_DEFAULT);
        LinkCost fitted = CostModelFit.fit(observations, known, LinkClass.INTER, 0.1e-9);
        assertEquals(80e-6, fitted.alpha(), 80e-6 * 1e-6);
        assertEquals(1.2e-9, fitted.beta(), 1.2e-9 * 1e-6);
    }
}
