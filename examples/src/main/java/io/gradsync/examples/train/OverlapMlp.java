package io.gradsync.examples.train;

import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.bucket.GradientBuckets;
import io.gradsync.core.trace.Timeline;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;

/**
 * Overlap of gradient communication with backward: a deep MLP in plain Java (float arrays) whose
 * backward pass emits each layer's gradients (weights, then bias) into the Flux as soon as they are
 * computed, so that the bucket of layer L is reduced while layer L-1's gradients are computed.
 *
 * <pre>
 * overlap-mlp [--mode bucket,per-gradient,after,bucket-notrace] [--layers 60] [--width 256] [--batch 32] [--steps 12]
 *             [--warmup 3] [--bucket-mb 2] [--first-bucket-mb 1] [--threads N] [--transport aeron-ipc]
 * </pre>
 * {@code bucket}: buckets, overlapped; {@code per-gradient}: one collective per gradient
 * ({@code comm.allReduce(AVG)}), overlapped; {@code after}: buckets, submitted only after backward ends;
 * {@code bucket-notrace}: as {@code bucket}, with a bucketer whose timeline is off. Several modes, comma
 * separated, run interleaved step by step (so that a busy machine's noise hits them alike), each with its
 * own statistics.
 * Prints per rank: mean step time, backward time, exposed communication (backward end to last gradient
 * reduced), collectives per step; with {@code GRADSYNC_TRACE=DIR}, the fraction of communication hidden
 * behind backward as the timeline shows it: per step, the union of the collectives' intervals (from this
 * rank's submission, and again from the last rank's arrival, so that waiting for a straggler does not count
 * as communication) and the part of it that overlaps this rank's backward span.
 */
public final class OverlapMlp {
    int layers = 60;
    int width = 256;
    int batch = 32;
    int steps = 12;
    int warmup = 3;
    double bucketMb = 2;
    double firstBucketMb = 1;
    String mode = "bucket";
    int threads = 0;
    String transport = "aeron-ipc";
    float lr = 1e-3f;

    /** One replica's parameters, activations and gradients (all reused every step). */
    final class Model {
        final float[][] w = new float[layers][];
        final float[][] b = new float[layers][];
        final float[][] dw = new float[layers][];
        final float[][] db = new float[layers][];
        final GradientBuffer[] dwBuf = new GradientBuffer[layers];
        final GradientBuffer[] dbBuf = new GradientBuffer[layers];
        final float[][] act = new float[layers + 1][];
        final float[] grad;
        final float[] gradIn;
        final float[] target;

        Model() {
            Random init = new Random(7);
            float scale = (float) Math.sqrt(2.0 / width);
            for (int l = 0; l < layers; l++) {
                w[l] = new float[width * width];
                for (int i = 0; i < w[l].length; i++) {
                    w[l][i] = (float) init.nextGaussian() * scale;
                }
                b[l] = new float[width];
                dw[l] = new float[width * width];
                db[l] = new float[width];
                dwBuf[l] = GradientBuffer.wrap(dw[l]);
                dbBuf[l] = GradientBuffer.wrap(db[l]);
            }
            for (int l = 0; l <= layers; l++) {
                act[l] = new float[batch * width];
            }
            grad = new float[batch * width];
            gradIn = new float[batch * width];
            target = new float[batch * width];
        }

        void load(int rank, int step) {
            Random r = new Random(rank * 7919L + step);
            for (int i = 0; i < act[0].length; i++) {
                act[0][i] = (float) r.nextGaussian();
                target[i] = (float) r.nextGaussian() * 0.1f;
            }
        }

        float forward() {
            for (int l = 0; l < layers; l++) {
                float[] in = act[l];
                float[] out = act[l + 1];
                float[] wl = w[l];
                float[] bl = b[l];
                for (int s = 0; s < batch; s++) {
                    int io = s * width;
                    for (int i = 0; i < width; i++) {
                        float acc = bl[i];
                        int wo = i * width;
                        for (int j = 0; j < width; j++) {
                            acc += wl[wo + j] * in[io + j];
                        }
                        out[io + i] = l == layers - 1 ? acc : Math.max(acc, 0f);
                    }
                }
            }
            float loss = 0;
            float[] y = act[layers];
            for (int i = 0; i < y.length; i++) {
                float e = y[i] - target[i];
                loss += e * e;
                grad[i] = 2 * e / y.length;
            }
            return loss / y.length;
        }

