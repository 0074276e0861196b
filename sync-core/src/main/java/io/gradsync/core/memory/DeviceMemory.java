package io.gradsync.core.memory;

/**
 * The memory of a device the host's kernels cannot touch (a GPU's), as a region's base: a region of it
 * ({@link Region#ofDevice}) holds device addresses, and only the kernels of a transport that computes there
 * ({@link MemoryKernels}) may read or write it. Extended by the module that brings the device.
 *
 * <p>A class, not an interface: the data path asks of every region whether its base is a device's, and a class test
 * costs the JIT one compare where an interface test scans the base's interfaces (every array's, on every chunk).
 */
public abstract class DeviceMemory {
    /** For the module that brings the device. */
    protected DeviceMemory() {
    }

    /** The device, for messages and for matching memory to kernels, e.g. {@code cuda:0}. */
    public abstract String name();
}
