package io.gradsync.rdma;

import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import io.gradsync.core.memory.Region;
import java.io.IOException;
import java.lang.ref.WeakReference;
import java.util.ArrayList;

/**
 * A rank's cache of memory registrations of callers' buffers, so that messages are sent from where they
 * lie instead of through a staging copy ({@link VerbsLink#tryClaimInPlace}). A buffer is registered whole,
 * the first time a message is sent from it, and found again by the object that keeps its memory alive
 * ({@link Region#owner()}): while that object is reachable the address is the same allocation, so a
 * registration can never outlive its memory and be used for another buffer at the same address (the
 * classic registration-cache hazard, which C libraries meet with memory hooks). A registration whose
 * buffer was collected, or the least recently used one when the cache is full, is deregistered once no
 * send from it is in flight. Used by the progress thread only.
 */
final class Registrations {
    private static final System.Logger LOG = System.getLogger(Registrations.class.getName());

    /** One registered buffer. */
    static final class Registration {
        final WeakReference<Object> owner;
        final long address;
        final long length;
        final IbvMr mr;
        final int lkey;
        /** Sends from it posted and not yet completed. */
        int inFlight;
        long lastUse;

        Registration(Object owner, long address, long length, IbvMr mr) {
            this.owner = new WeakReference<>(owner);
            this.address = address;
            this.length = length;
            this.mr = mr;
            this.lkey = mr.getLkey();
        }

        boolean covers(Object owner, long address, long length) {
            return this.owner.get() == owner && address >= this.address && address + length <= this.address + this.length;
        }
    }

    private final int rank;
    private final IbvPd pd;
    private final long capacityBytes;
    private final ArrayList<Registration> entries = new ArrayList<>();
    private long registeredBytes;
    private long clock;
    /** Set when the device refused a registration (e.g. the locked-memory limit): from then on, copy. */
    private boolean refused;

    Registrations(int rank, IbvPd pd, long capacityBytes) {
        this.rank = rank;
        this.pd = pd;
        this.capacityBytes = capacityBytes;
    }

    /**
     * The registration covering {@code buffer}, registering it if needed; null when it cannot be sent from
     * in place (on the heap, larger than the cache or than one registration, or the device refuses).
     */
    Registration find(Region buffer) {
        long length = buffer.byteLength();
        if (refused || length == 0 || length > capacityBytes || length > Integer.MAX_VALUE || !buffer.isOffHeap()) {
            return null;
        }
        long address = buffer.address();
        Object owner = buffer.owner();
        for (int i = 0; i < entries.size(); i++) {
            Registration r = entries.get(i);
            if (r.covers(owner, address, length)) {
                r.lastUse = ++clock;
                return r;
            }
        }
        return register(owner, address, length);
    }

    private Registration register(Object owner, long address, long length) {
        dropUnused();
        while (registeredBytes + length > capacityBytes) {
            Registration oldest = leastRecentlyUsedIdle();
            if (oldest == null) {
                return null; // the cache is full of buffers with sends in flight: copy this time
            }
            deregister(oldest);
        }
        IbvMr mr;
        try {
            mr = pd.regMr(address, (int) length, IbvMr.IBV_ACCESS_LOCAL_WRITE).execute().free().getMr();
        } catch (IOException | RuntimeException e) {
            refused = true;
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": registering a " + length + "-byte buffer failed ("
                    + e.getMessage() + "); sending through staging copies from now on");
            return null;
        }
        if (mr == null) {
            refused = true;
            return null;
        }
        Registration r = new Registration(owner, address, length, mr);
        if (clock == 0) {
            LOG.log(System.Logger.Level.INFO, "rank " + rank + ": sending in place from registered buffers (the first: "
                    + length + " bytes)");
        }
        r.lastUse = ++clock;
        entries.add(r);
        registeredBytes += length;
        return r;
    }

    /** Deregisters the buffers that were collected and have no send in flight. */
    private void dropUnused() {
        for (int i = entries.size() - 1; i >= 0; i--) {
            Registration r = entries.get(i);
            if (r.owner.get() == null && r.inFlight == 0) {
                deregister(r);
            }
        }
    }

    private Registration leastRecentlyUsedIdle() {
        Registration oldest = null;
        for (int i = 0; i < entries.size(); i++) {
            Registration r = entries.get(i);
            if (r.inFlight == 0 && (oldest == null || r.lastUse < oldest.lastUse)) {
                oldest = r;
            }
        }
        return oldest;
    }

    private void deregister(Registration r) {
        entries.remove(r);
        registeredBytes -= r.length;
        try {
            r.mr.deregMr().execute().free();
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": deregistering a buffer failed: " + e);
        }
    }

    /** Deregisters everything; the queue pairs must be gone. */
    void close() {
        for (int i = entries.size() - 1; i >= 0; i--) {
            deregister(entries.get(i));
        }
    }
}
