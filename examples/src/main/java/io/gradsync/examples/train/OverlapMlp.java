package io.gradsync.examples.train;

import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import io.gradsync.core.ReduceOp;
import io.gradsync.core.bucket.GradientBuckets;
import io.gradsync.core.trace.Timeline;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;

/**
 * Overlap of gradient communication with backward: a deep MLP in plain Java (float arrays) whose
 * backward pass emits each layer's gradients (weights, then bias) into the Flux as soon as they are
 * computed, so that the bucket of layer L is reduced while layer L-1's gradients are computed.
 *
 * <pre>
 * overlap-mlp [--mode bucket|per-gradient|after] [--layers 60] [--width 256] [--batch 32] [--steps 12]
 *             [--warmup 3] [--bucket-mb 2] [--first-bucket-mb 1] [--threads N] [--transport aeron-ipc]
 * </pre>
 * {@code bucket}: buckets, overlapped; {@code per-gradient}: one collective per gradient
 * ({@code comm.allReduce(AVG)}), overlapped; {@code after}: buckets, submitted only after backward ends.
 * Prints per rank: mean step time, backward time, exposed communication (backward end to last gradient
 * reduced), collectives per step; with {@code GRADSYNC_TRACE=DIR}, the fraction of communication hidden
 * behind backward as the timeline shows it.
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
        void backward(java.util.function.Consumer<GradientBuffer> emit) {
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

    /** What one rank measured. */
    record Result(int rank, double stepMs, double backwardMs, double exposedMs, double collectivesPerStep,
                  int gradientsPerStep, boolean identical, double hidden, String trace) {
    }

    Result runRank(Communicator comm) throws Exception {
        Model model = new Model();
        GradientBuckets buckets = GradientBuckets.builder(comm).bucketBytes((long) (bucketMb * (1 << 20)))
                .firstBucketBytes((long) (firstBucketMb * (1 << 20))).build();
        Timeline timeline = buckets.timeline();
        int backwardName = timeline.name("backward");
        Function<Flux<GradientBuffer>, Flux<GradientBuffer>> perGradient = comm.allReduce(ReduceOp.AVG);
        // per-gradient mode: each gradient's collective traced from its emission to its result
        java.util.IdentityHashMap<GradientBuffer, Integer> positionOf = new java.util.IdentityHashMap<>();
        for (int l = 0; l < layers; l++) {
            positionOf.put(model.dwBuf[l], 2 * (layers - 1 - l));
            positionOf.put(model.dbBuf[l], 2 * (layers - 1 - l) + 1);
        }
        long[] emittedAt = new long[2 * layers];
        int perGradientName = timeline.name("allreduce gradient");
        long[] seq = {0};
        double stepSum = 0;
        double backwardSum = 0;
        double exposedSum = 0;
        long collectivesBefore = 0;
        for (int step = 0; step < warmup + steps; step++) {
            if (step == warmup) {
                collectivesBefore = buckets.collectivesSubmitted();
            }
            model.load(comm.rank(), step);
            long t0 = System.nanoTime();
            model.forward();
            Sinks.Many<GradientBuffer> sink = Sinks.many().unicast().onBackpressureBuffer();
            Flux<GradientBuffer> grads = sink.asFlux();
            Flux<GradientBuffer> reduced = switch (mode) {
                case "per-gradient" -> grads.doOnNext(g -> emittedAt[positionOf.get(g)] = timeline.now())
                        .transform(perGradient)
                        .doOnNext(g -> timeline.collective(perGradientName, seq[0]++, emittedAt[positionOf.get(g)],
                                timeline.now(), g.byteSize()));
                case "bucket", "after" -> grads.transform(buckets.reduce());
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            };
            java.util.concurrent.CompletableFuture<Void> done = reduced.then().toFuture();
            long b0 = System.nanoTime();
            long tb0 = timeline.now();
            if (mode.equals("after")) {
                GradientBuffer[] held = new GradientBuffer[2 * layers];
                int[] k = {0};
                model.backward(g -> held[k[0]++] = g);
                long tb1 = timeline.now();
                timeline.span(backwardName, tb0, tb1);
                for (GradientBuffer g : held) {
                    sink.tryEmitNext(g).orThrow();
                }
            } else {
                model.backward(g -> sink.tryEmitNext(g).orThrow());
                timeline.span(backwardName, tb0, timeline.now());
            }
            long b1 = System.nanoTime();
            sink.tryEmitComplete();
            done.get(5, TimeUnit.MINUTES);
            long b2 = System.nanoTime();
            model.sgd();
            long t1 = System.nanoTime();
            if (step >= warmup) {
                stepSum += (t1 - t0) / 1e6;
                backwardSum += (b1 - b0) / 1e6;
                exposedSum += (b2 - b1) / 1e6;
            }
        }
        double collectives = mode.equals("per-gradient") ? 2.0 * layers
                : (buckets.collectivesSubmitted() - collectivesBefore) / (double) steps;
        long[] sum = {model.checksum(), ~model.checksum()};
        comm.allReduceBlocking(GradientBuffer.wrap(sum), ReduceOp.MAX);
        boolean identical = sum[0] == ~sum[1];
        buckets.close();
        double hidden = Double.NaN;
        String trace = "";
        if (timeline.enabled()) {
            TraceStats.Overlap o = TraceStats.overlap(timeline.file(), "backward", warmup);
            hidden = o.hiddenFraction();
            trace = timeline.file().toString();
        }
        return new Result(comm.rank(), stepSum / steps, backwardSum / steps, exposedSum / steps, collectives,
                2 * layers, identical, hidden, trace);
    }

    static void print(Result r, OverlapMlp cfg, int size) {
        System.out.printf(Locale.ROOT, "rank %d/%d mode=%s layers=%d (%d gradient tensors, %.1f MiB) width=%d batch=%d: "
                        + "step %.1f ms, backward %.1f ms, exposed comm %.1f ms, collectives/step %.1f, "
                        + "hidden %s, replicas %s%n",
                r.rank(), size, cfg.mode, cfg.layers, r.gradientsPerStep(),
                cfg.layers * (cfg.width * (cfg.width + 1)) * 4.0 / (1 << 20), cfg.width, cfg.batch, r.stepMs(),
                r.backwardMs(), r.exposedMs(), r.collectivesPerStep(),
                Double.isNaN(r.hidden()) ? "n/a (set GRADSYNC_TRACE=DIR)" : String.format(Locale.ROOT, "%.1f%%", 100 * r.hidden()),
                r.identical() ? "identical" : "DIFFER");
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
            List<Result> results = Ranks.threads(n, cfg::runRank);
            for (Result r : results) {
                print(r, cfg, n);
                ok &= r.identical();
            }
        } else {
            Result r = Ranks.process(cfg.transport, cfg::runRank);
            print(r, cfg, Integer.parseInt(System.getenv().getOrDefault("WORLD_SIZE", "1")));
            ok = r.identical();
        }
        System.exit(ok ? 0 : 1);
    }
}