        /** Backward, last layer first; {@code emit} gets each layer's weight then bias gradient. */
        void backward(Consumer<GradientBuffer> emit) {
            float[] g = grad;
            float[] gIn = gradIn;
            for (int l = layers - 1; l >= 0; l--) {
                float[] in = act[l];
                float[] wl = w[l];
                float[] dwl = dw[l];
                float[] dbl = db[l];
                Arrays.fill(dwl, 0f);
                Arrays.fill(dbl, 0f);
                for (int s = 0; s < batch; s++) {
                    int io = s * width;
                    for (int i = 0; i < width; i++) {
                        float gi = g[io + i];
                        if (gi == 0f) {
                            continue;
                        }
                        dbl[i] += gi;
                        int wo = i * width;
                        for (int j = 0; j < width; j++) {
                            dwl[wo + j] += gi * in[io + j];
                        }
                    }
                }
                emit.accept(dwBuf[l]);
                emit.accept(dbBuf[l]);
                if (l > 0) {
                    Arrays.fill(gIn, 0f);
                    for (int s = 0; s < batch; s++) {
                        int io = s * width;
                        for (int i = 0; i < width; i++) {
                            float gi = g[io + i];
                            if (gi == 0f) {
                                continue;
                            }
                            int wo = i * width;
                            for (int j = 0; j < width; j++) {
                                gIn[io + j] += gi * wl[wo + j];
                            }
                        }
                    }
                    for (int k = 0; k < gIn.length; k++) {
                        if (in[k] <= 0f) {
                            gIn[k] = 0f; // relu of layer l-1's output
                        }
                    }
                    float[] t = g;
                    g = gIn;
                    gIn = t;
                }
            }
        }

        void sgd() {
            for (int l = 0; l < layers; l++) {
                float[] wl = w[l];
                float[] dwl = dw[l];
                for (int i = 0; i < wl.length; i++) {
                    wl[i] -= lr * dwl[i];
                }
                for (int i = 0; i < width; i++) {
                    b[l][i] -= lr * db[l][i];
                }
            }
        }

        long checksum() {
            long h = 0;
            for (int l = 0; l < layers; l++) {
                for (float v : w[l]) {
                    h = h * 31 + Float.floatToRawIntBits(v);
                }
                for (float v : b[l]) {
                    h = h * 31 + Float.floatToRawIntBits(v);
                }
            }
            return h;
        }
    }

    /** What one rank measured in one mode. */
    record Result(int rank, String mode, int steps, double stepMs, double backwardMs, double exposedMs,
                  double collectivesPerStep, int gradientsPerStep, boolean identical, double hidden,
                  double hiddenAllArrived) {
    }

    /** Per-mode sums. */
    static final class Stats {
        int steps;
        double step;
        double backward;
        double exposed;
        long collectives;
    }

    List<Result> runRank(Communicator comm) throws Exception {
        String[] modes = mode.split(",");
        RankRun run = new RankRun(comm, modes);
        // modes interleaved step by step, so that a busy machine's noise hits them alike
        int total = (warmup + steps) * modes.length;
        for (int step = 0; step < total; step++) {
            run.step(step);
        }
        return run.finish();
    }

    /** One rank's run in every mode: its replica, bucketers and per-gradient operator, trace names and sums. */
    private final class RankRun {
        private final Communicator comm;
        private final String[] modes;
        private final Model model;
        private final Timeline timeline;
        private final GradientBuckets traced;
        private final GradientBuckets untraced;
        private final Function<Flux<GradientBuffer>, Flux<GradientBuffer>> perGradient;
        /** Per-gradient mode: each gradient's collective traced from its emission (by its place in backward) to its result. */
        private final Map<GradientBuffer, Integer> positionOf = new IdentityHashMap<>();
        private final long[] emittedAt = new long[2 * layers];
        private final int perGradientName;
        private final int[] backwardNames;
        private final Stats[] stats;

