// What one element of a reduction is, for every data type and operator: the arithmetic of sync-core's host
// kernels (io.gradsync.core.memory.Kernels and HalfFloats), bit for bit. Host and device code alike, so that
// a host build of this file can be checked against Java without a GPU (gpu-transport's ElementsOnHostTest).
//
// - Integers wrap on overflow, as Java's do: the arithmetic is done unsigned, where C++ defines it.
// - MAX and MIN are Java's Math.max/min: a NaN operand is the result, and -0.0 counts below +0.0. They return
//   an operand's bits unchanged (a 16-bit NaN made quiet, as the host's widening and narrowing make it).
// - bfloat16 and float16 are widened to float32, combined, and rounded to nearest even once; the one pass of
//   several inputs accumulates SUM and PROD in float32 and rounds once at the end (accumulateHalf).
// - Java does not say which NaN an arithmetic operation returns; the host kernels run on x86-64, whose SSE
//   unit returns the NaN operand made quiet, and for an invalid operation (inf - inf, 0 * inf) its default
//   NaN, quiet and negative. A GPU returns a NaN of its own (0x7fffffff); here every NaN result is mended to
//   x86-64's, so a rank's bits do not depend on where it reduced.
// - Where both operands are NaN the host's result is not fixed: the JIT may swap an addition's operands, and
//   HotSpot's compiled Math.max/min return the second NaN where its interpreter returns the first. Here it is
//   always the first (made quiet where the operation is arithmetic).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#define GS_HD __host__ __device__ __forceinline__

