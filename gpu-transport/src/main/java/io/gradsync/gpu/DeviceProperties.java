package io.gradsync.gpu;

/**
 * What gradsync needs to know of a device.
 *
 * @param ordinal the device's index in this process
 * @param name the device's name ({@code NVIDIA H100 80GB HBM3})
 * @param computeMajor the compute capability's major version (9 for sm_90)
 * @param computeMinor the compute capability's minor version
 * @param multiprocessors its streaming multiprocessors (SMs)
 * @param maxThreadsPerMultiprocessor the most threads one SM holds at once
 * @param totalMemory its memory in bytes
 */
public record DeviceProperties(int ordinal, String name, int computeMajor, int computeMinor, int multiprocessors,
                               int maxThreadsPerMultiprocessor, long totalMemory) {

    /** The compute capability as {@code sm_90}. */
    public String architecture() {
        return "sm_" + computeMajor + computeMinor;
    }

    @Override
    public String toString() {
        return "device " + ordinal + ": " + name + ", " + architecture() + ", " + multiprocessors + " SMs, "
                + (totalMemory >> 20) + " MiB";
    }
}
