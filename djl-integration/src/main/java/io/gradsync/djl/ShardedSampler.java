package io.gradsync.djl;

import ai.djl.training.dataset.RandomAccessDataset;
import ai.djl.training.dataset.Sampler;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Random;

/**
 * A rank's share of every epoch of a {@link RandomAccessDataset}, as PyTorch's {@code DistributedSampler} gives it.
 * Every rank draws the same order for epoch {@code e} (the seed plus {@code e}; the dataset's own order without
 * shuffling), pads it by repeating its start to a multiple of the rank count, and takes every {@code ranks}-th index
 * from its own rank on; it goes through that share in batches of the local batch size. So every rank takes the same
 * number of steps, and step {@code s} of all ranks together covers positions {@code [s B, (s+1) B)} of the epoch's
 * order, B being the global batch: the same samples the one-process run at batch B takes at that step.
 *
 * <p>Each {@link #sample} call is the next epoch: use one sampler per dataset, as DJL iterates it once an epoch.
 */
public final class ShardedSampler implements Sampler {
    private final int rank;
    private final int ranks;
    private final int localBatch;
    private final boolean shuffle;
    private final long seed;
    private final boolean dropLast;
    private int epoch;

    /**
     * The sampler of rank {@code rank} of {@code ranks}, in batches of {@code localBatch}, shuffled every epoch from
     * {@code seed} if {@code shuffle}; {@code dropLast} drops a last batch smaller than {@code localBatch} (it is the
     * same size on every rank either way).
     */
    public ShardedSampler(int rank, int ranks, int localBatch, boolean shuffle, long seed, boolean dropLast) {
        if (ranks < 1 || rank < 0 || rank >= ranks) {
            throw new IllegalArgumentException("rank " + rank + " of " + ranks + " ranks");
        }
        if (localBatch < 1) {
            throw new IllegalArgumentException("local batch size " + localBatch + ": at least 1");
        }
        this.rank = rank;
        this.ranks = ranks;
        this.localBatch = localBatch;
        this.shuffle = shuffle;
        this.seed = seed;
        this.dropLast = dropLast;
    }

    @Override
    public Iterator<List<Long>> sample(RandomAccessDataset dataset) {
        return batches(share(dataset.size(), epoch++));
    }

    @Override
    public int getBatchSize() {
        return localBatch;
    }

    /** The dataset positions of this rank's share of epoch {@code e} of a dataset of {@code size} samples, in order. */
    long[] share(long size, int e) {
        if (size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a dataset of " + size + " samples: at most " + Integer.MAX_VALUE);
        }
        int n = (int) size;
        int[] order = order(n, e);
        int perRank = (n + ranks - 1) / ranks;
        long[] share = new long[n == 0 ? 0 : perRank];
        for (int k = 0; k < share.length; k++) {
            share[k] = order[(rank + k * ranks) % n];
        }
        return share;
    }

    private int[] order(int n, int e) {
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        if (shuffle) {
            Random random = new Random(seed + e);
            for (int i = n - 1; i > 0; i--) {
                int j = random.nextInt(i + 1);
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
        }
        return order;
    }

    private Iterator<List<Long>> batches(long[] share) {
        int count = dropLast ? share.length / localBatch : (share.length + localBatch - 1) / localBatch;
        return new Iterator<>() {
            private int next;

            @Override
            public boolean hasNext() {
                return next < count;
            }

            @Override
            public List<Long> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                int from = next++ * localBatch;
                int to = Math.min(share.length, from + localBatch);
                List<Long> batch = new ArrayList<>(to - from);
                for (int i = from; i < to; i++) {
                    batch.add(share[i]);
                }
                return batch;
            }
        };
    }
}