        RankRun(Communicator comm, String[] modes) {
            this.comm = comm;
            this.modes = modes;
            model = new Model();
            timeline = Timeline.fromEnvironment(comm);
            GradientBuckets.Builder builder = GradientBuckets.builder(comm).bucketBytes((long) (bucketMb * (1 << 20)))
                    .firstBucketBytes((long) (firstBucketMb * (1 << 20)));
            traced = builder.timeline(timeline).build();
            untraced = builder.timeline(Timeline.OFF).build();
            perGradient = comm.allReduce(ReduceOp.AVG);
            for (int l = 0; l < layers; l++) {
                positionOf.put(model.dwBuf[l], 2 * (layers - 1 - l));
                positionOf.put(model.dbBuf[l], 2 * (layers - 1 - l) + 1);
            }
            perGradientName = timeline.name("allreduce gradient");
            backwardNames = new int[modes.length];
            stats = new Stats[modes.length];
            for (int m = 0; m < modes.length; m++) {
                backwardNames[m] = timeline.name("backward " + modes[m]);
                stats[m] = new Stats();
            }
        }

        /** One training step in the step's mode; after the warm-up steps its times count in the mode's sums. */
        void step(int step) throws Exception {
            int m = step % modes.length;
            String current = modes[m];
            GradientBuckets buckets = current.equals("bucket-notrace") ? untraced : traced;
            long collectivesBefore = buckets.collectivesSubmitted();
            model.load(comm.rank(), step);
            long t0 = System.nanoTime();
            model.forward();
            Sinks.Many<GradientBuffer> sink = Sinks.many().unicast().onBackpressureBuffer();
            CompletableFuture<Void> done = reduced(sink.asFlux(), current, buckets).then().toFuture();
            long b0 = System.nanoTime();
            backward(sink, current.equals("after"), backwardNames[m]);
            long b1 = System.nanoTime();
            sink.tryEmitComplete();
            done.get(5, TimeUnit.MINUTES);
            long b2 = System.nanoTime();
            model.sgd();
            long t1 = System.nanoTime();
            if (step >= warmup * modes.length) {
                Stats st = stats[m];
                st.steps++;
                st.step += (t1 - t0) / 1e6;
                st.backward += (b1 - b0) / 1e6;
                st.exposed += (b2 - b1) / 1e6;
                st.collectives += current.equals("per-gradient") ? 2L * layers
                        : buckets.collectivesSubmitted() - collectivesBefore;
            }
        }

        /** The gradients reduced as {@code current} says: one collective each (traced), or by buckets. */
        private Flux<GradientBuffer> reduced(Flux<GradientBuffer> grads, String current, GradientBuckets buckets) {
            return switch (current) {
                case "per-gradient" -> grads.doOnNext(g -> emittedAt[positionOf.get(g)] = timeline.now())
                        .transform(perGradient)
                        .doOnNext(g -> timeline.collective(perGradientName, timeline.nextSeq(), emittedAt[positionOf.get(g)],
                                timeline.now(), g.byteSize()));
                case "bucket", "after", "bucket-notrace" -> grads.transform(buckets.reduce());
                default -> throw new IllegalArgumentException("unknown mode " + current);
            };
        }

        /** Backward, its span traced; {@code after} holds the gradients back until it ends, else each goes as it is computed. */
        private void backward(Sinks.Many<GradientBuffer> sink, boolean after, int spanName) {
            long tb0 = timeline.now();
            if (after) {
                GradientBuffer[] held = new GradientBuffer[2 * layers];
                int[] k = {0};
                model.backward(g -> held[k[0]++] = g);
                timeline.span(spanName, tb0, timeline.now());
                for (GradientBuffer g : held) {
                    sink.tryEmitNext(g).orThrow();
                }
            } else {
                model.backward(g -> sink.tryEmitNext(g).orThrow());
                timeline.span(spanName, tb0, timeline.now());
            }
        }

