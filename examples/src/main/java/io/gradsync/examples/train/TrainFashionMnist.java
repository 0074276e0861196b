package io.gradsync.examples.train;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Blocks;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.gradsync.core.CollectiveException;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.bucket.GradientBuckets;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.locks.ReentrantLock;
import reactor.core.publisher.Flux;

/**
 * Data-parallel LeNet-5 on Fashion-MNIST with DJL's PyTorch engine on CPU. Every rank holds a replica
 * (rank 0's initial parameters broadcast), trains on its shard of each global batch (global batch
 * {@code B}, rank {@code r} takes samples {@code [r B/N, (r+1) B/N)} of it, from one shuffled order that
 * every rank draws with the same seed), and the gradients (fed last layer first) are bucketed and averaged
 * with {@link GradientBuckets} before the optimizer step, so that N ranks at global batch B follow the
 * one-process run at batch B up to rounding. Every {@code --check-every} steps (and at each epoch's end) a
 * checksum collective (hash of every parameter's bits, all-reduced with MAX over the hash and its
 * complement) proves the replicas identical.
 *
 * <pre>
 * gradsync-run -n N -- train-fashion-mnist [--epochs 2] [--global-batch 64] [--lr 0.01] [--momentum 0.9]
 *     [--check-every 20] [--max-steps S] [--data /usr/share/datasets/fashion-mnist] [--transport aeron-ipc]
 * train-fashion-mnist --threads N ...     (ranks as threads of one JVM; their PyTorch calls take turns)
 * </pre>
 * Prints per epoch (rank 0): mean training loss, test accuracy, step time, exposed communication time
 * (DJL's backward is one native call, so every bucket is reduced after it: all communication is exposed).
 *
 * <p>{@code --elastic} (processes, under {@code gradsync-run --min-ranks M}) survives lost ranks. When a collective
 * fails, every survivor shrinks the communicator ({@link Communicator#shrink()}) and the loop goes on from the least
 * step any survivor completed: a survivor that had already applied the step in flight (its AllReduce completed while
 * another's still waited for the dead rank) restores the parameters and momentum it had before it, so the step is
 * redone by all and applied once. The global batch stays {@code B}: step {@code s} always covers samples
 * {@code [s B, (s+1) B)} of the epoch's order, and rank {@code r} of {@code n} takes
 * {@code [floor(r B / n), floor((r+1) B / n))} of them, so after a shrink no sample of the epoch is lost or doubled.
 * Each rank weights its gradient (a mean over its samples) by its share of the batch and the buckets SUM them, which
 * is the mean over the global batch for any split; SGD with momentum runs on host copies of the parameters, so that
 * the state a step changes can be kept and restored. At each checksum step the ranks also agree whether a restarted
 * rank waits ({@code gradsync-run --max-restarts}); then they grow the communicator and the lowest other member
 * broadcasts where the loop is, the parameters and the momentum to it. {@code --kill-rank R --kill-at-step S} makes
 * rank R SIGKILL itself at step S (not again once restarted), printing the time; each rank prints when its first step
 * in a new generation completed.
 */
public final class TrainFashionMnist {
    int epochs = 2;
    int globalBatch = 64;
    float lr = 0.01f;
    float momentum = 0.9f;
    int checkEvery = 20;
    int maxSteps = Integer.MAX_VALUE;
    Path data = FashionMnist.DEFAULT_DIR;
    String transport = "aeron-ipc";
    int threads = 0;
    long seed = 42;
    boolean quiet;
    /** Survive lost ranks: shrink the communicator and go on (see the class comment). */
    boolean elastic;
    /** With {@link #killAtStep}: this rank SIGKILLs itself when it reaches that step (counted from 0 over all epochs). */
    int killRank = -1;
    int killAtStep = -1;
    /** In threads mode: DJL's PyTorch GradientCollector is one per JVM, so the ranks' PyTorch calls take turns. */
    private final ReentrantLock torch = new ReentrantLock();
    private volatile FashionMnist.Split train;
    private volatile FashionMnist.Split test;

