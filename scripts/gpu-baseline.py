#!/usr/bin/env python3
"""PyTorch's own rates for what gpu-check's benchmark stage times, on the same card in the same call:
a device-to-device copy and an elementwise sum (torch.add into a third buffer) of float32, bfloat16 and float16,
at 1, 16 and 256 MiB a buffer, counting bytes read and written, rotating over 1 GiB of buffers so that no size runs
from L2; the median of 20 passes timed with CUDA events after 3 warm-ups. Random inputs (never zeros).
Run on the GPU machine:  python3 scripts/gpu-baseline.py"""
import torch

MIB = 1 << 20
ROTATION = 1024 * MIB
dev = torch.device("cuda")
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
print(f"{'type':9} {'size':>8} {'copy GB/s':>10} {'sum GB/s':>10} {'sum/copy':>9}")
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    element = torch.tensor([], dtype=dtype).element_size()
    for size in (MIB, 16 * MIB, 256 * MIB):
        sets = max(1, ROTATION // size)
        n = size // element
        a = [torch.randn(n, device=dev).to(dtype) for _ in range(sets)]
        b = [torch.randn(n, device=dev).to(dtype) for _ in range(sets)]
        out = [torch.empty(n, device=dev, dtype=dtype) for _ in range(sets)]

        def rate(buffers, op):
            times = []
            for run in range(23):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for s in range(sets):
                    op(s)
                end.record()
                end.synchronize()
                if run >= 3:
                    times.append(start.elapsed_time(end) / 1e3 / sets)
            times.sort()
            return buffers * size / times[len(times) // 2] / 1e9

        copy = rate(2, lambda s: out[s].copy_(a[s]))
        total = rate(3, lambda s: torch.add(a[s], b[s], out=out[s]))
        expected = (a[0].float() + b[0].float()).to(dtype)
        assert torch.equal(out[0], expected), f"{dtype} sum differs from the float32 sum rounded once"
        print(f"{str(dtype).removeprefix('torch.'):9} {size // MIB:>5} MiB {copy:10.1f} {total:10.1f} {total / copy:9.3f}")
        del a, b, out
        torch.cuda.empty_cache()
