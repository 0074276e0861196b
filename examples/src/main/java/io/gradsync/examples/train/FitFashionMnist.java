package io.gradsync.examples.train;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
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
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.djl.DataParallel;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Data-parallel LeNet-5 on Fashion-MNIST as a DJL user writes it: an ordinary {@code EasyTrain.fit} program with
 * DJL's PyTorch engine on CPU, made data-parallel by gradsync-djl's {@link DataParallel}. The lines marked
 * {@code // gradsync} are all that differs from the one-process program: connect, add the listener, take the
 * sampler, and initialise through it. Each rank trains on its share of every global batch; the gradients are
 * averaged in buckets before every optimizer step, so N ranks at global batch B follow the one-process run at
 * batch B.
 *
 * <pre>
 * gradsync-run -n N -- fit-fashion-mnist [--epochs 2] [--global-batch 64] [--lr 0.01] [--momentum 0.9]
 *     [--check-every 0] [--train-samples 60000] [--data /usr/share/datasets/fashion-mnist] [--transport auto]
 * </pre>
 * Prints per epoch (rank 0): the mean training loss and the test accuracy over all ranks (each evaluates its share of
 * the test set), and the time per step; then every rank prints its parameters' hash ({@code replicas:} line).
 */
public final class FitFashionMnist {
    private int epochs = 2;
    private int globalBatch = 64;
    private float lr = 0.01f;
    private float momentum = 0.9f;
    private int checkEvery;
    private int trainSamples = Integer.MAX_VALUE;
    private Path data = FashionMnist.DEFAULT_DIR;
    private String transport = "auto";
    private long seed = 42;

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
                case "--data" -> f.data = Path.of(v);
                case "--transport" -> f.transport = v;
                case "--seed" -> f.seed = Long.parseLong(v);
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
            DataParallel ddp = DataParallel.over(comm).checkReplicasEvery(checkEvery);      // gradsync
            int samples = Math.min(trainSamples, train.count());
            ArrayDataset trainSet = new ArrayDataset.Builder()
                    .setData(manager.create(train.images(), new Shape(train.count(), 1, 28, 28)))
                    .optLabels(manager.create(train.labels(), new Shape(train.count())))
                    .optLimit(samples)
                    .setSampling(ddp.sampler(globalBatch, true, seed))                           // gradsync
                    .build();
            model.setBlock(TrainFashionMnist.lenet5());
            EpochLoss epochLoss = new EpochLoss();
            DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                    .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(lr)).optMomentum(momentum).build())
                    .addTrainingListeners(epochLoss)
                    .addTrainingListeners(ddp);                                                  // gradsync
            Engine.getEngine("PyTorch").setRandomSeed((int) seed);
            try (Trainer trainer = model.newTrainer(config)) {
                ddp.initialize(trainer, new Shape(globalBatch / comm.size(), 1, 28, 28));      // gradsync
                for (int epoch = 1; epoch <= epochs; epoch++) {
                    long start = System.nanoTime();
                    long stepsBefore = ddp.steps();
                    EasyTrain.fit(trainer, 1, trainSet, null);
                    long steps = ddp.steps() - stepsBefore;
                    double stepMs = (System.nanoTime() - start) / 1e6 / Math.max(1, steps);
                    double[] loss = {epochLoss.takeMean()};
                    comm.allReduceBlocking(GradientBuffer.wrap(loss), ReduceOp.AVG);
                    double accuracy = accuracy(comm, trainer, test);
                    if (comm.rank() == 0) {
                        System.out.printf(Locale.ROOT, "epoch %d: %d steps of global batch %d on %d ranks, loss %.4f, "
                                        + "test accuracy %.2f%%, step %.2f ms%n", epoch, steps, globalBatch, comm.size(),
                                loss[0], 100 * accuracy, stepMs);
                    }
                }
                System.out.printf(Locale.ROOT, "replicas: rank %d parameters %016x, gradients through copies %d%n",
                        comm.rank(), parametersHash(model), ddp.gradientsThroughCopies());
            }
        }
    }

    /** Test accuracy over all ranks, each evaluating its share of the test set. */
    private static double accuracy(Communicator comm, Trainer trainer, FashionMnist.Split test) {
        int per = (test.count() + comm.size() - 1) / comm.size();
        int from = comm.rank() * per;
        int to = Math.min(test.count(), from + per);
        long correct = 0;
        for (int start = from; start < to; start += 500) {
            int b = Math.min(500, to - start);
            float[] x = new float[b * FashionMnist.PIXELS];
            System.arraycopy(test.images(), start * FashionMnist.PIXELS, x, 0, x.length);
            try (NDManager m = trainer.getManager().newSubManager()) {
                NDArray logits = trainer.evaluate(new NDList(m.create(x, new Shape(b, 1, 28, 28)))).singletonOrThrow();
                long[] predicted = logits.argMax(1).toLongArray();
                for (int i = 0; i < b; i++) {
                    correct += predicted[i] == (long) test.labels()[start + i] ? 1 : 0;
                }
            }
        }
        long[] counts = {correct, Math.max(0, to - from)};
        comm.allReduceBlocking(GradientBuffer.wrap(counts), ReduceOp.SUM);
        return counts[0] / (double) counts[1];
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

    /** The mean training loss of this rank's batches since it was last taken. */
    private static final class EpochLoss extends TrainingListenerAdapter {
        private double sum;
        private long batches;

        @Override
        public void onTrainingBatch(Trainer trainer, BatchData batchData) {
            for (Device device : batchData.getLabels().keySet()) {
                try (NDArray loss = trainer.getLoss().evaluate(batchData.getLabels().get(device),
                        batchData.getPredictions().get(device))) {
                    sum += loss.getFloat();
                }
            }
            batches++;
        }

        double takeMean() {
            double mean = sum / Math.max(1, batches);
            sum = 0;
            batches = 0;
            return mean;
        }
    }
}
