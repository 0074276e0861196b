// elements.cuh's arithmetic run on the host, for ElementsOnHostTest, which compares it with sync-core's
// host kernels without a GPU. Reads requests from stdin until its end, each
//   int32 type (DataType's ordinal), int32 op (0 sum, 1 prod, 2 max, 3 min, 4 divide; +8: through the
//   16-byte vectors' word functions), int64 count, int64 divisor, count elements of a, count elements of b
// and writes count elements of the result to stdout for each.
#include "elements.cuh"

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace gs;

template <typename T> static bool run(int op, long long count, long long divisor) {
    typedef typename Element<T>::Word W;
    std::vector<T> a(count), b(count), out(count);
    if (fread(a.data(), sizeof(T), count, stdin) != (size_t) count || fread(b.data(), sizeof(T), count, stdin) != (size_t) count) {
        return false;
    }
    bool words = op >= 8;
    if (words && (count * sizeof(T)) % sizeof(W) != 0) {
        return false;
    }
    long long n = words ? count * (long long) sizeof(T) / (long long) sizeof(W) : count;
    for (long long i = 0; i < n; i++) {
        if (words) {
            W x, y, r;
            memcpy(&x, (char*) a.data() + i * sizeof(W), sizeof(W));
            memcpy(&y, (char*) b.data() + i * sizeof(W), sizeof(W));
            switch (op & 7) {
                case 0: r = Element<T>::template combineWord<Sum>(x, y); break;
                case 1: r = Element<T>::template combineWord<Prod>(x, y); break;
                case 2: r = Element<T>::template combineWord<Max>(x, y); break;
                case 3: r = Element<T>::template combineWord<Min>(x, y); break;
                default: r = Element<T>::divideWord(x, divisor); break;
            }
            memcpy((char*) out.data() + i * sizeof(W), &r, sizeof(W));
        } else {
            switch (op) {
                case 0: out[i] = Element<T>::template combine<Sum>(a[i], b[i]); break;
                case 1: out[i] = Element<T>::template combine<Prod>(a[i], b[i]); break;
                case 2: out[i] = Element<T>::template combine<Max>(a[i], b[i]); break;
                case 3: out[i] = Element<T>::template combine<Min>(a[i], b[i]); break;
                default: out[i] = Element<T>::divide(a[i], divisor); break;
            }
        }
    }
    fwrite(out.data(), sizeof(T), count, stdout);
    fflush(stdout);
    return true;
}

int main() {
    int header[2];
    long long sizes[2];
    while (fread(header, sizeof(int), 2, stdin) == 2 && fread(sizes, sizeof(long long), 2, stdin) == 2) {
        bool ok;
        switch (header[0]) {
            case 0: ok = run<float>(header[1], sizes[0], sizes[1]); break;
            case 1: ok = run<double>(header[1], sizes[0], sizes[1]); break;
            case 2: ok = run<int32_t>(header[1], sizes[0], sizes[1]); break;
            case 3: ok = run<int64_t>(header[1], sizes[0], sizes[1]); break;
            case 4: ok = run<bfloat16>(header[1], sizes[0], sizes[1]); break;
            case 5: ok = run<float16>(header[1], sizes[0], sizes[1]); break;
            default: ok = false;
        }
        if (!ok) {
            fprintf(stderr, "elements_on_host: bad request (type %d, op %d, count %lld)\n", header[0], header[1], sizes[0]);
            return 1;
        }
    }
    return 0;
}
