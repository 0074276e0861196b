package io.gradsync.core.memory;

/**
 * The memory of a device the host's kernels cannot touch (a GPU's), as a region's base: a region of it
 * ({@link Region#ofDevice}) holds device addresses, and only the kernels of a transport that computes there
 * ({@link MemoryKernels}) may read or write it. Implemented by the module that brings the device.
 */
public interface DeviceMemory {
    /** The device, for messages and for matching memory to kernels, e.g. {@code cuda:0}. */
    String name();
}
