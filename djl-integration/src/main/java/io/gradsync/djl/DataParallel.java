package io.gradsync.djl;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.Trainer;
import ai.djl.training.evaluator.Evaluator;
import ai.djl.training.listener.TrainingListener;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.bucket.GradientBuckets;
import java.security.SecureRandom;
import java.util.List;
import java.util.Objects;

/**
 * Data-parallel training for a DJL program, DDP's way: every rank runs the same program on its share of the data
 * ({@link #sampler}), holds a replica of the model, and averages the gradients across ranks before each optimizer
 * step, so that the replicas stay identical and N ranks at global batch B follow the one-process run at batch B. It
 * is a {@link TrainingListener}: an unchanged {@code EasyTrain.fit} loop (or any loop that notifies
 * {@code onTrainingBatch} between backward and {@code trainer.step()}, as {@code EasyTrain.trainBatch} does) trains
 * data-parallel once it is added to the training configuration.
 *
 * <pre>{@code
 * DataParallel ddp = DataParallel.over(Communicator.connect());              // under gradsync-run, torchrun, srun, mpirun
 * TrainingConfig config = new DefaultTrainingConfig(loss).addTrainingListeners(ddp);
 * RandomAccessDataset train = Mnist.builder().setSampling(ddp.sampler(64, true)).build();   // global batch 64
 * Trainer trainer = model.newTrainer(config);
 * trainer.initialize(new Shape(1, 28 * 28));                                // the same parameters on every rank
 * EasyTrain.fit(trainer, epochs, train, validate);
 * }</pre>
 *
 * <ul>
 *   <li><b>Start.</b> When the trainer is created ({@code onTrainingBegin}) and the model's parameters exist already
 *   (a loaded model, a block initialised before the trainer), every parameter becomes rank 0's. Otherwise every
 *   rank's engine gets rank 0's random seed, so that the program's own {@code trainer.initialize} draws the same
 *   parameters everywhere; the first step checks that the ranks built the same model with the same initial
 *   parameters, and fails on every rank, naming the first that differs, if not (a seed set per rank after the trainer
 *   was created; an initializer that ignores the engine's seed). {@link #initialize} instead of
 *   {@code trainer.initialize} broadcasts rank 0's parameters, whatever the seeds.</li>
 *   <li><b>Every step</b> ({@code onTrainingBatch}, after backward): the trainable parameters' gradients are fed to a
 *   {@link GradientBuckets} last layer first and averaged bucket by bucket, in the engine's own gradient memory
 *   where it hands it out (PyTorch's CPU tensors), else through host copies; then the layers' running statistics
 *   (batch normalisation's mean and variance) become rank 0's, as DDP's {@code broadcast_buffers}.</li>
 *   <li><b>Replica check.</b> At the end of every epoch, and every {@link #checkReplicasEvery} steps: one collective
 *   of a hash per parameter; replicas that differ fail every rank with a {@link ReplicasDifferException} naming the
 *   first parameter that differs.</li>
 *   <li><b>Metrics.</b> The trainer's evaluators (its loss, the accuracies in the configuration) report the whole
 *   job's epoch values on every rank: reading an evaluator's training or validation epoch accumulator, as DJL's
 *   {@code EvaluatorTrainingListener} does at the end of each epoch, averages it across ranks, weighted by the samples
 *   each rank evaluated; so {@code trainer.getTrainingResult()}, the trainer's metrics and DJL's log lines are the
 *   same on every rank. Per-batch values (the progress bar's) stay each rank's own.</li>
 *   <li><b>{@link #noSync()}</b> pauses the averaging for gradient accumulation, as DDP's {@code no_sync}.</li>
 *   <li><b>{@link #elastic()}</b> goes on without ranks that are lost, on the survivors, and takes restarted ones
 *   back in.</li>
 * </ul>
 * Errors of the collectives (a rank that died, unless elastic; a layout that differs between ranks) are the
 * communicator's: every rank fails the step with an exception naming the rank and the collective. One
 * {@code DataParallel} serves one trainer; it closes its buckets at {@code onTrainingEnd} (the trainer's
 * {@code close}), not the communicator you gave it (one a shrink made, it does).
 */
public final class DataParallel implements TrainingListener {
    private final ElasticGroup group;
    private GradientBuckets buckets;
    private int checkEvery;
    private ModelParameters parameters;
    private StepGradients gradients;
    private boolean replicasIdentical;
    private boolean paused;
    /** Whether {@code onTrainingBegin} gave every rank rank 0's seed, for the program's own initialisation. */
    private boolean seeded;
    private boolean copyAll;
    private long steps;
    private int epochs;
    /** The trainer this listener serves, from {@code onTrainingBegin}. */
    private Trainer trainer;
    /** Run between a step's averaging and its commit: tests kill a rank there. */
    Runnable beforeCommit = () -> { };