    /** One epoch as rank 0 reports it. */
    public record Epoch(int epoch, int steps, double loss, double accuracy, double stepMs, double exposedMs,
                        int checks, boolean identical) {
    }

    /** What a rank returns: its epochs, first and last logged losses, and its final checksum. */
    public record Result(int rank, List<Epoch> epochs, double firstLoss, double lastLoss, long checksum,
                         int bucketsPerStep, int gradientsPerStep) {
    }

    static SequentialBlock lenet5() {
        return new SequentialBlock()
                .add(Conv2d.builder().setKernelShape(new Shape(5, 5)).optPadding(new Shape(2, 2)).setFilters(6).build())
                .add(Activation::relu)
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(Conv2d.builder().setKernelShape(new Shape(5, 5)).setFilters(16).build())
                .add(Activation::relu)
                .add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)))
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(120).build())
                .add(Activation::relu)
                .add(Linear.builder().setUnits(84).build())
                .add(Activation::relu)
                .add(Linear.builder().setUnits(10).build());
    }

    static void configureDjl(int torchThreads) {
        setIfAbsent("ai.djl.offline", "true");
        setIfAbsent("ai.djl.default_engine", "PyTorch");
        setIfAbsent("ai.djl.pytorch.num_threads", Integer.toString(torchThreads));
        setIfAbsent("ai.djl.pytorch.num_interop_threads", "1");
    }

    private static void setIfAbsent(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    private void load() throws Exception {
        synchronized (this) {
            if (train == null) {
                train = FashionMnist.train(data);
                test = FashionMnist.test(data);
            }
        }
    }

    Result runRank(Communicator comm) throws Exception {
        load();
        try (Model model = Model.newInstance("lenet5-rank" + comm.rank(), "PyTorch")) {
            model.setBlock(lenet5());
            RankTraining training = new RankTraining(comm, model);
            List<Epoch> epochList = new ArrayList<>();
            for (int epoch = training.epoch; epoch < epochs; epoch++) {
                epochList.add(training.epoch(epoch));
            }
            return training.finish(epochList);
        }
    }

    /**
     * One rank's training: its replica (trainer and parameters), the gradients' host copies and their bucketer,
     * the batch arrays, and what the epochs count (steps, checksum collectives, first and last loss).
     */
    private final class RankTraining {
        private final Communicator launched;
        private final int original;
        private Communicator comm;
        private int rank;
        /** This rank's samples of each global batch: {@code [from, from + local)}. */
        private int from;
        private int local;
        private final boolean shared = threads > 0;
        private final List<Parameter> params = new ArrayList<>();
        private final Trainer trainer;
        private final int tensors;
        private final float[][] grads;
        private final GradientBuffer[] gradBuffers;
        /** The order the bucketer gets the gradients in: last layer first, as a backward pass produces them. */
        private final Integer[] backwardOrder;
        private GradientBuckets buckets;
        private final int stepsPerEpoch;
        private final float[] xs;
        private final float[] ys;
        /** Elastic: the parameters and momentum on the host, and the same before the last step applied. */
        private float[][] weights;
        private float[][] velocity;
        private float[][] weightsBefore;
        private float[][] velocityBefore;
        /** The epoch under way (from 0), steps completed over all epochs, and within the epoch. */
        private int epoch;
        private int step;
        private int stepInEpoch;
        /** A rank taken back in resumes in the middle of an epoch: the first epoch keeps the step it was given. */
        private boolean resuming;
        private int grows;
        private int checks;
        private int shrinks;
        private boolean reportNextStep;
        private double firstLoss = Double.NaN;
        private double lastLoss = Double.NaN;
        /** The losses of this epoch's steps on this rank, and how many (fewer for a rank taken back mid-epoch). */
        private double lossSum;
        private int lossSteps;
        private long stepNanos;
        private long exposedNanos;
        private boolean identical;

        RankTraining(Communicator comm, Model model) throws Exception {
            this.launched = comm;
            this.comm = comm;
            String launchedRank = System.getenv("RANK");
            original = threads == 0 && launchedRank != null ? Integer.parseInt(launchedRank) : comm.rank();
            boolean takenBack = comm.generation() > 0;
            shard();
            trainer = newTrainer(model);
            if (!takenBack) {
                broadcastInitialParameters();
            }
            tensors = params.size();
            grads = new float[tensors][];
            gradBuffers = new GradientBuffer[tensors];
            backwardOrder = new Integer[tensors];
            for (int i = 0; i < tensors; i++) {
                backwardOrder[i] = tensors - 1 - i;
            }
            buckets = newBuckets();
            stepsPerEpoch = Math.min(train.count() / globalBatch, maxSteps);
            xs = new float[globalBatch * FashionMnist.PIXELS];
            ys = new float[globalBatch];
            if (elastic) {
                weights = new float[tensors][];
                velocity = new float[tensors][];
                weightsBefore = new float[tensors][];
                velocityBefore = new float[tensors][];
                for (int i = 0; i < tensors; i++) {
                    Parameter p = params.get(i);
                    weights[i] = withTorch(shared, () -> p.getArray().toFloatArray());
                    velocity[i] = new float[weights[i].length];
                    weightsBefore[i] = new float[weights[i].length];
                    velocityBefore[i] = new float[weights[i].length];
                }
            }
            if (takenBack) {
                regrouped(true);
                System.out.printf(Locale.ROOT, "rank %d (restart %s): taken back as rank %d of %d at epoch %d step %d, %d ms "
                                + "after its JVM started%n", original, System.getenv("GRADSYNC_RESTART"), rank, comm.size(),
                        epoch + 1, step, System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime());
                reportNextStep = true;
            }
        }

        /** This rank's share of each global batch, as the class comment says. */
        private void shard() {
            rank = comm.rank();
            int n = comm.size();
            if (!elastic && globalBatch % n != 0) {
                throw new IllegalArgumentException("global batch " + globalBatch + " is not a multiple of " + n + " ranks");
            }
            from = (int) ((long) rank * globalBatch / n);
            local = (int) ((long) (rank + 1) * globalBatch / n) - from;
        }

        /** Averaging buckets; elastic: summing, the gradients weighted by each rank's share of the batch. */
        private GradientBuckets newBuckets() {
            return elastic ? GradientBuckets.builder(comm).op(ReduceOp.SUM).build() : GradientBuckets.create(comm);
        }

        /** A trainer for {@code model}, its parameters initialised from the seed and listed in {@link #params}. */
        private Trainer newTrainer(Model model) throws Exception {
            DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                    .optOptimizer(Optimizer.sgd().setLearningRateTracker(Tracker.fixed(lr)).optMomentum(momentum).build());
            return withTorch(shared, () -> {
                Engine.getEngine("PyTorch").setRandomSeed((int) seed);
                Trainer created = model.newTrainer(config);
                created.initialize(new Shape(Math.max(1, local), 1, 28, 28));
                for (Pair<String, Parameter> p : model.getBlock().getParameters()) {
                    params.add(p.getValue());
                }
                return created;
            });
        }

        /** Identical replicas from the start: rank 0's initial parameters everywhere. */
        private void broadcastInitialParameters() throws Exception {
            for (Parameter p : params) {
                float[] v = withTorch(shared, () -> p.getArray().toFloatArray());
                comm.broadcastBlocking(GradientBuffer.wrap(v), 0);
                withTorch(shared, () -> {
                    p.getArray().set(v);
                    return null;
                });
            }
        }

        /** One epoch (numbered from 0) in one shuffled order; fails when the replicas differ at its end. */
        Epoch epoch(int epoch) throws Exception {
            this.epoch = epoch;
            int[] order = permutation(train.count(), new Random(seed + epoch));
            lossSum = 0;
            lossSteps = 0;
            stepNanos = 0;
            exposedNanos = 0;
            identical = true;
            stepInEpoch = resuming ? stepInEpoch : 0;
            resuming = false;
            while (true) {
                try {
                    while (stepInEpoch < stepsPerEpoch) {
                        trainStep(order);
                    }
                    return endOfEpoch(epoch);
                } catch (CollectiveException e) {
                    if (!elastic) {
                        throw e;
                    }
                    goOnWithoutTheLost(e);
                }
            }
        }

        /** One step of the global batch: forward and backward on this rank's share, reduce, apply; a checksum now and then. */
        private void trainStep(int[] order) throws Exception {
            if (original == killRank && step == killAtStep && System.getenv("GRADSYNC_RESTART") == null) {
                killItself();
            }
            long t0 = System.nanoTime();
            loadBatch(order, stepInEpoch);
            float loss = forwardBackward();
            long c0 = System.nanoTime();
            Flux.fromArray(backwardOrder).transform(buckets.reduce(i -> gradBuffers[i])).blockLast();
            long c1 = System.nanoTime();
            if (elastic) {
                applyOnHost();
            } else {
                applyAveragedGradients();
            }
            stepInEpoch++;
            step++;
            long t1 = System.nanoTime();
            stepNanos += t1 - t0;
            exposedNanos += c1 - c0;
            lossSum += loss;
            lossSteps++;
            if (Double.isNaN(firstLoss)) {
                firstLoss = loss;
            }
            lastLoss = loss;
            if (reportNextStep) {
                reportNextStep = false;
                System.out.printf(Locale.ROOT, "rank %d (rank %d of %d): first step in generation %d completed at %d ms, %d ms "
                                + "after its JVM started%n", original, rank, comm.size(), comm.generation(), System.currentTimeMillis(),
                        System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime());
            }
            if (checkEvery > 0 && step % checkEvery == 0) {
                identical &= checkAndTakeBack();
                checks++;
            }
        }

        /**
         * The periodic checksum collective, which also carries whether any rank heard that a restarted rank waits: then
         * every rank grows the communicator here, at the same step, and brings the newcomer up to date.
         */
        private boolean checkAndTakeBack() throws Exception {
            long h = checksum(params, shared);
            long[] v = {h, ~h, comm.joinWaiting() ? 1 : 0};
            comm.allReduceBlocking(GradientBuffer.wrap(v), ReduceOp.MAX);
            if (v[2] != 0) {
                long start = System.nanoTime();
                comm = comm.grow(); // closes the communicator it grows from
                grows++;
                regrouped(false);
                System.out.printf(Locale.ROOT, "rank %d: grew to rank %d of %d in %.0f ms at step %d%n", original, rank,
                        comm.size(), (System.nanoTime() - start) / 1e6, step);
            }
            return v[0] == h && v[1] == ~h;
        }

        /**
         * After a new generation (a shrink, a grow, or this rank taken back in), on every member: agree on the least step
         * any member completed (a rank taken back in offers none; one that applied the step in flight goes back to the
         * state before it), shard the batch anew, bring ranks taken back up to date from the lowest other member, and
         * check that the replicas are identical.
         */
        private void regrouped(boolean takenBack) throws Exception {
            long none = Long.MAX_VALUE;
            long[] agreed = {takenBack ? none : step, takenBack ? -1 : 0, takenBack ? none : comm.rank()};
            comm.allReduceBlocking(GradientBuffer.wrap(agreed), ReduceOp.MIN);
            if (!takenBack && step - agreed[0] == 1) {
                restoreStepBefore();
                step--;
                stepInEpoch--;
                lossSum -= lastLoss;
                lossSteps--;
            } else if (!takenBack && step != agreed[0]) {
                throw new IllegalStateException("rank " + original + " completed " + step + " steps, a member only "
                        + agreed[0] + ": more than the one step in flight apart");
            }
            shard();
            buckets.close(); // the last generation's
            buckets = newBuckets();
            if (agreed[1] < 0) {
                shareState((int) agreed[2], takenBack);
            }
            if (!sameEverywhere(comm, checksum(params, shared))) {
                throw new IllegalStateException("replicas differ in generation " + comm.generation());
            }
        }

        /** Where the loop is, the parameters and the momentum, broadcast from {@code root} to the ranks taken back in. */
        private void shareState(int root, boolean receiving) throws Exception {
            long[] where = {epoch, stepInEpoch, step};
            comm.broadcastBlocking(GradientBuffer.wrap(where), root);
            for (int i = 0; i < tensors; i++) {
                comm.broadcastBlocking(GradientBuffer.wrap(weights[i]), root);
                comm.broadcastBlocking(GradientBuffer.wrap(velocity[i]), root);
            }
            if (receiving) {
                epoch = (int) where[0];
                stepInEpoch = (int) where[1];
                step = (int) where[2];
                resuming = true;
                writeWeights();
            }
        }

        /** The epoch's checksum, mean loss and test accuracy. */
        private Epoch endOfEpoch(int epoch) throws Exception {
            boolean same = identical & sameEverywhere(comm, checksum(params, shared));
            double[] losses = {lossSum, lossSteps};
            comm.allReduceBlocking(GradientBuffer.wrap(losses), ReduceOp.SUM);
            double[] lossMean = {losses[0] / losses[1]};
            double accuracy = evaluate(comm, trainer, shared);
            checks++;
            Epoch e = new Epoch(epoch + 1, stepsPerEpoch, lossMean[0], accuracy, stepNanos / 1e6 / stepsPerEpoch,
                    exposedNanos / 1e6 / stepsPerEpoch, checks, same);
            print(e);
            if (!same) {
                throw new IllegalStateException("replicas differ after epoch " + (epoch + 1));
            }
            return e;
        }

        /**
         * After a failed collective: shrink to the survivors, agree on the least step any of them completed (going back
         * one step where this rank had applied the step in flight), shard the batch anew and check that the replicas
         * are identical.
         */
        private void goOnWithoutTheLost(CollectiveException failure) throws Exception {
            long start = System.nanoTime();
            comm = comm.shrink(); // closes the communicator it shrinks
            shrinks++;
            regrouped(false);
            reportNextStep = true;
            System.out.printf(Locale.ROOT, "rank %d: %s; shrank to rank %d of %d in %.0f ms, going on from step %d%n", original,
                    failure.getMessage(), rank, comm.size(), (System.nanoTime() - start) / 1e6, step);
        }

        /** Elastic SGD with momentum on the host copies (as PyTorch: v = m v + g, w -= lr v), after keeping the state before. */
        private void applyOnHost() throws Exception {
            for (int i = 0; i < tensors; i++) {
                float[] w = weights[i];
                float[] v = velocity[i];
                float[] g = grads[i];
                System.arraycopy(w, 0, weightsBefore[i], 0, w.length);
                System.arraycopy(v, 0, velocityBefore[i], 0, v.length);
                for (int j = 0; j < w.length; j++) {
                    v[j] = momentum * v[j] + g[j];
                    w[j] -= lr * v[j];
                }
            }
            writeWeights();
        }

        /** The state before the last step applied, back. */
        private void restoreStepBefore() throws Exception {
            for (int i = 0; i < tensors; i++) {
                System.arraycopy(weightsBefore[i], 0, weights[i], 0, weights[i].length);
                System.arraycopy(velocityBefore[i], 0, velocity[i], 0, velocity[i].length);
            }
            writeWeights();
        }

        /** The host copies into DJL's parameters, in place. */
        private void writeWeights() throws Exception {
            withTorch(shared, () -> {
                try (NDManager m = trainer.getManager().newSubManager()) {
                    for (int i = 0; i < tensors; i++) {
                        NDArray weight = params.get(i).getArray();
                        weight.set(new NDIndex(":"), m.create(weights[i], weight.getShape()));
                    }
                }
                return null;
            });
        }

        private void killItself() throws Exception {
            System.out.printf(Locale.ROOT, "rank %d kills itself with SIGKILL at step %d at %d ms%n", original, step,
                    System.currentTimeMillis());
            System.out.flush();
            new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
            Thread.sleep(60_000);
        }

        /** This rank's share of global batch {@code s}: samples {@code [from, from + local)} of it. */
        private void loadBatch(int[] order, int s) {
            int base = s * globalBatch + from;
            for (int i = 0; i < local; i++) {
                int idx = order[base + i];
                System.arraycopy(train.images(), idx * FashionMnist.PIXELS, xs, i * FashionMnist.PIXELS, FashionMnist.PIXELS);
                ys[i] = train.labels()[idx];
            }
        }

        /** Forward and backward on the batch; copies each gradient out for the bucketer. Returns the loss. */
        private float forwardBackward() {
            float loss;
            lock(shared);
            try (NDManager m = trainer.getManager().newSubManager()) {
                NDArray x = m.create(Arrays.copyOf(xs, local * FashionMnist.PIXELS), new Shape(local, 1, 28, 28));
                NDArray y = m.create(Arrays.copyOf(ys, local), new Shape(local));
                try (GradientCollector gc = trainer.newGradientCollector()) {
                    NDList pred = trainer.forward(new NDList(x));
                    NDArray l = trainer.getLoss().evaluate(new NDList(y), pred);
                    loss = l.getFloat();
                    gc.backward(l);
                }
                float share = local / (float) globalBatch;
                for (int i = 0; i < tensors; i++) {
                    try (NDArray g = params.get(i).getArray().getGradient()) {
                        grads[i] = g.toFloatArray();
                        if (elastic) {
                            g.muli(0); // no trainer.step() to clear it
                            for (int j = 0; j < grads[i].length; j++) {
                                grads[i][j] *= share;
                            }
                        }
                    }
                    gradBuffers[i] = GradientBuffer.wrap(grads[i]);
                }
            } finally {
                unlock(shared);
            }
            return loss;
        }

        /** Writes the averaged gradients into DJL's gradient tensors (read back on the first step) and steps the optimizer. */
        private void applyAveragedGradients() {
            lock(shared);
            try (NDManager m = trainer.getManager().newSubManager()) {
                for (int i = 0; i < tensors; i++) {
                    NDArray weight = params.get(i).getArray();
                    // in place: NDArray.set(Buffer) may swap the handle's tensor instead of writing into it
                    try (NDArray g = weight.getGradient()) {
                        g.set(new NDIndex(":"), m.create(grads[i], weight.getShape()));
                    }
                    if (step == 0) {
                        try (NDArray fresh = weight.getGradient()) {
                            float[] back = fresh.toFloatArray();
                            if (!Arrays.equals(back, grads[i])) {
                                throw new IllegalStateException("the averaged gradient of parameter " + i
                                        + " did not reach DJL's gradient tensor");
                            }
                        }
                    }
                }
                trainer.step();
            } finally {
                unlock(shared);
            }
        }

        private void print(Epoch e) {
            if (rank == 0 && !quiet) {
                System.out.printf(Locale.ROOT, "epoch %d: %d steps of global batch %d on %d ranks, loss %.4f, "
                                + "test accuracy %.2f%%, step %.2f ms, exposed comm %.2f ms/step, %d buckets for %d "
                                + "gradient tensors, replicas %s (%d checksum collectives so far)%n",
                        e.epoch(), e.steps(), globalBatch, comm.size(), e.loss(), 100 * e.accuracy(), e.stepMs(), e.exposedMs(),
                        buckets.bucketCount(), tensors, e.identical() ? "identical" : "DIFFER", checks);
            }
        }

        /** The final checksum and bucket count; closes the bucketer, the trainer and a communicator shrink made. */
        Result finish(List<Epoch> epochList) throws Exception {
            long sum = checksum(params, shared);
            int bucketCount = buckets.bucketCount();
            buckets.close();
            if (comm != launched) {
                comm.close();
            }
            if (elastic) {
                System.out.printf(Locale.ROOT, "rank %d (rank %d of %d): %d steps, %d shrink(s), %d grow(s), parameters %016x%n",
                        original, rank, comm.size(), step, shrinks, grows, sum);
            }
            withTorch(shared, () -> {
                trainer.close();
                return null;
            });
            return new Result(rank, epochList, firstLoss, lastLoss, sum, bucketCount, tensors);
        }
    }

    /** Test accuracy, each rank evaluating its share of the test set. */
    private double evaluate(Communicator comm, Trainer trainer, boolean shared) {
        int n = comm.size();
        int per = (test.count() + n - 1) / n;
        int from = comm.rank() * per;
        int to = Math.min(test.count(), from + per);
        long correct = 0;
        int chunk = 500;
        for (int start = from; start < to; start += chunk) {
            int b = Math.min(chunk, to - start);
            float[] x = new float[b * FashionMnist.PIXELS];
            System.arraycopy(test.images(), start * FashionMnist.PIXELS, x, 0, x.length);
            lock(shared);
            try (NDManager m = trainer.getManager().newSubManager()) {
                NDArray logits = trainer.evaluate(new NDList(m.create(x, new Shape(b, 1, 28, 28)))).singletonOrThrow();
                long[] predicted = logits.argMax(1).toLongArray();
                for (int i = 0; i < b; i++) {
                    if (predicted[i] == (long) test.labels()[start + i]) {
                        correct++;
                    }
                }
            } finally {
                unlock(shared);
            }
        }
        long[] counts = {correct, Math.max(0, to - from)};
        comm.allReduceBlocking(GradientBuffer.wrap(counts), ReduceOp.SUM);
        return counts[0] / (double) counts[1];
    }

    private long checksum(List<Parameter> params, boolean shared) throws Exception {
        return withTorch(shared, () -> {
            long h = 1125899906842597L;
            for (Parameter p : params) {
                for (float v : p.getArray().toFloatArray()) {
                    h = 31 * h + Float.floatToRawIntBits(v);
                }
            }
            return h;
        });
    }

    /** The checksum collective: true when every rank has the same {@code h}. */
    static boolean sameEverywhere(Communicator comm, long h) {
        long[] v = {h, ~h};
        comm.allReduceBlocking(GradientBuffer.wrap(v), ReduceOp.MAX);
        return v[0] == h && v[1] == ~h;
    }

    static int[] permutation(int n, Random random) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) {
            p[i] = i;
        }
        for (int i = n - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        return p;
    }

    private interface TorchCall<V> {
        V call() throws Exception;
    }

    private <V> V withTorch(boolean shared, TorchCall<V> call) throws Exception {
        lock(shared);
        try {
            return call.call();
        } finally {
            unlock(shared);
        }
    }

    private void lock(boolean shared) {
        if (shared) {
            torch.lock();
        }
    }

    private void unlock(boolean shared) {
        if (shared) {
            torch.unlock();
        }
    }

    /** Runs the configured job: threads of this JVM, or this process's rank. Returns rank 0's result first. */
    public List<Result> run() throws Exception {
        configureDjl(1);
        if (threads > 0 || !Ranks.launched()) {
            return Ranks.threads(Math.max(1, threads), this::runRank);
        }
        return List.of(Ranks.process(transport, this::runRank));
    }

    public static void main(String[] args) throws Exception {
        TrainFashionMnist t = new TrainFashionMnist();
        for (int i = 0; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--epochs" -> t.epochs = Integer.parseInt(v);
                case "--global-batch" -> t.globalBatch = Integer.parseInt(v);
                case "--lr" -> t.lr = Float.parseFloat(v);
                case "--momentum" -> t.momentum = Float.parseFloat(v);
                case "--check-every" -> t.checkEvery = Integer.parseInt(v);
                case "--max-steps" -> t.maxSteps = Integer.parseInt(v);
                case "--data" -> t.data = Path.of(v);
                case "--transport" -> t.transport = v;
                case "--threads" -> t.threads = Integer.parseInt(v);
                case "--seed" -> t.seed = Long.parseLong(v);
                case "--elastic" -> {
                    t.elastic = true;
                    i--;
                }
                case "--kill-rank" -> t.killRank = Integer.parseInt(v);
                case "--kill-at-step" -> t.killAtStep = Integer.parseInt(v);
                default -> {
                    System.err.println("unknown option " + args[i] + " (see TrainFashionMnist's class comment)");
                    System.exit(2);
                }
            }
            i++;
        }
        List<Result> results = t.run();
        boolean ok = true;
        for (Result r : results) {
            for (Epoch e : r.epochs()) {
                ok &= e.identical();
            }
            if (r.checksum() != results.get(0).checksum()) {
                ok = false;
            }
        }
        System.exit(ok ? 0 : 1);
    }
}
