#!/usr/bin/env python3
"""Samples per frame (inclusive) in async-profiler collapsed stacks, one column per file: where two kinds of
run of the same job differ. Usage: profile-table.py FILE.collapsed..."""
import collections
import sys

FRAMES = ["sun/nio/ch/DatagramChannelImpl.write", "sun/nio/ch/DatagramChannelImpl.receive",
          "__ip_append_data_[k]", "_copy_from_iter_[k]", "udp_send_skb_[k]", "__dev_queue_xmit_[k]",
          "handle_softirqs_[k]", "__x64_sys_recvfrom_[k]", "_copy_to_iter_[k]"]


def inclusive(path):
    counts, total = collections.Counter(), 0
    for line in open(path):
        stack, n = line.rsplit(" ", 1)
        total += int(n)
        for frame in set(stack.split(";")):
            counts[frame] += int(n)
    return counts, total


columns = [(p, *inclusive(p)) for p in sys.argv[1:]]
print("| frame | " + " | ".join(p.rsplit("/", 1)[-1] for p, _, _ in columns) + " |")
print("|---|" + "---:|" * len(columns))
print("| all samples | " + " | ".join(str(t) for _, _, t in columns) + " |")
for frame in FRAMES:
    print(f"| `{frame}` | " + " | ".join(str(c[frame]) for _, c, _ in columns) + " |")