namespace gs {

typedef unsigned long long u64;

GS_HD uint32_t bitsOf(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
GS_HD uint64_t bitsOf(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
GS_HD float floatOf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
GS_HD double doubleOf(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

GS_HD float quietNan(float x, float y) {
    if (x != x) return floatOf(bitsOf(x) | 0x00400000u);
    if (y != y) return floatOf(bitsOf(y) | 0x00400000u);
    return floatOf(0xFFC00000u);
}
GS_HD double quietNan(double x, double y) {
    if (x != x) return doubleOf(bitsOf(x) | 0x0008000000000000ull);
    if (y != y) return doubleOf(bitsOf(y) | 0x0008000000000000ull);
    return doubleOf(0xFFF8000000000000ull);
}

// Operators. ARITH: computes a value (SUM, PROD); otherwise it selects an operand (MAX, MIN).
struct Sum {
    static const bool ARITH = true;
    template <typename F> GS_HD static F apply(F x, F y) { return x + y; }
    GS_HD static int32_t apply(int32_t x, int32_t y) { return (int32_t) ((uint32_t) x + (uint32_t) y); }
    GS_HD static int64_t apply(int64_t x, int64_t y) { return (int64_t) ((uint64_t) x + (uint64_t) y); }
};
struct Prod {
    static const bool ARITH = true;
    template <typename F> GS_HD static F apply(F x, F y) { return x * y; }
    GS_HD static int32_t apply(int32_t x, int32_t y) { return (int32_t) ((uint32_t) x * (uint32_t) y); }
    GS_HD static int64_t apply(int64_t x, int64_t y) { return (int64_t) ((uint64_t) x * (uint64_t) y); }
};
struct Max {
    static const bool ARITH = false;
    // Math.max(x, y) is x: x is NaN, or both are zeros and x is not -0.0, or x >= y (false when y is NaN)
    template <typename F> GS_HD static bool first(F x, F y) {
        if (x != x) return true;
        if (x == 0 && y == 0) return !signbit(x);
        return x >= y;
    }
    GS_HD static int32_t apply(int32_t x, int32_t y) { return x >= y ? x : y; }
    GS_HD static int64_t apply(int64_t x, int64_t y) { return x >= y ? x : y; }
};
struct Min {
    static const bool ARITH = false;
    // Math.min(x, y) is x: x is NaN, or both are zeros and y is not -0.0, or x <= y (false when y is NaN)
    template <typename F> GS_HD static bool first(F x, F y) {
        if (x != x) return true;
        if (x == 0 && y == 0) return !signbit(y);
        return x <= y;
    }
    GS_HD static int32_t apply(int32_t x, int32_t y) { return x <= y ? x : y; }
    GS_HD static int64_t apply(int64_t x, int64_t y) { return x <= y ? x : y; }
};

template <typename Op, typename F> GS_HD F combineFloat(F x, F y) {
    if constexpr (!Op::ARITH) {
        return Op::first(x, y) ? x : y;
    } else {
        F r = Op::apply(x, y);
        return r == r ? r : quietNan(x, y);
    }
}

// The 16-bit formats, held as their bits. QUIET is the bit a NaN gets on its way through float32 and back;
// DEFAULT_NAN is x86-64's default NaN (0xffc00000) narrowed.
struct Bf16 {
    static const uint16_t QUIET = 0x0040, DEFAULT_NAN = 0xFFC0;
    GS_HD static bool isNan(uint16_t h) { return (h & 0x7FFF) > 0x7F80; }
    GS_HD static float widen(uint16_t h) { return floatOf((uint32_t) h << 16); }
    GS_HD static uint16_t narrow(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
    // a NaN's bits through float32 and back as the host moves them: payload kept, made quiet on the way back
    GS_HD static float widenNan(uint16_t h) { return floatOf((uint32_t) h << 16); }
    GS_HD static uint16_t narrowNan(uint32_t u) { return (uint16_t) ((u >> 16) | QUIET); }
    GS_HD static float2 widen2(uint32_t hh) { return make_float2(floatOf(hh << 16), floatOf(hh & 0xFFFF0000u)); }
    GS_HD static uint32_t narrow2(float lo, float hi) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        uint32_t u; memcpy(&u, &h, 4); return u;
    }
};
struct Fp16 {
    static const uint16_t QUIET = 0x0200, DEFAULT_NAN = 0xFE00;
    GS_HD static bool isNan(uint16_t h) { return (h & 0x7FFF) > 0x7C00; }
    GS_HD static float widen(uint16_t h) { return __half2float(__ushort_as_half(h)); }
    GS_HD static uint16_t narrow(float f) { return __half_as_ushort(__float2half_rn(f)); }
    GS_HD static float widenNan(uint16_t h) {
        return floatOf((uint32_t) (h & 0x8000) << 16 | 0x7F800000u | (uint32_t) (h & 0x3FF) << 13);
    }
    GS_HD static uint16_t narrowNan(uint32_t u) { return (uint16_t) (((u >> 16) & 0x8000) | 0x7E00 | ((u >> 13) & 0x3FF)); }
    GS_HD static float2 widen2(uint32_t hh) { __half2 h; memcpy(&h, &hh, 4); return __half22float2(h); }
    GS_HD static uint32_t narrow2(float lo, float hi) {
        __half2 h = __floats2half2_rn(lo, hi);
        uint32_t u; memcpy(&u, &h, 4); return u;
    }
};

// A NaN result of 16-bit arithmetic, as the host makes it: the NaN operand made quiet, else the default NaN.
template <typename H> GS_HD uint16_t halfNan(uint16_t x, uint16_t y) {
    if (H::isNan(x)) return x | H::QUIET;
    if (H::isNan(y)) return y | H::QUIET;
    return H::DEFAULT_NAN;
}

template <typename H, typename Op> GS_HD uint16_t combineHalf(uint16_t x, uint16_t y) {
    float fx = H::widen(x), fy = H::widen(y);
    if constexpr (!Op::ARITH) {
        uint16_t r = Op::first(fx, fy) ? x : y;
        return H::isNan(r) ? r | H::QUIET : r;
    } else {
        float r = Op::apply(fx, fy);
        return r == r ? H::narrow(r) : halfNan<H>(x, y);
    }
}

// Two 16-bit elements packed in a word (the first in the low half): widened and narrowed two at a time.
template <typename H, typename Op> GS_HD uint32_t combineHalfPair(uint32_t x, uint32_t y) {
    if constexpr (Op::ARITH) {
        float2 fx = H::widen2(x), fy = H::widen2(y);
        float lo = Op::apply(fx.x, fy.x), hi = Op::apply(fx.y, fy.y);
        if (lo == lo && hi == hi) return H::narrow2(lo, hi);
    }
    return combineHalf<H, Op>((uint16_t) x, (uint16_t) y) | (uint32_t) combineHalf<H, Op>(x >> 16, y >> 16) << 16;
}

template <typename H> GS_HD uint16_t divideHalf(uint16_t x, float divisor) {
    float r = H::widen(x) / divisor;
    return r == r ? H::narrow(r) : halfNan<H>(x, x);
}
template <typename H> GS_HD uint32_t divideHalfPair(uint32_t x, float divisor) {
    float2 f = H::widen2(x);
    float lo = f.x / divisor, hi = f.y / divisor;
    if (lo == lo && hi == hi) return H::narrow2(lo, hi);
    return divideHalf<H>((uint16_t) x, divisor) | (uint32_t) divideHalf<H>(x >> 16, divisor) << 16;
}

// Accumulating 16-bit inputs in float32 (the one pass's SUM and PROD, rounded once at the end, as sync-core's
// host direct AllReduce does): widened and narrowed as the host's HalfFloats, NaN payloads included, and each
// step's NaN made as x86-64 makes it (the accumulator's NaN, else the input's, made quiet; else the default NaN).
template <typename H> GS_HD float widenExact(uint16_t h) { return H::isNan(h) ? H::widenNan(h) : H::widen(h); }
template <typename H> GS_HD uint16_t narrowExact(float f) { return f == f ? H::narrow(f) : H::narrowNan(bitsOf(f)); }
template <typename H, typename Op> GS_HD float accumulateHalf(float acc, uint16_t x) {
    const float fx = widenExact<H>(x);
    const float r = Op::apply(acc, fx);
    return r == r ? r : quietNan(acc, fx);
}

// Element: how the kernels read, combine and divide one data type. T is what memory holds; a 16-byte vector
// holds 16 / sizeof(Word) words, each combined by combineWord.
template <typename T> struct Element;

GS_HD float fromBits(uint32_t u) { return floatOf(u); }
GS_HD double fromBits(uint64_t u) { return doubleOf(u); }

template <typename F, typename W> struct FloatElement {
    typedef W Word;
    template <typename Op> GS_HD static F combine(F x, F y) { return combineFloat<Op>(x, y); }
    template <typename Op> GS_HD static Word combineWord(Word x, Word y) { return bitsOf(combine<Op>(fromBits(x), fromBits(y))); }
    GS_HD static F divide(F x, int64_t d) { F r = x / (F) d; return r == r ? r : quietNan(x, x); }
    GS_HD static Word divideWord(Word x, int64_t d) { return bitsOf(divide(fromBits(x), d)); }
};
template <> struct Element<float> : FloatElement<float, uint32_t> {};
template <> struct Element<double> : FloatElement<double, uint64_t> {};

// Java's integer division: the divisor is a rank count, at least 1, so there is no overflow to mind.
template <typename I, typename W> struct IntegerElement {
    typedef W Word;
    template <typename Op> GS_HD static I combine(I x, I y) { return Op::apply(x, y); }
    template <typename Op> GS_HD static Word combineWord(Word x, Word y) { return (Word) combine<Op>((I) x, (I) y); }
    GS_HD static I divide(I x, int64_t d) { return x / (I) d; }
    GS_HD static Word divideWord(Word x, int64_t d) { return (Word) divide((I) x, d); }
};
template <> struct Element<int32_t> : IntegerElement<int32_t, uint32_t> {};
template <> struct Element<int64_t> : IntegerElement<int64_t, uint64_t> {};

// The 16-bit types as C++ types of their own (their bits, and H the format), so that Element can tell them apart.
template <typename H> struct Half {
    uint16_t bits;
};
typedef Half<Bf16> bfloat16;
typedef Half<Fp16> float16;

template <typename H> struct Element<Half<H>> {
    typedef uint32_t Word;
    template <typename Op> GS_HD static Half<H> combine(Half<H> x, Half<H> y) {
        Half<H> r = {combineHalf<H, Op>(x.bits, y.bits)};
        return r;
    }
    template <typename Op> GS_HD static Word combineWord(Word x, Word y) { return combineHalfPair<H, Op>(x, y); }
    GS_HD static Half<H> divide(Half<H> x, int64_t d) {
        Half<H> r = {divideHalf<H>(x.bits, (float) d)};
        return r;
    }
    GS_HD static Word divideWord(Word x, int64_t d) { return divideHalfPair<H>(x, (float) d); }
};

}  // namespace gs
