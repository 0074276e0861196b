#!/usr/bin/env python3
"""Medians (min - max) over the rounds of bench.sh's outputs, before against after: allreduce-perf's out-of-place
and in-place bus bandwidth per size (local, shm), flux-perf's median step time per mode. Usage: summarise.py OUTDIR"""
import glob, os, re, statistics, sys

out = sys.argv[1]

def spread(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f} - {max(values):.2f})"

def perf(path):
    rows = {}
    for line in open(path):
        f = line.replace('[0]', '').split()
        if len(f) >= 12 and f[0].isdigit() and f[2] == 'float':
            rows[int(f[0])] = (float(f[7]), float(f[11]))
    return rows

def flux(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and re.match(r'\d+x\d+', f[0]) and f[1] in ('flux', 'one-by-1'):
            rows[(f[0], f[1])] = float(f[3])
    return rows

print('| transport | size | busbw out of place, before | after | in place, before | after |')
print('|---|---:|---:|---:|---:|---:|')
for transport in ('local', 'shm'):
    runs = {v: [perf(p) for p in sorted(glob.glob(os.path.join(out, f'{transport}-{v}-*.txt')))] for v in ('before', 'after')}
    for size in sorted(runs['before'][0]):
        cells = []
        for column in (0, 1):
            for v in ('before', 'after'):
                cells.append(spread([r[size][column] for r in runs[v] if size in r]))
        print(f'| {transport} | {size} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |')
print()
print('| flux-perf step | mode | median ms, before | after |')
print('|---|---|---:|---:|')
runs = {v: [flux(p) for p in sorted(glob.glob(os.path.join(out, f'flux-{v}-*.txt')))] for v in ('before', 'after')}
for key in sorted(runs['before'][0], key=lambda k: (int(k[0].split('x')[1]), k[1])):
    print(f'| {key[0]} | {key[1]} | {spread([r[key] for r in runs["before"]])} | {spread([r[key] for r in runs["after"]])} |')
