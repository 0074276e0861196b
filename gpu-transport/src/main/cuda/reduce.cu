// gradsync's reduction kernels for device memory: out[i] = a[i] op b[i] (out may be a or b), and
// dst[i] /= divisor (the finishing step of AVG), for every data type gradsync has, with the arithmetic of
// sync-core's host kernels bit for bit (elements.cuh says how); and the one pass of the direct AllReduce on
// device buffers: the inputs of up to GS_MAX_RANKS ranks reduced in the order given, as that many pairwise
// reductions into the first would (bit for bit), divided for AVG, and written into every rank's output; 16-bit
// SUM and PROD accumulate in float32 and round once instead, as sync-core's host direct AllReduce does.
//
// Each kernel is a grid-stride loop, right for any grid; the host's launch shape (io.gradsync.gpu.LaunchShape)
// only makes it fast. When all pointers of a call sit at the same offset within 16 bytes, the elements before
// the first 16-byte boundary and after the last are done one at a time and the rest as 16-byte vectors;
// otherwise every element is done on its own.
//
// Entry points are extern "C", named gs_reduce_<type>_<op>, gs_divide_<type> and gs_allreduce_<type>_<op>; every
// parameter is 8 bytes (pointers, the element count, the divisor), which is what
// io.gradsync.gpu.CudaDriver#launchKernel passes.
#include "elements.cuh"

// Blocks of at most GS_BLOCK threads, compiled to fit GS_MIN_BLOCKS of them on an SM at once (at most 32
// registers a thread: 2048 threads, the most an sm_80 or sm_90 SM holds), so that the host's grid of one
// resident wave is resident in full. LaunchShape holds the same numbers.
#define GS_BLOCK 256
#define GS_MIN_BLOCKS 8
// The most ranks one pass reduces (io.gradsync.gpu.ReductionKernels.MAX_RANKS): their pointers are kernel
// parameters, indexed by constants once the loops over them are unrolled, so they stay in registers.
#define GS_MAX_RANKS 8

using namespace gs;

