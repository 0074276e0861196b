/*
 * float32 SUM MPI_Allreduce (out-of-place), measured the way allreduce-perf (and nccl-tests with -c 0) measures:
 * per size, w untimed iterations, a barrier, n back-to-back iterations timed as one block; a rank's time is
 * block / n and the reported time is the slowest rank's. After the timing, one reduction of rank-dependent
 * integer-valued floats (so the sum is exact) is checked element by element: #wrong.
 *
 *   mpicc -O2 -o build/mpi_allreduce mpi_allreduce.c
 *   mpirun -np 2 build/mpi_allreduce -b 4K -e 64M -f 4 -n 20 -w 5 --csv mpi.csv [--label mpi-tcp]
 *
 * Sizes accept 4, 8K, 64M, 1G (powers of 1024). The number of ranks is mpirun's -np; --ranks N, if given,
 * only has to agree with it.
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLOAT_BYTES 4

static const char *CSV_HEADER = "impl,ranks,placement,size_bytes,count,type,redop,time_us,algbw_gbs,busbw_gbs,wrong";

struct opts {
    long long min_bytes, max_bytes;
    long long factor;
    int iters, warmup, ranks;
    const char *csv;
    const char *label;
};

static int parse_size(const char *text, long long *out) {
    char buf[64];
    size_t len = strlen(text);
    if (len == 0 || len >= sizeof buf) {
        return -1;
    }
    memcpy(buf, text, len + 1);
    if (buf[len - 1] == 'B' || buf[len - 1] == 'b') {
        buf[--len] = '\0';
    }
    long long scale = 1;
    if (len > 0) {
        switch (buf[len - 1]) {
            case 'K': case 'k': scale = 1LL << 10; break;
            case 'M': case 'm': scale = 1LL << 20; break;
            case 'G': case 'g': scale = 1LL << 30; break;
            default: break;
        }
    }
    if (scale != 1) {
        buf[--len] = '\0';
    }
    if (len == 0) {
        return -1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > INT64_MAX / scale) {
        return -1;
    }
    *out = v * scale;
    return 0;
}

static int parse_int(const char *text, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > INT32_MAX) {
        return -1;
    }
    *out = (int) v;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: mpi_allreduce [--ranks N] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
               "                     [--csv FILE] [--label NAME]\n"
               "sizes: 4, 8K, 64M, 1G (powers of 1024); defaults -b 32M -e 32M -f 2 -n 20 -w 5, label mpi\n");
}

/* 0: ok, 1: help printed, -1: bad arguments (message printed). */
static int parse_args(int argc, char **argv, struct opts *o) {
    o->min_bytes = o->max_bytes = 32LL << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->ranks = 0;
    o->csv = NULL;
    o->label = "mpi";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mpi_allreduce: %s needs a value\n", a);
            return -1;
        }
        const char *v = argv[++i];
        int bad;
        if (strcmp(a, "-b") == 0 || strcmp(a, "--minbytes") == 0) {
            bad = parse_size(v, &o->min_bytes);
        } else if (strcmp(a, "-e") == 0 || strcmp(a, "--maxbytes") == 0) {
            bad = parse_size(v, &o->max_bytes);
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--stepfactor") == 0) {
            int f;
            bad = parse_int(v, &f);
            o->factor = f;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--iters") == 0) {
            bad = parse_int(v, &o->iters);
        } else if (strcmp(a, "-w") == 0 || strcmp(a, "--warmup_iters") == 0) {
            bad = parse_int(v, &o->warmup);
        } else if (strcmp(a, "--ranks") == 0 || strcmp(a, "-N") == 0) {
            bad = parse_int(v, &o->ranks);
        } else if (strcmp(a, "--csv") == 0) {
            o->csv = v;
            bad = 0;
        } else if (strcmp(a, "--label") == 0) {
            o->label = v;
            bad = 0;
        } else {
            fprintf(stderr, "mpi_allreduce: unknown option %s\n", a);
            usage(stderr);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "mpi_allreduce: bad value for %s: '%s'\n", a, v);
            return -1;
        }
    }
    if (o->iters < 1 || o->factor < 2 || o->max_bytes < o->min_bytes) {
        fprintf(stderr, "mpi_allreduce: need -n >= 1, -f >= 2, -b <= -e\n");
        return -1;
    }
    if (o->max_bytes / FLOAT_BYTES > INT32_MAX) {
        fprintf(stderr, "mpi_allreduce: -e too large for an int element count\n");
        return -1;
    }
    return 0;
}

/* Rank-dependent integers in [-125, 125] as floats: sums over any practical rank count are exact. */
static inline float pattern(long long i, int rank) {
    return (float) ((i + 17LL * rank) % 251 - 125);
}

