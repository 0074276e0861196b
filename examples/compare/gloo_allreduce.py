#!/usr/bin/python3
"""float32 SUM AllReduce with torch.distributed's Gloo backend, measured the way allreduce-perf (and nccl-tests
with -c 0) measures: per size, w untimed iterations, a barrier, n back-to-back iterations timed as one block;
a rank's time is block / n and the reported time is the slowest rank's. After the timing, one AllReduce of
rank-dependent integer-valued floats (so the sum is exact) is checked element by element: #wrong.

Run it with the Debian interpreter that has python3-torch (examples/compare/setup-baselines.sh):
    /usr/bin/python3 examples/compare/gloo_allreduce.py --ranks 2 -b 4K -e 64M -f 4 -n 20 -w 5 --csv gloo.csv

It starts its own N worker processes (this script again, with --worker), rendezvous env:// on 127.0.0.1 and a
free port, Gloo pinned to the loopback interface (GLOO_SOCKET_IFNAME=lo). Between simulated hosts (network
namespaces, scripts/netns-hosts) each worker starts under a prefix instead:
    --worker-prefix "ip netns exec gsc{rank}" --master-addr 10.231.0.1 --iface eth0 torch.distributed.all_reduce is
in-place, so the timed data is the same buffer reduced again and again (filled with zeros, so it never grows);
the CSV says placement=in-place.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

CSV_HEADER = "impl,ranks,placement,size_bytes,count,type,redop,time_us,algbw_gbs,busbw_gbs,wrong"
FLOAT_BYTES = 4


def parse_size(text):
    """nccl-tests sizes: 4, 8K, 64M, 1G (powers of 1024); a trailing B is allowed."""
    v = text.strip().upper()
    if v.endswith("B"):
        v = v[:-1]
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1:], 1)
    if scale != 1:
        v = v[:-1]
    try:
        n = int(v) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: '{text}' (examples: 4, 8K, 64M, 1G)")
    if n < 0:
        raise argparse.ArgumentTypeError(f"negative size: '{text}'")
    return n


def sizes(min_bytes, max_bytes, factor):
    """min, min*f, ... up to max, each rounded down to whole floats (0 is followed by 4, as in allreduce-perf)."""
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s // FLOAT_BYTES * FLOAT_BYTES)
        s = FLOAT_BYTES if s == 0 else s * factor
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description="float32 sum AllReduce over torch.distributed / Gloo, nccl-tests style.")
    p.add_argument("--ranks", "-N", type=int, default=2, help="number of processes (default 2)")
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("32M"), help="smallest size (default 32M)")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("32M"), help="largest size (default 32M)")
    p.add_argument("-f", "--stepfactor", type=int, default=2, help="size multiplier (default 2)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="untimed iterations per size (default 5)")
    p.add_argument("--csv", help="write the rows to this CSV file (rank 0)")
    p.add_argument("--timeout", type=int, default=600, help="seconds for rendezvous and each collective (default 600)")
    p.add_argument("--iface", default="lo", help="GLOO_SOCKET_IFNAME for the workers (default lo)")
    p.add_argument("--master-addr", default="127.0.0.1", help="MASTER_ADDR: rank 0's address (default 127.0.0.1)")
    p.add_argument("--worker-prefix", default="",
                   help="command prefix for each worker, {rank} replaced by its rank (e.g. 'ip netns exec gsc{rank}')")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads per worker (default 1: N processes already share the cores)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.ranks < 1 or a.iters < 1 or a.warmup_iters < 0 or a.stepfactor < 2 or a.maxbytes < a.minbytes:
        p.error("need --ranks >= 1, -n >= 1, -w >= 0, -f >= 2, -b <= -e")
    return a


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a, argv):
    """Parent: start the N workers, wait for all, stop the rest as soon as one fails."""
    port = free_port()
    procs = []
    for r in range(a.ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(a.ranks), LOCAL_RANK=str(r),
                   MASTER_ADDR=a.master_addr, MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=a.iface,
                   OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
        prefix = a.worker_prefix.replace("{rank}", str(r)).split()
        procs.append(subprocess.Popen([*prefix, sys.executable, os.path.abspath(__file__), "--worker", *argv], env=env))
    rc = 0
    try:
        live = list(procs)
        while live:
            for p in list(live):
                code = p.poll()
                if code is None:
                    continue
                live.remove(p)
                if code != 0 and rc == 0:
                    rc = code if code > 0 else 1
                    print(f"gloo_allreduce: a worker exited with {code}; stopping the others", file=sys.stderr)
                    for q in live:
                        q.send_signal(signal.SIGTERM)
            time.sleep(0.05)
    except KeyboardInterrupt:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        rc = 130
    return rc


def pattern(torch, count, rank):
    """Rank-dependent integers in [-125, 125] as float32: sums over any practical rank count are exact."""
    idx = torch.arange(count, dtype=torch.int32)
    return ((idx + 17 * rank) % 251 - 125).to(torch.float32)


def worker(a):
    import datetime
    import torch
    import torch.distributed as dist

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=a.timeout))
    rank, n = dist.get_rank(), dist.get_world_size()
    size_list = sizes(a.minbytes, a.maxbytes, a.stepfactor)
    buf = torch.zeros(max(size_list) // FLOAT_BYTES, dtype=torch.float32)
    factor = 0.0 if n == 1 else 2.0 * (n - 1) / n
    rows = []
    if rank == 0:
        print(f"# gloo_allreduce: torch {torch.__version__} gloo, ranks {n}, iface {a.iface}, "
              f"threads/rank {a.threads}, in-place")
        print(f"# python {sys.version.split()[0]}, {os.cpu_count()} cores; iters {a.iters}, "
              f"warmup {a.warmup_iters}, check once per size after timing\n#")
        print("#       size         count      type   redop     time   algbw   busbw #wrong")
        print("#        (B)    (elements)                       (us)  (GB/s)  (GB/s)       ")
        sys.stdout.flush()
    for size in size_list:
        count = size // FLOAT_BYTES
        t = buf[:count]
        t.zero_()
        for _ in range(a.warmup_iters):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        per_iter = torch.tensor([(time.perf_counter() - t0) / a.iters], dtype=torch.float64)
        dist.all_reduce(per_iter, op=dist.ReduceOp.MAX)
        sec = per_iter.item()

        # Correctness, outside the timing: one reduction of known values, compared with the exact sum.
        t.copy_(pattern(torch, count, rank))
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        expected = torch.zeros(count, dtype=torch.float32)
        for r in range(n):
            expected += pattern(torch, count, r)
        wrong = torch.tensor([int((t != expected).sum().item())], dtype=torch.int64)
        dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
        wrong = int(wrong.item())

        algbw = size / sec / 1e9 if sec > 0 else 0.0
        row = (size, count, sec * 1e6, algbw, algbw * factor, wrong)
        rows.append(row)
        if rank == 0:
            print("%12d  %12d  %8s  %6s  %8.1f  %6.2f  %6.2f  %5d" % (size, count, "float", "sum", *row[2:]))
            sys.stdout.flush()
    total_wrong = sum(r[5] for r in rows)
    if rank == 0:
        print(f"# Out of bounds values : {total_wrong} {'OK' if total_wrong == 0 else 'FAILED'}")
        print(f"# Avg bus bandwidth    : {sum(r[4] for r in rows) / len(rows):.4f} \n#")
        if a.csv:
            with open(a.csv, "w") as f:
                f.write(CSV_HEADER + "\n")
                for size, count, us, alg, bus, wrong in rows:
                    f.write(f"gloo,{n},in-place,{size},{count},float,sum,{us:.3f},{alg:.4f},{bus:.4f},{wrong}\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if total_wrong == 0 else 1


def main():
    argv = sys.argv[1:]
    a = parse_args(argv)
    if a.worker:
        return worker(a)
    try:
        import torch.distributed as dist  # noqa: F401  fail early, in the parent, with a useful message
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed with Gloo is not available in this torch build")
    except ImportError as e:
        print(f"gloo_allreduce: {e}; run it with /usr/bin/python3 after examples/compare/setup-baselines.sh",
              file=sys.stderr)
        return 2
    return launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