namespace {

// Where the vectors are: `peel` single elements up to the first 16-byte boundary, `vectors` 16-byte vectors,
// then the rest one at a time. Pointers at different offsets within 16 bytes get peel = n.
struct Plan {
    u64 peel, vectors;
};

template <typename T> __device__ __forceinline__ Plan plan(uintptr_t first, uintptr_t apart, u64 n) {
    const u64 perVector = 16 / sizeof(T);
    Plan p;
    if ((apart & 15) != 0) {
        p.peel = n;
        p.vectors = 0;
    } else {
        const u64 toBoundary = ((16 - (first & 15)) & 15) / sizeof(T);
        p.peel = toBoundary < n ? toBoundary : n;
        p.vectors = (n - p.peel) / perVector;
    }
    return p;
}

template <typename T, typename Op> __device__ __forceinline__ uint4 combineVector(uint4 x, uint4 y) {
    typedef typename Element<T>::Word W;
    const int words = (int) (sizeof(uint4) / sizeof(W));
    W xs[words], ys[words], rs[words];
    memcpy(xs, &x, sizeof(uint4));
    memcpy(ys, &y, sizeof(uint4));
#pragma unroll
    for (int k = 0; k < words; k++) {
        rs[k] = Element<T>::template combineWord<Op>(xs[k], ys[k]);
    }
    uint4 r;
    memcpy(&r, rs, sizeof(uint4));
    return r;
}

template <typename T> __device__ __forceinline__ uint4 divideVector(uint4 x, int64_t divisor) {
    typedef typename Element<T>::Word W;
    const int words = (int) (sizeof(uint4) / sizeof(W));
    W xs[words], rs[words];
    memcpy(xs, &x, sizeof(uint4));
#pragma unroll
    for (int k = 0; k < words; k++) {
        rs[k] = Element<T>::divideWord(xs[k], divisor);
    }
    uint4 r;
    memcpy(&r, rs, sizeof(uint4));
    return r;
}

// No __restrict__: out may be a or b. Each element is read before it is written, by the same thread.
template <typename T, typename Op> __device__ __forceinline__ void reduce(const T* a, const T* b, T* out, u64 n) {
    const u64 stride = (u64) gridDim.x * blockDim.x;
    const u64 thread = (u64) blockIdx.x * blockDim.x + threadIdx.x;
    const uintptr_t first = (uintptr_t) a;
    const Plan p = plan<T>(first, (first ^ (uintptr_t) b) | (first ^ (uintptr_t) out), n);
    for (u64 e = thread; e < p.peel; e += stride) {
        out[e] = Element<T>::template combine<Op>(a[e], b[e]);
    }
    const uint4* va = reinterpret_cast<const uint4*>(a + p.peel);
    const uint4* vb = reinterpret_cast<const uint4*>(b + p.peel);
    uint4* vo = reinterpret_cast<uint4*>(out + p.peel);
    for (u64 v = thread; v < p.vectors; v += stride) {
        vo[v] = combineVector<T, Op>(va[v], vb[v]);
    }
    for (u64 e = p.peel + p.vectors * (16 / sizeof(T)) + thread; e < n; e += stride) {
        out[e] = Element<T>::template combine<Op>(a[e], b[e]);
    }
}

template <typename T> __device__ __forceinline__ void divide(T* dst, u64 n, int64_t divisor) {
    const u64 stride = (u64) gridDim.x * blockDim.x;
    const u64 thread = (u64) blockIdx.x * blockDim.x + threadIdx.x;
    const Plan p = plan<T>((uintptr_t) dst, 0, n);
    for (u64 e = thread; e < p.peel; e += stride) {
        dst[e] = Element<T>::divide(dst[e], divisor);
    }
    uint4* v = reinterpret_cast<uint4*>(dst + p.peel);
    for (u64 i = thread; i < p.vectors; i += stride) {
        v[i] = divideVector<T>(v[i], divisor);
    }
    for (u64 e = p.peel + p.vectors * (16 / sizeof(T)) + thread; e < n; e += stride) {
        dst[e] = Element<T>::divide(dst[e], divisor);
    }
}

// The ranks' pointers: in[0] is the reducing rank's own input (read first: in place it is also out[k] for some k).
template <typename T> struct Ranks {
    const T* in[GS_MAX_RANKS];
    T* out[GS_MAX_RANKS];
};

// One element (or vector) through the pass: read from every input, combined in order, divided for AVG
// (divisor > 0), written to every output; every read comes before the writes, in the same thread.
template <typename T, typename Op, typename V, typename Combine, typename Divide>
__device__ __forceinline__ void passOne(const Ranks<T>& r, int ranks, u64 at, int64_t divisor, Combine combine, Divide divide) {
    V acc = reinterpret_cast<const V*>(r.in[0])[at];
#pragma unroll
    for (int k = 1; k < GS_MAX_RANKS; k++) {
        if (k < ranks) {
            acc = combine(acc, reinterpret_cast<const V*>(r.in[k])[at]);
        }
    }
    if (divisor > 0) {
        acc = divide(acc, divisor);
    }
#pragma unroll
    for (int k = 0; k < GS_MAX_RANKS; k++) {
        if (k < ranks) {
            reinterpret_cast<V*>(r.out[k])[at] = acc;
        }
    }
}

// The same for 16-bit SUM or PROD, W 32-bit words of two elements at a time (W = 4: a 16-byte vector), or one
// element (W = 0): accumulated in float32, divided there for AVG, and rounded once.
template <int W> struct HalfItem {
    uint32_t w[W];
};
template <> struct HalfItem<0> {
    uint16_t e;
};

template <int W> __device__ __forceinline__ uint16_t halfOf(const HalfItem<W>& item, int j) {
    if constexpr (W == 0) {
        return item.e;
    } else {
        return (uint16_t) (item.w[j >> 1] >> ((j & 1) * 16));
    }
}

template <typename H, typename Op, int W>
__device__ __forceinline__ void passHalves(const Ranks<Half<H>>& r, int ranks, u64 at, int64_t divisor) {
    constexpr int N = W == 0 ? 1 : 2 * W;
    typedef HalfItem<W> Item;
    float acc[N];
    Item item = reinterpret_cast<const Item*>(r.in[0])[at];
#pragma unroll
    for (int j = 0; j < N; j++) {
        acc[j] = widenExact<H>(halfOf(item, j));
    }
#pragma unroll
    for (int k = 1; k < GS_MAX_RANKS; k++) {
        if (k < ranks) {
            item = reinterpret_cast<const Item*>(r.in[k])[at];
#pragma unroll
            for (int j = 0; j < N; j++) {
                acc[j] = accumulateHalf<H, Op>(acc[j], halfOf(item, j));
            }
        }
    }
#pragma unroll
    for (int j = 0; j < N; j++) {
        acc[j] = divisor > 0 ? Element<float>::divide(acc[j], divisor) : acc[j];
    }
    Item result;
    if constexpr (W == 0) {
        result.e = narrowExact<H>(acc[0]);
    } else {
#pragma unroll
        for (int w = 0; w < W; w++) {
            const float lo = acc[2 * w], hi = acc[2 * w + 1];
            result.w[w] = lo == lo && hi == hi ? H::narrow2(lo, hi)
                                               : narrowExact<H>(lo) | (uint32_t) narrowExact<H>(hi) << 16;
        }
    }
#pragma unroll
    for (int k = 0; k < GS_MAX_RANKS; k++) {
        if (k < ranks) {
            reinterpret_cast<Item*>(r.out[k])[at] = result;
        }
    }
}

template <typename T> struct IsHalf {
    static const bool VALUE = false;
};
template <typename H> struct IsHalf<Half<H>> {
    static const bool VALUE = true;
    typedef H Format;
};

template <typename T, typename Op>
__device__ __forceinline__ void allReduce(const Ranks<T>& r, int ranks, u64 n, int64_t divisor) {
    const u64 stride = (u64) gridDim.x * blockDim.x;
    const u64 thread = (u64) blockIdx.x * blockDim.x + threadIdx.x;
    const uintptr_t first = (uintptr_t) r.in[0];
    uintptr_t apart = 0;
#pragma unroll
    for (int k = 0; k < GS_MAX_RANKS; k++) {
        if (k < ranks) {
            apart |= (first ^ (uintptr_t) r.in[k]) | (first ^ (uintptr_t) r.out[k]);
        }
    }
    const Plan p = plan<T>(first, apart, n);
    Ranks<T> v = r;
#pragma unroll
    for (int k = 0; k < GS_MAX_RANKS; k++) {
        v.in[k] = r.in[k] + p.peel;
        v.out[k] = r.out[k] + p.peel;
    }
    const u64 tail = p.peel + p.vectors * (16 / sizeof(T));
    if constexpr (IsHalf<T>::VALUE && Op::ARITH) {
        typedef typename IsHalf<T>::Format H;
        for (u64 e = thread; e < p.peel; e += stride) {
            passHalves<H, Op, 0>(r, ranks, e, divisor);
        }
        for (u64 i = thread; i < p.vectors; i += stride) {
            passHalves<H, Op, 4>(v, ranks, i, divisor);
        }
        for (u64 e = tail + thread; e < n; e += stride) {
            passHalves<H, Op, 0>(r, ranks, e, divisor);
        }
    } else {
        auto combineElement = [](T x, T y) { return Element<T>::template combine<Op>(x, y); };
        auto divideElement = [](T x, int64_t d) { return Element<T>::divide(x, d); };
        auto combineVectors = [](uint4 x, uint4 y) { return combineVector<T, Op>(x, y); };
        auto divideVectors = [](uint4 x, int64_t d) { return divideVector<T>(x, d); };
        for (u64 e = thread; e < p.peel; e += stride) {
            passOne<T, Op, T>(r, ranks, e, divisor, combineElement, divideElement);
        }
        for (u64 i = thread; i < p.vectors; i += stride) {
            passOne<T, Op, uint4>(v, ranks, i, divisor, combineVectors, divideVectors);
        }
        for (u64 e = tail + thread; e < n; e += stride) {
            passOne<T, Op, T>(r, ranks, e, divisor, combineElement, divideElement);
        }
    }
}

}  // namespace

