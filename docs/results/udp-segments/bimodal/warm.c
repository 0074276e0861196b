/* Writes SIZE MiB of fresh anonymous memory once and frees it: pages the host had to back again are backed now. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    size_t size = (size_t) atoi(argc > 1 ? argv[1] : "8192") << 20;
    char *p = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 1, size);
    munmap(p, size);
    return 0;
}
