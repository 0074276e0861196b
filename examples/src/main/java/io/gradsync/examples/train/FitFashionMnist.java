package io.gradsync.examples.train;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingResult;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.gradsync.core.Communicator;
import io.gradsync.core.bucket.GradientBuckets;
import io.gradsync.djl.DataParallel;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Data-parallel LeNet-5 (or ResNet-20) on Fashion-MNIST as a DJL user writes it: an ordinary {@code EasyTrain.fit}
 * program with DJL's PyTorch engine on CPU, made data-parallel by gradsync-djl's {@link DataParallel}. The lines marked
 * {@code // gradsync} are all that differs from the one-process program: connect, add the listener, and take the
 * samplers (the training set's and the test set's); the program's own {@code trainer.initialize} draws the same
 * parameters on every rank, from rank 0's seed. Each rank trains on its share of
 * every global batch; the gradients are averaged in buckets before every optimizer step, so N ranks at global batch B
 * follow the one-process run at batch B.
 *
 * <pre>
 * gradsync-run -n N -- fit-fashion-mnist [--model lenet5|resnet20] [--epochs 2] [--global-batch 64] [--lr 0.01]
 *     [--momentum 0.9] [--check-every 0] [--bucket-kb 0] [--train-samples 60000] [--test-samples 10000]
 *     [--data /usr/share/datasets/fashion-mnist] [--transport auto] [--elastic [--kill-rank R --kill-at-step K]]
 * </pre>
 * {@code --elastic} ({@link DataParallel#elastic()}, under {@code gradsync-run --min-ranks M}) goes on without lost
 * ranks; {@code --kill-rank R --kill-at-step K} makes rank R SIGKILL itself when it reaches step K (after its backward
 * pass, before its averaging) and print when, and every survivor prints when its first step after the shrink was done;
 * under {@code gradsync-run --max-restarts 1} the restarted rank (which does not kill itself again) is taken back in
 * and prints when its first step was done, and how long after its JVM started.
 * {@code --bucket-kb K} makes every gradient bucket K KiB (0: {@code GradientBuckets}' defaults, 25 MiB and a first
 * of 1 MiB).
 * Prints per epoch (rank 0) DJL's training result: the epoch's training loss and its test accuracy, which
 * {@code DataParallel} averages over the ranks (each rank evaluates its share of the test set), and the epoch's time
 * (training and test) per step; then every rank prints its parameters' hash and its buckets ({@code replicas:} line).
 */
public final class FitFashionMnist {
    private int epochs = 2;
    private int globalBatch = 64;
    private float lr = 0.01f;
    private float momentum = 0.9f;
    private int checkEvery;
    private int trainSamples = Integer.MAX_VALUE;
    private int testSamples = Integer.MAX_VALUE;
    private Path data = FashionMnist.DEFAULT_DIR;
    private String transport = "auto";
    private long seed = 42;
    private String modelName = "lenet5";
    private int bucketKb;
    private boolean elastic;
    private int killRank = -1;
    private long killAtStep = -1;

    private FitFashionMnist() {
    }

    public static void main(String[] args) throws Exception {
        FitFashionMnist f = new FitFashionMnist();
        for (int i = 0; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--epochs" -> f.epochs = Integer.parseInt(v);
                case "--global-batch" -> f.globalBatch = Integer.parseInt(v);
                case "--lr" -> f.lr = Float.parseFloat(v);
                case "--momentum" -> f.momentum = Float.parseFloat(v);
                case "--check-every" -> f.checkEvery = Integer.parseInt(v);
                case "--train-samples" -> f.trainSamples = Integer.parseInt(v);
                case "--test-samples" -> f.testSamples = Integer.parseInt(v);
                case "--data" -> f.data = Path.of(v);
                case "--transport" -> f.transport = v;
                case "--seed" -> f.seed = Long.parseLong(v);
                case "--model" -> f.modelName = v;
                case "--bucket-kb" -> f.bucketKb = Integer.parseInt(v);
                case "--elastic" -> {
                    f.elastic = true;
                    i--;
                }
                case "--kill-rank" -> f.killRank = Integer.parseInt(v);
                case "--kill-at-step" -> f.killAtStep = Long.parseLong(v);
                default -> {
                    System.err.println("unknown option " + args[i] + " (see FitFashionMnist's class comment)");
                    System.exit(2);
                }
            }
            i++;
        }
        TrainFashionMnist.configureDjl(1);
        f.run();
    }

    private void run() throws Exception {
        FashionMnist.Split train = FashionMnist.train(data);
        FashionMnist.Split test = FashionMnist.test(data);
        try (Communicator comm = Communicator.connect(transport);                            // gradsync
             NDManager manager = NDManager.newBaseManager();
             Model model = Model.newInstance("lenet5")) {
            GradientBuckets buckets = bucketKb == 0 ? GradientBuckets.create(comm) : GradientBuckets.builder(comm)
                    .bucketBytes(bucketKb * 1024L).firstBucketBytes(bucketKb * 1024L).build();
            DataParallel ddp = DataParallel.over(comm, buckets).checkReplicasEvery(checkEvery); // gradsync
            if (elastic) {
                ddp.elastic();
            }
            int rank = comm.rank();
            ArrayDataset trainSet = new ArrayDataset.Builder()
                    .setData(manager.create(train.images(), new Shape(train.count(), 1, 28, 28)))
                    .optLabels(manager.create(train.labels(), new Shape(train.count())))
                    .optLimit(Math.min(trainSamples, train.count()))
                    .setSampling(ddp.sampler(globalBatch, true, seed))                           // gradsync
                    .build();
            ArrayDataset testSet = new ArrayDataset.Builder()
                    .setData(manager.create(test.images(), new Shape(test.count(), 1, 28, 28)))
                    .optLabels(manager.create(test.labels(), new Shape(test.count())))
                    .optLimit(Math.min(testSamples, test.count()))
                    .setSampling(ddp.sampler(500 * comm.size(), false))                          // gradsync
                    .build();
            model.setBlock(switch (modelName) {
                case "lenet5" -> TrainFashionMnist.lenet5();
                case "resnet20" -> ResNet20.of(10);
                default -> throw new IllegalArgumentException("--model " + modelName + ": lenet5 or resnet20");
            });
            DefaultTrainingConfig config = config(ddp, rank);
            Engine.getEngine("PyTorch").setRandomSeed((int) seed);
            try (Trainer trainer = model.newTrainer(config)) {
                trainer.initialize(new Shape(globalBatch / comm.size(), 1, 28, 28));
                for (int epoch = 1; epoch <= epochs; epoch++) {
                    long start = System.nanoTime();
                    long stepsBefore = ddp.steps();
                    EasyTrain.fit(trainer, 1, trainSet, testSet);
                    long steps = ddp.steps() - stepsBefore;
                    double stepMs = (System.nanoTime() - start) / 1e6 / Math.max(1, steps);
                    TrainingResult result = trainer.getTrainingResult();
                    if (ddp.communicator().rank() == 0) {
                        System.out.printf(Locale.ROOT, "epoch %d: %d steps of global batch %d on %d ranks, loss %.4f, "
                                        + "test accuracy %.2f%%, step %.2f ms (the epoch's time with its test, per step)%n",
                                epoch, steps, globalBatch, ddp.communicator().size(), result.getTrainLoss(),
                                100 * result.getValidateEvaluation("Accuracy"), stepMs);
                    }
                }
                System.out.printf(Locale.ROOT, "replicas: rank %d parameters %016x, gradients through copies %d, "
                                + "%d gradients in %d buckets%n", rank, parametersHash(model),
                        ddp.gradientsThroughCopies(), buckets.gradientCount(), buckets.bucketCount());
                if (elastic) {
                    System.out.printf(Locale.ROOT, "elastic: rank %d took %d steps, shrank %d time(s), took a restarted rank "
                            + "back %d time(s)%n", rank, ddp.steps(), ddp.shrinks(), ddp.grows());
                }
            }
        }
    }

    /** SGD with momentum, DJL's basic listeners and DataParallel; the kill and the survivors' report the options ask for. */
    private DefaultTrainingConfig config(DataParallel ddp, int rank) {
        DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .addEvaluator(new Accuracy())
                .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(lr)).optMomentum(momentum).build())
                .addTrainingListeners(TrainingListener.Defaults.basic());
        if (rank == killRank) {
            config.addTrainingListeners(killAt(ddp, rank));
        }
        return config.addTrainingListeners(ddp)                                                  // gradsync
                .addTrainingListeners(firstStepAfterShrink(ddp, rank), firstStepAfterRestart(ddp, rank));
    }

    /** SIGKILLs this process when it reaches step {@code --kill-at-step}, after its backward pass. */
    private TrainingListener killAt(DataParallel ddp, int rank) {
        return new TrainingListenerAdapter() {
            @Override
            public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                if (ddp.steps() == killAtStep && System.getenv("GRADSYNC_RESTART") == null) {
                    System.out.printf(Locale.ROOT, "rank %d kills itself with SIGKILL at step %d at %d ms%n", rank,
                            killAtStep, System.currentTimeMillis());
                    System.out.flush();
                    try {
                        new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
                        Thread.sleep(60_000);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }
            }
        };
    }

    /** Prints when the first step after each shrink was done on this rank. */
    private static TrainingListener firstStepAfterShrink(DataParallel ddp, int rank) {
        return new TrainingListenerAdapter() {
            private int shrinks;

            @Override
            public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                if (ddp.shrinks() > shrinks) {
                    shrinks = ddp.shrinks();
                    System.out.printf(Locale.ROOT, "rank %d (rank %d of %d): first step after shrink %d done at %d ms%n",
                            rank, ddp.communicator().rank(), ddp.communicator().size(), shrinks, System.currentTimeMillis());
                }
            }
        };
    }

    /**
     * On a rank that gradsync-run restarted ({@code --max-restarts}): prints when its first step was done, and how long
     * after its JVM started.
     */
    private static TrainingListener firstStepAfterRestart(DataParallel ddp, int rank) {
        return new TrainingListenerAdapter() {
            private boolean printed = System.getenv("GRADSYNC_RESTART") == null;

            @Override
            public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                if (!printed) {
                    printed = true;
                    long now = System.currentTimeMillis();
                    System.out.printf(Locale.ROOT, "rank %d (restart %s, rank %d of %d): first step, %d, done at %d ms, "
                                    + "%d ms after its JVM started%n", rank, System.getenv("GRADSYNC_RESTART"),
                            ddp.communicator().rank(), ddp.communicator().size(), ddp.steps(), now,
                            now - ManagementFactory.getRuntimeMXBean().getStartTime());
                }
            }
        };
    }

    /** A hash of every parameter's bits, in the block's order. */
    private static long parametersHash(Model model) {
        long h = 1125899906842597L;
        for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
            for (float v : p.getValue().getArray().toFloatArray()) {
                h = 31 * h + Float.floatToRawIntBits(v);
            }
        }
        return h;
    }
}
