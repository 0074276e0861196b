package io.gradsync.examples.train;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import java.util.List;

/**
 * ResNet-20 (He et al., 2016, the CIFAR variant) for one-channel images: a 3×3 convolution of 16 filters, three stages
 * of three basic residual blocks (16, 32, 64 filters; the second and third stage halve the image), global average
 * pooling and a linear classifier. Batch normalisation after every convolution; a 1×1 convolution on the shortcut where
 * a block changes the shape. 65 trainable parameter tensors (about 272,000 parameters) and 38 running statistics.
 */
final class ResNet20 {
    private static final int[] FILTERS = {16, 32, 64};
    private static final int BLOCKS_PER_STAGE = 3;

    private ResNet20() {
    }

    static Block of(int classes) {
        SequentialBlock net = new SequentialBlock().add(conv(FILTERS[0], 1)).add(BatchNorm.builder().build())
                .add(Activation::relu);
        int channels = FILTERS[0];
        for (int stage = 0; stage < FILTERS.length; stage++) {
            for (int b = 0; b < BLOCKS_PER_STAGE; b++) {
                int stride = stage > 0 && b == 0 ? 2 : 1;
                net.add(basicBlock(FILTERS[stage], stride, channels != FILTERS[stage]));
                channels = FILTERS[stage];
            }
        }
        return net.add(Pool.globalAvgPool2dBlock()).add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(classes).build());
    }

    /** conv-bn-relu-conv-bn plus the shortcut, then relu. */
    private static Block basicBlock(int filters, int stride, boolean projectShortcut) {
        SequentialBlock main = new SequentialBlock()
                .add(conv(filters, stride)).add(BatchNorm.builder().build()).add(Activation::relu)
                .add(conv(filters, 1)).add(BatchNorm.builder().build());
        Block shortcut = projectShortcut
                ? new SequentialBlock().add(Conv2d.builder().setKernelShape(new Shape(1, 1)).optStride(new Shape(stride, stride))
                        .setFilters(filters).optBias(false).build()).add(BatchNorm.builder().build())
                : Blocks.identityBlock();
        ParallelBlock sum = new ParallelBlock(
                outputs -> new NDList(outputs.get(0).singletonOrThrow().add(outputs.get(1).singletonOrThrow())),
                List.of(main, shortcut));
        return new SequentialBlock().add(sum).add(Activation::relu);
    }

    private static Conv2d conv(int filters, int stride) {
        return Conv2d.builder().setKernelShape(new Shape(3, 3)).optStride(new Shape(stride, stride))
                .optPadding(new Shape(1, 1)).setFilters(filters).optBias(false).build();
    }
}
