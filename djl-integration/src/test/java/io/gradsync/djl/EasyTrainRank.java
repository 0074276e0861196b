package io.gradsync.djl;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.gradsync.core.Communicator;
import java.util.Locale;
import java.util.Random;

/**
 * An ordinary DJL {@code EasyTrain} program made data-parallel by {@link DataParallel}, as one rank of a job that a
 * launcher started: a small classifier (two linear layers, with {@code --batch-norm} a batch normalisation between
 * them) on a synthetic dataset of
 * {@value #SAMPLES} samples whose labels a fixed random teacher assigns. Every rank initialises its parameters from its
 * own seed, so only the broadcast makes the replicas equal. It prints one line:
 * {@code rank R: loss BEFORE -> AFTER, steps S, hash H, copies C} (the loss over the whole dataset before and after
 * training, the parameters' hash); with {@code --die-at-step K} rank 1 halts at step K; with
 * {@code --nudge-on-rank-1 K} rank 1 changes its third parameter after step K; with {@code --wider-on-rank-1} rank 1's
 * hidden layer is wider (a model that differs).
 *
 * <pre>EasyTrainRank [--epochs 2] [--global-batch 32] [--batch-norm] [--die-at-step K] [--nudge-on-rank-1 K]
 *     [--wider-on-rank-1]</pre>
 */
public final class EasyTrainRank {
    static final int SAMPLES = 512;
    static final int FEATURES = 16;
    static final int CLASSES = 4;

    private EasyTrainRank() {
    }

    public static void main(String[] args) throws Exception {
        int epochs = 2;
        int globalBatch = 32;
        int dieAtStep = -1;
        boolean wider = false;
        boolean batchNorm = false;
        int nudgeAtStep = -1;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--epochs" -> epochs = Integer.parseInt(args[++i]);
                case "--global-batch" -> globalBatch = Integer.parseInt(args[++i]);
                case "--die-at-step" -> dieAtStep = Integer.parseInt(args[++i]);
                case "--wider-on-rank-1" -> wider = true;
                case "--batch-norm" -> batchNorm = true;
                case "--nudge-on-rank-1" -> nudgeAtStep = Integer.parseInt(args[++i]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        System.setProperty("ai.djl.offline", "true");
        System.setProperty("ai.djl.default_engine", "PyTorch");
        System.setProperty("ai.djl.pytorch.num_threads", "1");
        System.setProperty("ai.djl.pytorch.num_interop_threads", "1");
        try (Communicator comm = Communicator.connect()) {
            System.out.println(train(comm, epochs, globalBatch, dieAtStep, nudgeAtStep, wider && comm.rank() == 1, batchNorm));
        }
    }

    static String train(Communicator comm, int epochs, int globalBatch, int dieAtStep, int nudgeAtStep, boolean wider,
                        boolean batchNorm)
            throws Exception {
        int rank = comm.rank();
        Engine.getEngine("PyTorch").setRandomSeed(1000 + rank);
        try (NDManager data = NDManager.newBaseManager(); Model model = Model.newInstance("rank" + rank)) {
            NDArray[] xy = dataset(data);
            SequentialBlock block = new SequentialBlock().add(Linear.builder().setUnits(wider ? 40 : 32).build());
            if (batchNorm) {
                block.add(BatchNorm.builder().build());
            }
            model.setBlock(block.add(Activation::relu).add(Linear.builder().setUnits(CLASSES).build()));
            DataParallel ddp = DataParallel.over(comm).checkReplicasEvery(8);
            ArrayDataset train = new ArrayDataset.Builder().setData(xy[0]).optLabels(xy[1])
                    .setSampling(ddp.sampler(globalBatch, true, 7)).build();
            DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                    .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.05f)).optMomentum(0.9f).build())
                    .addTrainingListeners(ddp);
            if (dieAtStep >= 0 && rank == 1) {
                config.addTrainingListeners(new TrainingListenerAdapter() {
                    @Override
                    public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                        if (ddp.steps() == dieAtStep) {
                            System.out.println("rank 1 halts at step " + dieAtStep);
                            System.out.flush();
                            Runtime.getRuntime().halt(3);
                        }
                    }
                });
            }
            if (nudgeAtStep >= 0 && rank == 1) {
                config.addTrainingListeners(new TrainingListenerAdapter() {
                    @Override
                    public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                        if (ddp.steps() == nudgeAtStep) {
                            model.getBlock().getParameters().valueAt(2).getArray().addi(1e-3f);
                        }
                    }
                });
            }
            try (Trainer trainer = model.newTrainer(config)) {
                ddp.initialize(trainer, new Shape(globalBatch / comm.size(), FEATURES));
                float before = loss(trainer, xy);
                EasyTrain.fit(trainer, epochs, train, null);
                float after = loss(trainer, xy);
                return String.format(Locale.ROOT, "rank %d: loss %.6f -> %.6f, steps %d, hash %016x, copies %d", rank,
                        before, after, ddp.steps(), hash(model), ddp.gradientsThroughCopies());
            }
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