        /** Compares the replicas, closes the trace and returns each mode's result, with the hidden share where traced. */
        List<Result> finish() throws Exception {
            long[] sum = {model.checksum(), ~model.checksum()};
            comm.allReduceBlocking(GradientBuffer.wrap(sum), ReduceOp.MAX);
            boolean identical = sum[0] == ~sum[1];
            timeline.close();
            Map<Long, Double> lastArrivals = null;
            if (timeline.enabled()) {
                comm.barrierBlocking(); // every rank's file is written
                lastArrivals = TraceStats.lastArrivals(timeline.file().getParent());
            }
            List<Result> results = new ArrayList<>();
            for (int m = 0; m < modes.length; m++) {
                double hidden = Double.NaN;
                double hiddenAll = Double.NaN;
                if (timeline.enabled() && !modes[m].equals("bucket-notrace")) {
                    hidden = TraceStats.overlap(timeline.file(), "backward", "backward " + modes[m], warmup).hiddenFraction();
                    hiddenAll = TraceStats.overlap(timeline.file(), "backward", "backward " + modes[m], warmup, lastArrivals)
                            .hiddenFraction();
                }
                Stats st = stats[m];
                results.add(new Result(comm.rank(), modes[m], st.steps, st.step / st.steps, st.backward / st.steps,
                        st.exposed / st.steps, st.collectives / (double) st.steps, 2 * layers, identical, hidden, hiddenAll));
            }
            return results;
        }
    }

    void print(List<Result> results, int size) {
        for (Result r : results) {
            System.out.printf(Locale.ROOT, "rank %d/%d mode=%s layers=%d (%d gradient tensors, %.1f MiB) width=%d batch=%d, "
                            + "%d steps: step %.1f ms, backward %.1f ms, exposed comm %.1f ms, collectives/step %.1f, "
                            + "hidden %s (from the last rank's arrival: %s), replicas %s%n",
                    r.rank(), size, r.mode(), layers, r.gradientsPerStep(),
                    layers * (width * (width + 1)) * 4.0 / (1 << 20), width, batch, r.steps(), r.stepMs(),
                    r.backwardMs(), r.exposedMs(), r.collectivesPerStep(),
                    Double.isNaN(r.hidden()) ? "n/a" : String.format(Locale.ROOT, "%.1f%%", 100 * r.hidden()),
                    Double.isNaN(r.hiddenAllArrived()) ? "n/a" : String.format(Locale.ROOT, "%.1f%%", 100 * r.hiddenAllArrived()),
                    r.identical() ? "identical" : "DIFFER");
        }
    }

    public static void main(String[] args) throws Exception {
        OverlapMlp cfg = new OverlapMlp();
        for (int i = 0; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--mode" -> cfg.mode = v;
                case "--layers" -> cfg.layers = Integer.parseInt(v);
                case "--width" -> cfg.width = Integer.parseInt(v);
                case "--batch" -> cfg.batch = Integer.parseInt(v);
                case "--steps" -> cfg.steps = Integer.parseInt(v);
                case "--warmup" -> cfg.warmup = Integer.parseInt(v);
                case "--bucket-mb" -> cfg.bucketMb = Double.parseDouble(v);
                case "--first-bucket-mb" -> cfg.firstBucketMb = Double.parseDouble(v);
                case "--threads" -> cfg.threads = Integer.parseInt(v);
                case "--transport" -> cfg.transport = v;
                default -> {
                    System.err.println("unknown option " + args[i] + " (see the class comment)");
                    System.exit(2);
                }
            }
            i++;
        }
        boolean ok = true;
        if (cfg.threads > 0 || !Ranks.launched()) {
            int n = Math.max(1, cfg.threads);
            for (List<Result> results : Ranks.threads(n, cfg::runRank)) {
                cfg.print(results, n);
                ok &= results.get(0).identical();
            }
        } else {
            List<Result> results = Ranks.process(cfg.transport, cfg::runRank);
            cfg.print(results, Integer.parseInt(System.getenv().getOrDefault("WORLD_SIZE", "1")));
            ok = results.get(0).identical();
        }
        System.exit(ok ? 0 : 1);
    }
}
