package io.gradsync.rdma;

import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaEventChannel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * Whether an address belongs to an RDMA device this process can use: RDMA CM binds an identifier to it, as
 * the control plane and the listeners will, and the binding picks the device. The list of devices under
 * {@code /sys/class/infiniband} cannot tell: in the RDMA subsystem's default (shared) mode every network
 * namespace sees every device, and a host's RDMA devices may sit on other interfaces than the one a rank uses.
 */
final class AddressProbe {
    private AddressProbe() {
    }

    /**
     * Null when RDMA CM binds {@code address} to a device; else why not.
     *
     * @param address the address the rank would listen on and advertise ({@link RdmaConfiguration})
     */
    static String reasonAgainst(InetAddress address) {
        try {
            NativeLibrary.load();
        } catch (RdmaUnavailableException e) {
            return e.getMessage();
        }
        RdmaEventChannel channel = null;
        RdmaCmId id = null;
        try {
            channel = RdmaEventChannel.createEventChannel();
            id = channel.createId(RdmaCm.RDMA_PS_TCP);
            id.bindAddr(new InetSocketAddress(address, 0));
            return id.getVerbs() != null ? null : "RDMA CM bound " + address.getHostAddress() + " to no device";
        } catch (IOException e) {
            return "this rank's address " + address.getHostAddress() + ": " + e.getMessage() + "; "
                    + RdmaConfiguration.ADDRESS_PROP + " or " + RdmaConfiguration.INTERFACE_PROP + " choose another";
        } finally {
            destroy(id, channel);
        }
    }

    private static void destroy(RdmaCmId id, RdmaEventChannel channel) {
        try {
            if (id != null) {
                id.destroyId();
            }
        } catch (IOException e) {
            // the probe's own identifier: nothing depends on it
        }
        try {
            if (channel != null) {
                channel.destroyEventChannel();
            }
        } catch (IOException e) {
            // as above
        }
    }
}