    private DataParallel(Communicator comm, GradientBuckets buckets) {
        this.group = new ElasticGroup(comm);
        this.buckets = buckets;
        group.welcome(new ElasticGroup.Welcome() {
            @Override
            public long[] counters() {
                return new long[] {steps, epochs};
            }

            @Override
            public void counters(long[] counters) {
                steps = counters[0];
                epochs = (int) counters[1];
            }

            @Override
            public void broadcastState(Communicator c, int root) {
                bringUpToDate(c, root);
            }
        });
    }

    /** Data parallelism over {@code comm}'s ranks, with gradient buckets of the defaults (25 MiB, the first 1 MiB). */
    public static DataParallel over(Communicator comm) {
        Objects.requireNonNull(comm, "comm");
        return new DataParallel(comm, GradientBuckets.create(comm));
    }

    /** Data parallelism over {@code comm}'s ranks with {@code buckets} (of the sizes the caller chose, averaging). */
    public static DataParallel over(Communicator comm, GradientBuckets buckets) {
        return new DataParallel(Objects.requireNonNull(comm, "comm"), Objects.requireNonNull(buckets, "buckets"));
    }

    /** Also checks the replicas every {@code steps} steps (0, the default: only at the end of each epoch). */
    public DataParallel checkReplicasEvery(int steps) {
        if (steps < 0) {
            throw new IllegalArgumentException("replica check every " + steps + " steps: 0 (off) or more");
        }
        this.checkEvery = steps;
        return this;
    }

    /**
     * Goes on without ranks that are lost (a process that dies, is killed, or stops for longer than the communicator's
     * timeout), as the job's launcher allows ({@code gradsync-run --min-ranks M}, which also serves the rendezvous
     * that outlives any rank): the survivors shrink the communicator ({@link Communicator#shrink()}) and go on, on
     * every rank alike, from the collective the earliest of them stands at.
     * <ul>
     *   <li>The step in flight is averaged again over the survivors, from each survivor's own gradients, which stay in
     *   the engine's arrays until every rank has them averaged (a barrier after each step's averaging): so no rank has
     *   applied gradients that a survivor averages again without the lost rank's part. The average is over the
     *   survivors (AVG over the new size).</li>
     *   <li>The epoch's samples are split anew among the survivors ({@link #sampler}): the steps some survivor has
     *   loaded keep their split; the later ones take what is left of the epoch plus the lost ranks' shares of the steps
     *   not completed, in global batches of {@code n⌊B/n⌋} for {@code n} survivors, so no sample of the epoch is left
     *   out or trained twice but the padding to a multiple of {@code n}. Later epochs are the survivors'.</li>
     *   <li>The replica checks, the running statistics and the metrics are the survivors' from then on.</li>
     *   <li>A restarted rank ({@code gradsync-run --max-restarts K}) is taken back in at a step boundary: each step's
     *   barrier also agrees whether one waits; after the optimizer applied that step, before the next batch is asked
     *   for, the members grow the communicator and the lowest of them sends the restarted rank the parameters, the
     *   optimizer's state (its update counts and every per-parameter array, read from DJL's optimizer fields), every
     *   sampler's split and progress, and the step and epoch; the rest of the epoch is split among all of them (with
     *   DJL prefetching batches, at the next epoch's start instead). The restarted process runs the same program: it
     *   waits in {@link #initialize} (or its first {@link #sampler} epoch), skips the epochs the members trained (its
     *   {@code EasyTrain.fit} starts at epoch 0; their evaluators and checks stay its own), and trains on with them.
     *   Its training batches must come from {@link #sampler}. (A {@code DataParallel} made over a communicator of a
     *   later generation than the job's first, {@link Communicator#generation()} above 0, takes its process for such
     *   a restarted rank.) A rank restarted after the members' last step is not taken in: it is told, once they
     *   finish, that the job ended without it.</li>
     * </ul>
     * Each step then copies its gradients into host memory and back (twice the gradients' bytes), and adds a barrier
     * (a {@code MAX} of two numbers). Only DataParallel's own collectives go on; one of the program's own on
     * {@link #communicator()} fails as without elastic. {@link #communicator()} is then the survivors' (or the grown
     * one), closed with the trainer.
     *
     * @throws IllegalStateException once training has begun
     */
    public DataParallel elastic() {
        if (parameters != null || seeded) {
            throw new IllegalStateException("rank " + group.id() + ": elastic() after training began");
        }
        group.elastic(next -> {
            buckets.close();
            buckets = buckets.over(next);
        });
        return this;
    }

