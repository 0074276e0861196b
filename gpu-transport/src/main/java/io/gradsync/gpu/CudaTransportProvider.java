package io.gradsync.gpu;

import io.gradsync.core.transport.Endpoint;
import io.gradsync.core.transport.JobContext;
import io.gradsync.core.transport.TransportOptions;
import io.gradsync.core.transport.TransportProvider;
import io.gradsync.core.transport.Transports;
import java.util.List;

/** {@link CudaTransport} by name, {@code cuda}, on the device {@link CudaConfiguration} chooses. */
public final class CudaTransportProvider implements TransportProvider {

    @Override
    public List<String> names() {
        return List.of(CudaTransport.NAME);
    }

    @Override
    public Endpoint open(String name, JobContext job, TransportOptions options) {
        if (!CudaTransport.NAME.equals(name)) {
            throw new IllegalArgumentException("not a CUDA transport: " + name + "; expected one of " + names());
        }
        CudaDevice device;
        try {
            CudaDriver driver = JCudaDriverApi.open();
            device = CudaDevice.open(driver, CudaConfiguration.device(job.localRank(), driver.deviceCount()));
        } catch (RuntimeException e) {
            job.close();
            throw e;
        }
        return CudaTransport.over(Transports.open(CudaConfiguration.over(), job, options), device);
    }

    /** Null where the CUDA driver loads and sees a device; else why not. */
    @Override
    public String unusableReason(String name, JobContext job) {
        try {
            return JCudaDriverApi.open().deviceCount() > 0 ? null : "no CUDA device";
        } catch (CudaUnavailableException e) {
            return e.getMessage();
        }
    }
}
