package io.gradsync.djl;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.Trainer;
import ai.djl.training.evaluator.Evaluator;
import ai.djl.training.listener.EvaluatorTrainingListener;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import java.util.HashMap;
import java.util.Map;

/**
 * One of a trainer's evaluators (the loss, an accuracy) whose epoch values are the whole job's: reading the
 * {@link EvaluatorTrainingListener#TRAIN_EPOCH} or {@link EvaluatorTrainingListener#VALIDATE_EPOCH} accumulator is a
 * collective that returns, on every rank, the mean of the ranks' values weighted by the samples each rank evaluated:
 * exactly the value over all ranks' samples for ratios such as accuracy, and for the loss (a mean of batch means)
 * where each rank's batches are of one size, as {@link ShardedSampler}'s are. The result is computed in the same order
 * on every rank, so every rank reports the same bits. Every other accumulator (a training batch's, the progress
 * bar's) is this rank's own, and costs nothing.
 *
 * <p>DJL's training result takes its {@code train_loss} and {@code validate_loss} from the evaluator that <em>is</em>
 * the trainer's loss, which this wrapper is not; so the wrapper of the loss copies its averaged values to those two
 * names when the epoch's accumulators are reset, right after {@code EvaluatorTrainingListener} recorded them.
 */
final class RankAveragedEvaluator extends Evaluator {
    private static final int VALUE = 0;
    private static final int SAMPLES = 1;
    private static final int TAG = 2;
    private static final int FIELDS = 3;

    private final Evaluator inner;
    private final ElasticGroup group;
    /** The trainer whose loss this is; null for another evaluator. */
    private final Trainer lossOf;
    private final Map<String, Long> samples = new HashMap<>();
    /** Every rank's fields, made again when the group shrinks. */
    private double[] all = new double[0];

    RankAveragedEvaluator(Evaluator inner, ElasticGroup group, Trainer trainer) {
        super(inner.getName());
        this.inner = inner;
        this.group = group;
        this.lossOf = inner == trainer.getLoss() ? trainer : null;
    }

    @Override
    public NDArray evaluate(NDList labels, NDList predictions) {
        return inner.evaluate(labels, predictions);
    }

    @Override
    public void addAccumulator(String key) {
        inner.addAccumulator(key);
        samples.put(key, 0L);
    }

    @Override
    public void updateAccumulators(String[] keys, NDList labels, NDList predictions) {
        inner.updateAccumulators(keys, labels, predictions);
        for (String key : keys) {
            count(key, labels);
        }
    }

    @Override
    public void updateAccumulator(String key, NDList labels, NDList predictions) {
        inner.updateAccumulator(key, labels, predictions);
        count(key, labels);
    }

    @Override
    public void resetAccumulator(String key) {
        inner.resetAccumulator(key);
        samples.put(key, 0L);
        if (lossOf != null && EvaluatorTrainingListener.TRAIN_EPOCH.equals(key)) {
            lossOf.notifyListeners(listener -> {
                if (listener instanceof EvaluatorTrainingListener evaluations) {
                    Map<String, Float> latest = evaluations.getLatestEvaluations();
                    copy(latest, "train_" + getName(), "train_loss");
                    copy(latest, "validate_" + getName(), "validate_loss");
                }
            });
        }
    }

    private static void copy(Map<String, Float> evaluations, String from, String to) {
        Float value = evaluations.get(from);
        if (value != null) {
            evaluations.put(to, value);
        }
    }

    @Override
    public float getAccumulator(String key) {
        float local = inner.getAccumulator(key);
        if (!EvaluatorTrainingListener.TRAIN_EPOCH.equals(key) && !EvaluatorTrainingListener.VALIDATE_EPOCH.equals(key)
                || group.catchingUp()) { // a restarted rank's epoch that the members trained without it
            return local;
        }
        double[] mine = new double[FIELDS];
        mine[VALUE] = local;
        mine[SAMPLES] = samples.getOrDefault(key, 0L);
        mine[TAG] = (getName() + '@' + key).hashCode();
        return group.run("the job's " + getName() + " (" + key + ")", comm -> average(comm, mine, key));
    }

    /** The ranks' values in {@code mine}, weighted by their samples, on every rank alike. */
    private float average(Communicator comm, double[] mine, String key) {
        if (all.length != FIELDS * comm.size()) {
            all = new double[FIELDS * comm.size()];
        }
        comm.allGatherBlocking(GradientBuffer.wrap(mine), GradientBuffer.wrap(all));
        double weighted = 0;
        double total = 0;
        double plain = 0;
        for (int r = 0; r < comm.size(); r++) {
            if (all[r * FIELDS + TAG] != mine[TAG]) {
                throw new IllegalStateException("rank " + comm.rank() + ": the ranks read different evaluators at the "
                        + "same point: this rank '" + getName() + "' (" + key + "), rank " + r + " another one; every rank "
                        + "must evaluate the same evaluators over the same number of epochs");
            }
            double v = all[r * FIELDS + VALUE];
            double n = all[r * FIELDS + SAMPLES];
            if (n > 0) { // a rank that evaluated nothing has NaN
                weighted += v * n;
                total += n;
            }
            plain += v;
        }
        return (float) (total > 0 ? weighted / total : plain / comm.size());
    }

    private void count(String key, NDList labels) {
        Shape shape = labels.head().getShape();
        long n = shape.dimension() == 0 ? 1 : shape.get(0);
        samples.merge(key, n, Long::sum);
    }
}
