package io.gradsync.djl;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingResult;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.gradsync.core.Communicator;
import java.util.Locale;
import java.util.Random;
import java.util.stream.Collectors;

/**
 * An ordinary DJL {@code EasyTrain} program made data-parallel by {@link DataParallel}, as one rank of a job that a
 * launcher started: a small classifier (two linear layers, with {@code --batch-norm} a batch normalisation between
 * them) on a synthetic dataset of
 * {@value #SAMPLES} samples whose labels a fixed random teacher assigns. Every rank initialises its parameters from its
 * own seed (set after the trainer is created), so only the broadcast makes the replicas equal; with
 * {@code --plain-initialize} it calls {@code trainer.initialize} itself, its seed set before the trainer is created
 * (DataParallel gives every rank rank 0's), or after it with {@code --seed-after-trainer} (replicas that differ);
 * with {@code --through-copies} every gradient goes through a host copy, the path of DJL's GPU tensors. The whole dataset, sharded, is also its validation set,
 * and DJL's own listeners keep its loss and accuracy. It prints one line:
 * {@code rank R: loss BEFORE -> AFTER, steps S, hash H, copies C, train loss L, validate loss V, validate accuracy A,
 * whole accuracy W} (the loss over the whole dataset before and after training, the parameters' hash, the last epoch's
 * values of DJL's training result, the accuracy over the whole dataset computed by this rank alone); with
 * {@code --accumulate K} it runs its own loop that accumulates the gradients of K batches before each optimizer step
 * (the first K - 1 in {@link DataParallel#noSync()}); with {@code --die-at-step K} rank 1 halts at step K; with
 * {@code --nudge-on-rank-1 K} rank 1 changes its third parameter after step K; with {@code --wider-on-rank-1} rank 1's
 * hidden layer is wider (a model that differs); with {@code --accuracy-on-rank-0-only} only rank 0 adds an accuracy
 * evaluator (ranks whose evaluators differ). With {@code --elastic} ({@link DataParallel#elastic()}, under
 * {@code gradsync-run --min-ranks}), {@code --kill-rank R --kill-at-step K --kill-when WHEN} makes rank R SIGKILL itself
 * at step K: {@code before-reduce} (after its backward pass), {@code before-commit} (its gradients averaged, before the
 * barrier after them) or {@code after-step} (once the step is done); every rank prints, once each of
 * its steps is committed, {@code rank R trained epoch E: i,j,...} (the samples of the step), and the result line ends
 * with {@code , shrinks N, grows G}; restarted ({@code gradsync-run --max-restarts}), rank R does not kill itself again,
 * {@code --slow-while-short MS} makes every rank sleep that long each step while the job has fewer ranks than it
 * began with, {@code --optimizer adam} trains with Adam instead of SGD with momentum, and with {@code --restarted-dies}
 * a restarted rank SIGKILLs itself once taken back in, before the members bring it up to date.
 *
 * <pre>EasyTrainRank [--epochs 2] [--global-batch 32] [--batch-norm] [--accumulate K] [--die-at-step K]
 *     [--nudge-on-rank-1 K] [--wider-on-rank-1] [--accuracy-on-rank-0-only] [--plain-initialize [--seed-after-trainer]]
 *     [--through-copies]</pre>
 */
public final class EasyTrainRank {
    static final int SAMPLES = 512;
    static final int FEATURES = 16;
    static final int CLASSES = 4;

    private EasyTrainRank() {
    }

    /** The command line's options. */
    static final class Options {
        int epochs = 2;
        int globalBatch = 32;
        int accumulate = 1;
        int dieAtStep = -1;
        int nudgeAtStep = -1;
        boolean widerOnRank1;
        boolean batchNorm;
        boolean accuracyOnRank0Only;
        boolean plainInitialize;
        boolean seedAfterTrainer;
        boolean throughCopies;
        boolean elastic;
        int killRank = -1;
        int killAtStep = -1;
        String killWhen = "after-step";
        int slowWhileShortMillis;
        String optimizer = "sgd";
        boolean restartedDies;

