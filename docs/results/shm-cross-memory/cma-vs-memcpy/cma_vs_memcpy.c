/*
 * One process reads another's freshly written memory two ways, alternating rounds: process_vm_readv from the
 * owner's private buffer (what -Dgradsync.shm.cross.memory=true does) and memcpy from a shared mapping (what a
 * peer does with a staging window), each in pieces into a small private buffer that stays in cache.
 * Before every round the owner rewrites both buffers, so their lines are dirty in its core's cache, as after a
 * training step. Usage: cma_vs_memcpy BYTES PIECE_BYTES ROUNDS; prints mean microseconds per pass and GB/s.
 * Build: gcc -O2 -o cma_vs_memcpy cma_vs_memcpy.c
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double micros(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s BYTES PIECE_BYTES ROUNDS\n", argv[0]);
        return 2;
    }
    size_t bytes = strtoul(argv[1], 0, 10), piece = strtoul(argv[2], 0, 10);
    int rounds = atoi(argv[3]);
    char *owned = aligned_alloc(4096, bytes);
    char *shared = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    volatile long *turn = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(owned, 1, bytes);
    memset(shared, 1, bytes);
    pid_t owner = fork();
    if (owner == 0) {
        for (long i = 0; i < 2L * rounds; i++) {
            while (*turn != 2 * i + 1) {
            }
            memset(owned, (int) i, bytes);
            memset(shared, (int) i, bytes);
            __sync_synchronize();
            *turn = 2 * i + 2;
        }
        _exit(0);
    }
    char *into = aligned_alloc(4096, piece);
    double readv_us = 0, memcpy_us = 0;
    int counted = 0;
    for (long i = 0; i < 2L * rounds; i++) {
        *turn = 2 * i + 1;
        while (*turn != 2 * i + 2) {
        }
        double start = micros();
        for (size_t at = 0; at < bytes; at += piece) {
            size_t n = bytes - at < piece ? bytes - at : piece;
            if (i % 2 == 0) {
                struct iovec local = {into, n}, remote = {owned + at, n};
                if (process_vm_readv(owner, &local, 1, &remote, 1, 0) != (ssize_t) n) {
                    perror("process_vm_readv");
                    return 1;
                }
            } else {
                memcpy(into, shared + at, n);
            }
        }
        double took = micros() - start;
        if (i >= 4) {  /* the first two rounds of each kind warm up */
            if (i % 2 == 0) {
                readv_us += took;
                counted++;
            } else {
                memcpy_us += took;
            }
        }
    }
    waitpid(owner, 0, 0);
    printf("%zu B in %zu B pieces: process_vm_readv %.1f us (%.2f GB/s), memcpy from shared memory %.1f us (%.2f GB/s)\n",
           bytes, piece, readv_us / counted, bytes / (readv_us / counted) / 1e3, memcpy_us / counted,
           bytes / (memcpy_us / counted) / 1e3);
    return 0;
}
