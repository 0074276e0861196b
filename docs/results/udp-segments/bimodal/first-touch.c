/* First write to freshly mapped anonymous memory (guest page faults, zeroing, and whatever the hypervisor adds
 * for guest pages it does not back yet) against a second write to the same pages, three rounds of SIZE MiB.
 * gcc -O2 -o first-touch first-touch.c && ./first-touch 4096 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t size = (size_t) atoi(argc > 1 ? argv[1] : "4096") << 20;
    for (int round = 0; round < 3; round++) {
        char *p = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        double t0 = now();
        memset(p, 1, size);
        double t1 = now();
        memset(p, 2, size);
        double t2 = now();
        printf("round %d: first write %.2f GB/s, second write %.2f GB/s\n", round, size / (t1 - t0) / 1e9,
               size / (t2 - t1) / 1e9);
        munmap(p, size);
    }
    return 0;
}