        static Options parse(String[] args) {
            Options o = new Options();
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--epochs" -> o.epochs = Integer.parseInt(args[++i]);
                    case "--global-batch" -> o.globalBatch = Integer.parseInt(args[++i]);
                    case "--accumulate" -> o.accumulate = Integer.parseInt(args[++i]);
                    case "--die-at-step" -> o.dieAtStep = Integer.parseInt(args[++i]);
                    case "--nudge-on-rank-1" -> o.nudgeAtStep = Integer.parseInt(args[++i]);
                    case "--wider-on-rank-1" -> o.widerOnRank1 = true;
                    case "--batch-norm" -> o.batchNorm = true;
                    case "--accuracy-on-rank-0-only" -> o.accuracyOnRank0Only = true;
                    case "--plain-initialize" -> o.plainInitialize = true;
                    case "--seed-after-trainer" -> o.seedAfterTrainer = true;
                    case "--through-copies" -> o.throughCopies = true;
                    case "--elastic" -> o.elastic = true;
                    case "--kill-rank" -> o.killRank = Integer.parseInt(args[++i]);
                    case "--kill-at-step" -> o.killAtStep = Integer.parseInt(args[++i]);
                    case "--kill-when" -> o.killWhen = args[++i];
                    case "--slow-while-short" -> o.slowWhileShortMillis = Integer.parseInt(args[++i]);
                    case "--optimizer" -> o.optimizer = args[++i];
                    case "--restarted-dies" -> o.restartedDies = true;
                    default -> throw new IllegalArgumentException("unknown option " + args[i]);
                }
            }
            return o;
        }
    }

    public static void main(String[] args) throws Exception {
        Options options = Options.parse(args);
        System.setProperty("ai.djl.offline", "true");
        System.setProperty("ai.djl.default_engine", "PyTorch");
        System.setProperty("ai.djl.pytorch.num_threads", "1");
        System.setProperty("ai.djl.pytorch.num_interop_threads", "1");
        try (Communicator comm = Communicator.connect()) {
            System.out.println(train(comm, options));
        }
    }

    static String train(Communicator comm, Options o) throws Exception {
        int rank = comm.rank();
        boolean withAccuracy = !o.accuracyOnRank0Only || rank == 0;
        if (o.plainInitialize && !o.seedAfterTrainer) {
            Engine.getEngine("PyTorch").setRandomSeed(1000 + rank); // DataParallel gives every rank rank 0's
        }
        try (NDManager data = NDManager.newBaseManager(); Model model = Model.newInstance("rank" + rank)) {
            NDArray[] xy = dataset(data);
            SequentialBlock block = new SequentialBlock()
                    .add(Linear.builder().setUnits(o.widerOnRank1 && rank == 1 ? 40 : 32).build());
            if (o.batchNorm) {
                block.add(BatchNorm.builder().build());
            }
            model.setBlock(block.add(Activation::relu).add(Linear.builder().setUnits(CLASSES).build()));
            DataParallel ddp = DataParallel.over(comm).checkReplicasEvery(8);
            if (o.throughCopies) {
                ddp.throughCopies();
            }
            if (o.elastic) {
                ddp.elastic();
            }
            ArrayDataset train = new ArrayDataset.Builder().setData(xy[0]).optLabels(xy[1])
                    .setSampling(ddp.sampler(o.globalBatch, true, 7)).build();
            ArrayDataset validate = new ArrayDataset.Builder().setData(xy[0]).optLabels(xy[1])
                    .setSampling(ddp.sampler(o.globalBatch, false)).build();
            DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                    .addTrainingListeners(TrainingListener.Defaults.basic())
                    .optOptimizer(optimizer(o));
            addDataParallel(config, o, rank, ddp);
            if (withAccuracy) {
                config.addEvaluator(new Accuracy());
            }
            addFaults(config, o, rank, ddp, model);
            try (Trainer trainer = model.newTrainer(config)) {
                Shape input = new Shape(o.globalBatch / comm.size(), FEATURES);
                if (!o.plainInitialize || o.seedAfterTrainer) {
                    Engine.getEngine("PyTorch").setRandomSeed(1000 + rank); // each rank its own parameters
                }
                initialize(trainer, ddp, o, rank, input);
                float before = loss(trainer, xy);
                if (o.accumulate == 1) {
                    EasyTrain.fit(trainer, o.epochs, train, validate);
                } else {
                    fitAccumulating(trainer, ddp, o.accumulate, o.epochs, train, validate);
                }
                float after = loss(trainer, xy);
                TrainingResult result = trainer.getTrainingResult();
                return String.format(Locale.ROOT, "rank %d: loss %.6f -> %.6f, steps %d, hash %016x, copies %d, "
                                + "train loss %.9f, validate loss %.9f, validate accuracy %.9f, whole accuracy %.9f%s",
                        rank, before, after, ddp.steps(), hash(model), ddp.gradientsThroughCopies(), result.getTrainLoss(),
                        result.getValidateLoss(), withAccuracy ? result.getValidateEvaluation("Accuracy") : Float.NaN,
                        accuracy(trainer, xy), o.elastic ? ", shrinks " + ddp.shrinks() + ", grows " + ddp.grows() : "");
            }
        }
    }

    /** {@code trainer.initialize} or DataParallel's; first, a restarted rank dies if {@code --restarted-dies}. */
    private static void initialize(Trainer trainer, DataParallel ddp, Options o, int rank, Shape input) throws Exception {
        if (o.restartedDies && System.getenv("GRADSYNC_RESTART") != null) {
            dieOnceTakenBack(rank);
        }
        if (o.plainInitialize) {
            trainer.initialize(input);
        } else {
            ddp.initialize(trainer, input);
        }
    }

    private static void dieOnceTakenBack(int rank) throws Exception {
        System.out.println("rank " + rank + ", restarted and taken back in, SIGKILLs itself before the members bring it "
                + "up to date");
        System.out.flush();
        new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
        sleep(60_000);
    }

    private static Optimizer optimizer(Options o) {
        return o.optimizer.equals("adam") ? Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build()
                : Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.05f)).optMomentum(0.9f).build();
    }

    /** {@code ddp} as a listener, with the kill the options ask for before, in or after it, and the batches printed. */
    private static void addDataParallel(DefaultTrainingConfig config, Options o, int rank, DataParallel ddp) {
        if (rank == o.killRank && "before-reduce".equals(o.killWhen)) {
            config.addTrainingListeners(killAt(o, ddp));
        }
        if (rank == o.killRank && "before-commit".equals(o.killWhen)) {
            ddp.beforeCommit = () -> {
                if (ddp.steps() == o.killAtStep) {
                    killItself(o);
                }
            };
        }
        config.addTrainingListeners(ddp);
        if (o.elastic) {
            config.addTrainingListeners(printBatches(rank));
        }
        if (rank == o.killRank && "after-step".equals(o.killWhen)) {
            config.addTrainingListeners(killAt(o, ddp));
        }
        if (o.slowWhileShortMillis > 0) {
            int ranks = ddp.communicator().size();
            config.addTrainingListeners(new TrainingListenerAdapter() {
                @Override
                public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                    if (ddp.communicator().size() < ranks) {
                        sleep(o.slowWhileShortMillis); // the restarted rank's JVM may start slowly: leave it steps to join
                    }
                }
            });
        }
    }

    /** A listener that SIGKILLs this process at step {@code --kill-at-step}. */
    private static TrainingListener killAt(Options o, DataParallel ddp) {
        return new TrainingListenerAdapter() {
            @Override
            public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                if (ddp.steps() == o.killAtStep + ("after-step".equals(o.killWhen) ? 1 : 0)) {
                    killItself(o);
                }
            }
        };
    }

    private static void killItself(Options o) {
        if (System.getenv("GRADSYNC_RESTART") != null) {
            return; // restarted by gradsync-run --max-restarts: it was killed once
        }
        System.out.println("rank " + o.killRank + " kills itself with SIGKILL at step " + o.killAtStep + ", " + o.killWhen);
        System.out.flush();
        try {
            new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        sleep(60_000);
        throw new IllegalStateException("still alive after SIGKILL");
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** Prints the samples of each committed step: {@code rank R trained epoch E: i,j,...}. */
    private static TrainingListener printBatches(int rank) {
        return new TrainingListenerAdapter() {
            private int epoch;

            @Override
            public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                System.out.println("rank " + rank + " trained epoch " + epoch + ": " + batchData.getBatch().getIndices()
                        .stream().map(String::valueOf).collect(Collectors.joining(",")));
            }

            @Override
            public void onEpoch(Trainer trainer) {
                epoch++;
            }
        };
    }

    /** Rank 1's faults the options ask for: halting at a step, nudging a parameter after one. */
    private static void addFaults(DefaultTrainingConfig config, Options o, int rank, DataParallel ddp, Model model) {
        if (o.dieAtStep >= 0 && rank == 1) {
            config.addTrainingListeners(new TrainingListenerAdapter() {
                @Override
                public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                    if (ddp.steps() == o.dieAtStep) {
                        System.out.println("rank 1 halts at step " + o.dieAtStep);
                        System.out.flush();
                        Runtime.getRuntime().halt(3);
                    }
                }
            });
        }
        if (o.nudgeAtStep >= 0 && rank == 1) {
            config.addTrainingListeners(new TrainingListenerAdapter() {
                @Override
                public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                    if (ddp.steps() == o.nudgeAtStep) {
                        model.getBlock().getParameters().valueAt(2).getArray().addi(1e-3f);
                    }
                }
            });
        }
    }

    /** Features from a seeded Gaussian, labels the argmax of a fixed random linear teacher: the same on every rank. */
    static NDArray[] dataset(NDManager manager) {
        Random random = new Random(42);
        float[] x = new float[SAMPLES * FEATURES];
        float[] teacher = new float[FEATURES * CLASSES];
        for (int i = 0; i < teacher.length; i++) {
            teacher[i] = (float) random.nextGaussian();
        }
        float[] y = new float[SAMPLES];
        for (int s = 0; s < SAMPLES; s++) {
            float best = Float.NEGATIVE_INFINITY;
            for (int f = 0; f < FEATURES; f++) {
                x[s * FEATURES + f] = (float) random.nextGaussian();
            }
            for (int c = 0; c < CLASSES; c++) {
                float score = 0;
                for (int f = 0; f < FEATURES; f++) {
                    score += x[s * FEATURES + f] * teacher[f * CLASSES + c];
                }
                if (score > best) {
                    best = score;
                    y[s] = c;
                }
            }
        }
        return new NDArray[] {manager.create(x, new Shape(SAMPLES, FEATURES)), manager.create(y, new Shape(SAMPLES))};
    }

    /** {@code EasyTrain.fit} with gradients accumulated over {@code k} batches before each optimizer step. */
    private static void fitAccumulating(Trainer trainer, DataParallel ddp, int k, int epochs, Dataset train,
                                        Dataset validate) throws Exception {
        for (int epoch = 0; epoch < epochs; epoch++) {
            int i = 0;
            for (Batch batch : trainer.iterateDataset(train)) {
                if (++i % k != 0) {
                    try (DataParallel.NoSync paused = ddp.noSync()) {
                        EasyTrain.trainBatch(trainer, batch);
                    }
                } else {
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                }
                batch.close();
            }
            EasyTrain.evaluateDataset(trainer, validate);
            trainer.notifyListeners(listener -> listener.onEpoch(trainer));
        }
    }

    /** The share of the whole dataset the model classifies right, computed by this rank alone. */
    private static float accuracy(Trainer trainer, NDArray[] xy) {
        try (NDManager scratch = trainer.getManager().newSubManager()) {
            NDList predictions = trainer.evaluate(new NDList(xy[0]));
            NDArray right = predictions.singletonOrThrow().argMax(1).toType(DataType.FLOAT32, false).eq(xy[1]);
            float value = right.sum().getLong() / (float) SAMPLES;
            predictions.close();
            right.close();
            return value;
        }
    }

    /** The mean loss over the whole dataset, in inference mode (batch normalisation's running statistics). */
    private static float loss(Trainer trainer, NDArray[] xy) {
        try (NDManager scratch = trainer.getManager().newSubManager()) {
            NDList predictions = trainer.evaluate(new NDList(xy[0]));
            NDArray loss = trainer.getLoss().evaluate(new NDList(xy[1]), predictions);
            float value = loss.getFloat();
            predictions.close();
            loss.close();
            return value;
        }
    }

    private static long hash(Model model) {
        long h = 17;
        for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
            h = 31 * h + ModelParameters.hash(p.getValue().getArray().toByteBuffer());
        }
        return h;
    }
}
