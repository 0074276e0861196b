/**
 * Gradient bucketing for training loops (DDP-style buckets, zero-copy views, {@code no_sync}
 * accumulation): see {@link io.gradsync.core.bucket.GradientBuckets}.
 */
package io.gradsync.core.bucket;