    /**
     * This rank's sampler for a training dataset at global batch {@code globalBatch} (a multiple of the rank count;
     * each rank's batches hold {@code globalBatch / ranks} samples), shuffled every epoch if {@code shuffle}, from
     * seed 0 plus the epoch. See {@link ShardedSampler}.
     */
    public ShardedSampler sampler(int globalBatch, boolean shuffle) {
        return sampler(globalBatch, shuffle, 0);
    }

    /** As {@link #sampler(int, boolean)}, shuffled from {@code seed} plus the epoch. */
    public ShardedSampler sampler(int globalBatch, boolean shuffle, long seed) {
        Communicator comm = group.communicator();
        // a restarted rank's size may differ from the members' first one: their batch sizes come with their welcome
        if (!group.awaitingWelcome() && (globalBatch < 1 || globalBatch % comm.size() != 0)) {
            throw new IllegalArgumentException("rank " + comm.rank() + ": global batch " + globalBatch
                    + " is not a positive multiple of the " + comm.size() + " ranks");
        }
        return group.register(new ShardedSampler(group.id(), group.members(), Math.max(1, globalBatch / comm.size()),
                shuffle, seed, false));
    }

    /** {@code trainer.initialize(inputShapes)}, then every parameter made rank 0's. */
    public void initialize(Trainer trainer, Shape... inputShapes) {
        trainer.initialize(inputShapes);
        synchronize(trainer.getModel());
    }

    /**
     * Makes every parameter of {@code model} rank 0's (and checks that they arrived). On a restarted rank taken back in
     * ({@link #elastic()}) it waits instead for the members, which bring it up to date.
     */
    public void synchronize(Model model) {
        if (group.awaitingWelcome()) {
            group.joinIfRestarted();
            return;
        }
        parameters = ModelParameters.of(model);
        group.run("parameters from rank 0", c -> {
            parameters.broadcastAll(c);
            return null;
        });
        checkReplicas("after the parameters were broadcast from rank 0", true);
        replicasIdentical = true;
    }

    /**
     * Reduces every gradient through a host copy written back with {@code set}, as for an engine that hands out no
     * gradient's memory (DJL's GPU tensors): tests run that path on the CPU engine with it.
     */
    DataParallel throughCopies() {
        this.copyAll = true;
        return this;
    }

    /** The communicator the ranks train over: the survivors' after an {@linkplain #elastic() elastic} shrink. */
    public Communicator communicator() {
        return group.communicator();
    }

    /** How many times the ranks shrank to the survivors of a loss ({@link #elastic()}). */
    public int shrinks() {
        return group.shrinks();
    }

    /** How many times this rank, a member, took a restarted rank back in ({@link #elastic()}). */
    public int grows() {
        return group.grows();
    }

    /**
     * On every rank of a grown communicator: the parameters, the layers' statistics and the optimizer's state made
     * {@code root}'s, whose replica the restarted rank then is; it goes on from the members' step and epoch.
     */
    private void bringUpToDate(Communicator comm, int root) {
        if (trainer == null) {
            throw new IllegalStateException("rank " + comm.rank() + ": a restarted rank taken back in before its trainer was "
                    + "made: DataParallel brings it up to date once the trainer and its parameters exist");
        }
        if (parameters == null) {
            parameters = ModelParameters.of(trainer.getModel());
        }
        parameters.broadcastAll(comm, root);
        OptimizerState.of(trainer).broadcast(comm, root, parameters.all());
        replicasIdentical = true;
    }

    /** Steps whose gradients were averaged. */
    public long steps() {
        return steps;
    }

    /** How many gradients the engine does not hand out in place and are reduced through copies; -1 before a step. */
    public int gradientsThroughCopies() {
        return gradients == null ? -1 : gradients.throughCopies();
    }

    /**
     * {@code no_sync} for gradient accumulation: until the returned scope is closed, training batches leave their
     * gradients on this rank, where the engine adds the next backward pass's to them (PyTorch's does, until the
     * optimizer step zeroes them); the first batch after it averages the sum. Every rank must pause the same
     * batches. DJL's way to accumulate over {@code k} batches is a loop of its own:
     * <pre>{@code
     * for (Batch batch : trainer.iterateDataset(train)) {
     *     if (++i % k != 0) {
     *         try (DataParallel.NoSync paused = ddp.noSync()) {
     *             EasyTrain.trainBatch(trainer, batch);
     *         }
     *     } else {
     *         EasyTrain.trainBatch(trainer, batch);   // averages the k batches' gradients
     *         trainer.step();
     *     }
     *     batch.close();
     * }
     * }</pre>
     * ({@code EasyTrain.fit} steps after every batch, so it has nothing to accumulate.)
     *
     * @throws IllegalStateException if a {@code noSync} scope is open already
     */
    public NoSync noSync() {
        if (paused) {
            throw new IllegalStateException("rank " + group.communicator().rank() + ": noSync() inside another noSync() scope");
        }
        paused = true;
        return () -> paused = false;
    }

