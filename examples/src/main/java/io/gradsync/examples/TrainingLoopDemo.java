package io.gradsync.examples;

import io.gradsync.core.Communicator;
import io.gradsync.core.DataType;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.memory.Elements;
import io.gradsync.core.transport.local.LocalTransport;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;
import reactor.core.publisher.Flux;

/**
 * Data-parallel SGD on a linear model, the way a training loop uses gradsync: every rank computes the
 * gradients of its own shard, the gradients flow through {@code comm.allReduce(ReduceOp.AVG)}, and
 * each rank applies the averaged gradient. Because every rank applies the same bits, the replicas
 * never drift apart; the demo checks that at the end.
 *
 * <p>Usage: {@code TrainingLoopDemo [ranks] [steps]}.
 */
public final class TrainingLoopDemo {
    static final int FEATURES = 64;
    static final int BATCH = 256;
    static final float LEARNING_RATE = 0.05f;

    /** One replica: weights, bias and its gradient buffers (reused every step, off-heap). */
    static final class Replica {
        final float[] weights = new float[FEATURES];
        final float[] bias = new float[1];
        final GradientBuffer weightGrad = GradientBuffer.allocateDirect(DataType.FLOAT32, FEATURES);
        final GradientBuffer biasGrad = GradientBuffer.allocateDirect(DataType.FLOAT32, 1);
        final float[] x = new float[BATCH * FEATURES];
        final float[] y = new float[BATCH];

        /** Loads this rank's mini-batch of {@code step}: y = x . trueWeights + 0.5 + noise. */
        void loadBatch(int rank, int step, float[] trueWeights) {
            Random random = new Random(rank * 1_000_003L + step);
            for (int i = 0; i < BATCH; i++) {
                float target = 0.5f;
                for (int f = 0; f < FEATURES; f++) {
                    float v = (float) random.nextGaussian();
                    x[i * FEATURES + f] = v;
                    target += v * trueWeights[f];
                }
                y[i] = target + 0.01f * (float) random.nextGaussian();
            }
        }

        /** Mean squared error of the batch, and its gradients written into the gradient buffers. */
        float backward() {
            float[] gw = new float[FEATURES];
            float gb = 0;
            float loss = 0;
            for (int i = 0; i < BATCH; i++) {
                float prediction = bias[0];
                for (int f = 0; f < FEATURES; f++) {
                    prediction += x[i * FEATURES + f] * weights[f];
                }
                float error = prediction - y[i];
                loss += error * error;
                for (int f = 0; f < FEATURES; f++) {
                    gw[f] += 2 * error * x[i * FEATURES + f] / BATCH;
                }
                gb += 2 * error / BATCH;
            }
            for (int f = 0; f < FEATURES; f++) {
                setFloat(weightGrad, f, gw[f]);
            }
            setFloat(biasGrad, 0, gb);
            return loss / BATCH;
        }

        void apply(GradientBuffer gradient) {
            float[] target = gradient == weightGrad ? weights : bias;
            for (int i = 0; i < target.length; i++) {
                target[i] -= LEARNING_RATE * (float) gradient.getDouble(i);
            }
        }
    }

    private static void setFloat(GradientBuffer buffer, int index, float value) {
        Elements.putFloat(buffer.region().base(), buffer.region().offset() + 4L * index, value);
    }

    /** Trains {@code ranks} replicas for {@code steps} steps; returns each rank's final weights and losses. */
    static List<float[]> train(int ranks, int steps, List<float[]> lossesOut) throws Exception {
        float[] trueWeights = new float[FEATURES];
        Random truth = new Random(42);
        for (int f = 0; f < FEATURES; f++) {
            trueWeights[f] = (float) truth.nextGaussian();
        }
        try (LocalTransport job = LocalTransport.create(ranks)) {
            ExecutorService threads = Executors.newFixedThreadPool(ranks);
            try {
                List<Future<float[]>> results = new ArrayList<>();
                for (int r = 0; r < ranks; r++) {
                    int rank = r;
                    Communicator comm = Communicator.create(job.endpoint(rank));
                    float[] losses = new float[steps];
                    lossesOut.add(losses);
                    results.add(threads.submit(() -> {
                        try (comm) {
                            Replica replica = new Replica();
                            Function<Flux<GradientBuffer>, Flux<GradientBuffer>> average = comm.allReduce(ReduceOp.AVG);
                            for (int step = 0; step < steps; step++) {
                                replica.loadBatch(rank, step, trueWeights);
                                losses[step] = replica.backward();
                                Flux.just(replica.weightGrad, replica.biasGrad)
                                        .transform(average)
                                        .doOnNext(replica::apply)
                                        .blockLast();
                            }
                            float[] state = Arrays.copyOf(replica.weights, FEATURES + 1);
                            state[FEATURES] = replica.bias[0];
                            return state;
                        }
                    }));
                }
                List<float[]> states = new ArrayList<>();
                for (Future<float[]> f : results) {
                    states.add(f.get());
                }
                return states;
            } finally {
                threads.shutdownNow();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        int ranks = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        int steps = args.length > 1 ? Integer.parseInt(args[1]) : 100;
        List<float[]> losses = new ArrayList<>();
        List<float[]> states = train(ranks, steps, losses);
        for (int step = 0; step < steps; step += Math.max(1, steps / 10)) {
            float mean = 0;
            for (float[] l : losses) {
                mean += l[step] / ranks;
            }
            System.out.printf(Locale.ROOT, "step %4d  mean loss over %d ranks %.6f%n", step, ranks, mean);
        }
        boolean identical = states.stream().allMatch(s -> Arrays.equals(s, states.get(0)));
        System.out.println(identical ? "replicas identical on all " + ranks + " ranks" : "REPLICAS DIVERGED");
        System.exit(identical ? 0 : 1);
    }
}