struct row {
    long long size;
    int count;
    double us, algbw, busbw;
    long long wrong;
};

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    struct opts o;
    int parsed = parse_args(argc, argv, &o);
    if (parsed != 0) {
        MPI_Finalize();
        return parsed > 0 ? 0 : 2;
    }
    if (o.ranks != 0 && o.ranks != n) {
        if (rank == 0) {
            fprintf(stderr, "mpi_allreduce: --ranks %d but mpirun started %d ranks\n", o.ranks, n);
        }
        MPI_Finalize();
        return 2;
    }

    int nsizes = 0;
    long long sizes[128];
    for (long long s = o.min_bytes; s <= o.max_bytes && nsizes < 128; s = s == 0 ? FLOAT_BYTES : s * o.factor) {
        sizes[nsizes++] = s / FLOAT_BYTES * FLOAT_BYTES;
    }
    size_t max_count = (size_t) (o.max_bytes / FLOAT_BYTES);
    size_t alloc = (max_count == 0 ? 1 : max_count) * sizeof(float);
    float *send = NULL, *recv = NULL;
    if (posix_memalign((void **) &send, 64, alloc) != 0 || posix_memalign((void **) &recv, 64, alloc) != 0) {
        fprintf(stderr, "mpi_allreduce: rank %d: cannot allocate 2 x %zu bytes\n", rank, alloc);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    memset(recv, 0, alloc);

    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen;
    MPI_Get_library_version(version, &vlen);
    char *nl = strchr(version, '\n');
    if (nl) {
        *nl = '\0';
    }
    double factor = n == 1 ? 0.0 : 2.0 * (n - 1) / n;
    struct row rows[128];
    if (rank == 0) {
        printf("# mpi_allreduce (%s): ranks %d, out-of-place, %s\n", o.label, n, version);
        printf("# iters %d, warmup %d, check once per size after timing\n#\n", o.iters, o.warmup);
        printf("#       size         count      type   redop     time   algbw   busbw #wrong\n");
        printf("#        (B)    (elements)                       (us)  (GB/s)  (GB/s)       \n");
        fflush(stdout);
    }
    long long total_wrong = 0;
    double bus_sum = 0;
    for (int s = 0; s < nsizes; s++) {
        int count = (int) (sizes[s] / FLOAT_BYTES);
        for (int i = 0; i < count; i++) {
            send[i] = pattern(i, rank);
        }
        for (int i = 0; i < o.warmup; i++) {
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < o.iters; i++) {
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        double per_iter = (MPI_Wtime() - t0) / o.iters, worst;
        MPI_Allreduce(&per_iter, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

        /* Correctness, outside the timing: poison the result, reduce once, compare with the exact sum. */
        for (int i = 0; i < count; i++) {
            recv[i] = NAN;
        }
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        long long wrong_here = 0, wrong;
        for (int i = 0; i < count; i++) {
            float expected = 0.0f;
            for (int r = 0; r < n; r++) {
                expected += pattern(i, r);
            }
            wrong_here += recv[i] != expected;
        }
        MPI_Allreduce(&wrong_here, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

        double algbw = worst > 0 ? sizes[s] / worst / 1e9 : 0.0;
        rows[s] = (struct row) {sizes[s], count, worst * 1e6, algbw, algbw * factor, wrong};
        total_wrong += wrong;
        bus_sum += algbw * factor;
        if (rank == 0) {
            printf("%12lld  %12d  %8s  %6s  %8.1f  %6.2f  %6.2f  %5lld\n", sizes[s], count, "float", "sum",
                   rows[s].us, rows[s].algbw, rows[s].busbw, rows[s].wrong);
            fflush(stdout);
        }
    }
    if (rank == 0) {
        printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
        printf("# Avg bus bandwidth    : %.4f \n#\n", nsizes ? bus_sum / nsizes : 0.0);
        if (o.csv) {
            FILE *f = fopen(o.csv, "w");
            if (!f) {
                fprintf(stderr, "mpi_allreduce: cannot write %s: %s\n", o.csv, strerror(errno));
                MPI_Abort(MPI_COMM_WORLD, 4);
            }
            fprintf(f, "%s\n", CSV_HEADER);
            for (int s = 0; s < nsizes; s++) {
                fprintf(f, "%s,%d,out-of-place,%lld,%d,float,sum,%.3f,%.4f,%.4f,%lld\n", o.label, n, rows[s].size,
                        rows[s].count, rows[s].us, rows[s].algbw, rows[s].busbw, rows[s].wrong);
            }
            fclose(f);
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return total_wrong == 0 ? 0 : 1;
}