#define GS_ALLREDUCE(NAME, T, OP, Op)                                                                      \
    extern "C" __global__ void __launch_bounds__(GS_BLOCK, GS_MIN_BLOCKS) gs_allreduce_##NAME##_##OP(       \
        u64 n, u64 ranks, long long divisor, const T* in0, const T* in1, const T* in2, const T* in3,      \
        const T* in4, const T* in5, const T* in6, const T* in7, T* out0, T* out1, T* out2, T* out3,       \
        T* out4, T* out5, T* out6, T* out7) {                                                              \
        const Ranks<T> r = {{in0, in1, in2, in3, in4, in5, in6, in7}, {out0, out1, out2, out3, out4, out5, out6, out7}}; \
        allReduce<T, Op>(r, (int) ranks, n, divisor);                                                       \
    }
#define GS_REDUCE(NAME, T, OP, Op)                                                                         \
    extern "C" __global__ void __launch_bounds__(GS_BLOCK, GS_MIN_BLOCKS)                                 \
    gs_reduce_##NAME##_##OP(const T* a, const T* b, T* out, u64 n) { reduce<T, Op>(a, b, out, n); }
#define GS_TYPE(NAME, T)                                                                                   \
    GS_REDUCE(NAME, T, sum, Sum) GS_REDUCE(NAME, T, prod, Prod)                                            \
    GS_REDUCE(NAME, T, max, Max) GS_REDUCE(NAME, T, min, Min)                                              \
    GS_ALLREDUCE(NAME, T, sum, Sum) GS_ALLREDUCE(NAME, T, prod, Prod)                                      \
    GS_ALLREDUCE(NAME, T, max, Max) GS_ALLREDUCE(NAME, T, min, Min)                                        \
    extern "C" __global__ void __launch_bounds__(GS_BLOCK, GS_MIN_BLOCKS)                                 \
    gs_divide_##NAME(T* dst, u64 n, long long divisor) { divide<T>(dst, n, divisor); }

GS_TYPE(float32, float)
GS_TYPE(float64, double)
GS_TYPE(int32, int32_t)
GS_TYPE(int64, int64_t)
GS_TYPE(bfloat16, bfloat16)
GS_TYPE(float16, float16)
