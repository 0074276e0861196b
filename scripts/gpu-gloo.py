#!/usr/bin/env python3
"""torch.distributed's Gloo AllReduce of CUDA tensors, 2 and 4 processes on one GPU (NCCL refuses two ranks on one
device): what gpu-check's AllReduce stage is compared with. float32 SUM in place of Gaussian values, 1 to 256 MiB,
nccl-tests' algbw and busbw; min, median and max of 20 calls after 3 warm-ups, each after a barrier, timed on the
host after the device is synchronised (as the Java stage times a blocking call). Run on the GPU machine:
  python3 scripts/gpu-gloo.py"""
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [1 << 20, 16 << 20, 64 << 20, 256 << 20]
RUNS, WARM_UPS = 20, 3


def rank_main(rank, size, port, results):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
    torch.cuda.set_device(0)
    rows = []
    for nbytes in SIZES:
        generator = torch.Generator(device="cuda").manual_seed(nbytes * 31 + rank)
        t = torch.randn(nbytes // 4, device="cuda", generator=generator)
        times = []
        for i in range(-WARM_UPS, RUNS):
            dist.barrier()
            torch.cuda.synchronize()
            start = time.perf_counter()
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            torch.cuda.synchronize()
            if i >= 0:
                times.append(time.perf_counter() - start)
        times.sort()
        median = statistics.median(times)
        algbw = nbytes / median / 1e9
        rows.append((nbytes, times[0] * 1e6, median * 1e6, times[-1] * 1e6, algbw, algbw * 2 * (size - 1) / size))
    if rank == 0:
        results.put(rows)
    dist.destroy_process_group()


def main():
    print(f"torch {torch.__version__} gloo, CUDA tensors on {torch.cuda.get_device_name(0)}")
    context = mp.get_context("spawn")
    for size in (2, 4):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        results = context.SimpleQueue()
        mp.spawn(rank_main, args=(size, port, results), nprocs=size, join=True)
        print(f"{size} ranks over gloo")
        print(f"{'bytes':>10} {'min us':>10} {'median us':>10} {'max us':>10} {'algbw GB/s':>10} {'busbw GB/s':>10}")
        for row in results.get():
            print("%10d %10.1f %10.1f %10.1f %10.2f %10.2f" % row)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
