package io.gradsync.gpu;

import java.util.ArrayDeque;
import java.util.Arrays;
import jcuda.driver.CUresult;

/**
 * Objects behind {@link CudaDriver}'s {@code long} handles. A handle is a slot's index (plus one, so that 0 is
 * never valid) and, in its upper half, the slot's generation: a handle of a removed object stays invalid after
 * its slot is reused. Lookups take no lock and allocate nothing.
 *
 * @param <T> what the handles stand for
 */
final class HandleTable<T> {
    private static final class Entry<T> {
        final T value;
        final int generation;

        Entry(T value, int generation) {
            this.value = value;
            this.generation = generation;
        }
    }

    private final String kind;
    private volatile Entry<T>[] entries;
    private int[] generations;
    private final ArrayDeque<Integer> free = new ArrayDeque<>();
    private int used;

    @SuppressWarnings("unchecked")
    HandleTable(String kind) {
        this.kind = kind;
        this.entries = new Entry[16];
        this.generations = new int[16];
    }

    synchronized long add(T value) {
        int index;
        if (!free.isEmpty()) {
            index = free.pop();
        } else {
            if (used == entries.length) {
                entries = Arrays.copyOf(entries, used * 2);
                generations = Arrays.copyOf(generations, used * 2);
            }
            index = used++;
        }
        int generation = ++generations[index];
        Entry<T>[] current = entries.clone();
        current[index] = new Entry<>(value, generation);
        entries = current;
        return (long) generation << 32 | (index + 1);
    }

    /** The object behind the handle; {@code call} is the driver call to blame when the handle is not valid. */
    T get(long handle, String call) {
        Entry<T> entry = entry(handle);
        if (entry == null) {
            throw invalid(handle, call);
        }
        return entry.value;
    }

    /** Removes the handle's object and returns it. */
    synchronized T remove(long handle, String call) {
        Entry<T> entry = entry(handle);
        if (entry == null) {
            throw invalid(handle, call);
        }
        int index = (int) handle - 1;
        Entry<T>[] current = entries.clone();
        current[index] = null;
        entries = current;
        free.push(index);
        return entry.value;
    }

    private Entry<T> entry(long handle) {
        int index = (int) handle - 1;
        Entry<T>[] current = entries;
        if (index < 0 || index >= current.length) {
            return null;
        }
        Entry<T> entry = current[index];
        return entry != null && entry.generation == (int) (handle >>> 32) ? entry : null;
    }

    private CudaException invalid(long handle, String call) {
        return new CudaException(call, CUresult.CUDA_ERROR_INVALID_HANDLE,
                "0x" + Long.toHexString(handle) + " is not a live " + kind);
    }
}