    /** A {@link #noSync()} scope: closing it makes the next training batch average the gradients again. */
    public interface NoSync extends AutoCloseable {
        @Override
        void close();
    }

    @Override
    public void onTrainingBegin(Trainer trainer) {
        this.trainer = trainer;
        List<Evaluator> evaluators = trainer.getEvaluators();
        for (int i = 0; i < evaluators.size(); i++) {
            if (!(evaluators.get(i) instanceof RankAveragedEvaluator)) {
                evaluators.set(i, new RankAveragedEvaluator(evaluators.get(i), group, trainer));
            }
        }
        ModelParameters found = ModelParameters.of(trainer.getModel());
        if (found.initialized()) {
            synchronize(trainer.getModel());
        } else if (!group.awaitingWelcome()) { // a restarted rank gets its parameters from the members
            seedInitialization(trainer.getManager().getEngine());
        }
    }

    /**
     * Gives every rank's engine rank 0's random seed (the one rank 0's program set, or a random one), so that the
     * program's own {@code trainer.initialize} draws the same parameters on every rank; the first step checks that it
     * did. DJL calls {@code onTrainingBegin} in the trainer's constructor, before the parameters exist.
     */
    private void seedInitialization(Engine engine) {
        Integer own = engine.getSeed();
        long[] seed = {own != null ? own : new SecureRandom().nextInt()};
        group.run("seed from rank 0", c -> {
            c.broadcastBlocking(GradientBuffer.wrap(seed), 0);
            return null;
        });
        engine.setRandomSeed((int) seed[0]);
        seeded = true;
    }

    @Override
    public void onTrainingBatch(Trainer trainer, BatchData batchData) {
        if (group.awaitingWelcome()) {
            throw new IllegalStateException("rank " + group.communicator().rank() + ": this restarted rank trained a batch "
                    + "before the members brought it up to date: take the training data's batches from ddp.sampler(...), "
                    + "or call ddp.initialize(trainer, shapes) or synchronize(model)");
        }
        if (!replicasIdentical) {
            if (!seeded) {
                throw new IllegalStateException("rank " + group.communicator().rank() + ": a training step before the "
                        + "replicas were made identical: call DataParallel.initialize(trainer, shapes) instead of "
                        + "trainer.initialize(shapes), or synchronize(model) once the model's parameters exist");
            }
            parameters = ModelParameters.of(trainer.getModel());
            group.run("model check", c -> {
                parameters.checkSameModel(c);
                return null;
            });
            checkReplicas("at the first step, after trainer.initialize from rank 0's seed (a seed set per rank after the "
                    + "trainer was created, or an initializer that ignores the engine's seed): call "
                    + "DataParallel.initialize(trainer, shapes) instead, which broadcasts rank 0's parameters", false);
            replicasIdentical = true;
        }
        if (paused) {
            return;
        }
        if (gradients == null) {
            gradients = new StepGradients(trainer.getModel(), copyAll);
        }
        if (group.isElastic()) {
            List<?> batch = batchData.getBatch().getIndices();
            group.samplers().stream().filter(s -> s.returned(batch)).forEach(ShardedSampler::trains);
            group.run("the gradients of step " + steps, c -> {
                gradients.reduceStaged(buckets);
                return null;
            });
            beforeCommit.run();
            group.commit("the end of step " + steps);
            gradients.writeBackStaged(trainer.getManager());
            group.samplers().forEach(s -> s.completedThrough(batch));
        } else {
            gradients.reduce(buckets, trainer.getManager());
        }
        group.run("running statistics from rank 0", c -> {
            parameters.broadcastStatistics(c);
            return null;
        });
        steps++;
        if (checkEvery > 0 && steps % checkEvery == 0) {
            checkReplicas("after step " + steps, true);
        }
    }

    /**
     * Throws, on every rank alike, a {@link ReplicasDifferException} naming the first parameter whose bits differ
     * between the ranks (the statistics too if {@code withStatistics}), and {@code when}.
     */
    private void checkReplicas(String when, boolean withStatistics) {
        long[] hashes = parameters.hashes(withStatistics);
        int first = group.run("replica check " + when, c -> ModelParameters.firstDiffering(c, hashes));
        parameters.requireIdentical(group.communicator().rank(), first, when);
    }

    @Override
    public void onValidationBatch(Trainer trainer, BatchData batchData) {
        // evaluation changes no parameter
    }

    @Override
    public void onEpoch(Trainer trainer) {
        if (group.catchingUp()) {
            return; // a restarted rank's epoch that the members trained before it came back
        }
        epochs++;
        if (parameters != null) {
            checkReplicas("at the end of epoch " + epochs + " (step " + steps + ")", true);
        }
    }

    @Override
    public void onTrainingEnd(Trainer trainer) {
        buckets.close();
        group.close();
    }
}
