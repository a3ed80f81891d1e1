// The 16-bit storage types of `--dtype bf16|f16` (docs/precision.md): values
// stored in 16 bits and computed in float. Rounding from float is
// round-to-nearest-even, as the GPU's conversions round; to float is exact.
// Header-only, C++17, no dependencies beyond the C++ library.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace rnnc::half {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// bfloat16: float's sign and exponent, 7 bits of mantissa.
inline uint16_t bf16_bits(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u); // a quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);               // ties to even; overflow is inf
}
inline float bf16_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

/// IEEE binary16: 5 bits of exponent (largest finite 65504), 10 of mantissa.
/// Both ways without branches (every case computed, one selected). f16_bits
/// and f16_float take one F16C instruction instead where the target has it
/// (x86 since 2012): it rounds the same, and measured faster than these
/// vectorized (docs/precision.md).
inline uint16_t f16_bits_soft(float f) {
  const uint32_t all = float_bits(f), sign = (all >> 16) & 0x8000u, u = all & 0x7fffffffu;
  // Normal: rebias the exponent (127 - 15 = 112) and round half to even at bit 13.
  const uint32_t normal = (u - (112u << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  // Below 2^-14, a subnormal or zero: adding 0.5f puts the 2^-24 units in the
  // low bits, rounded to nearest even by the float addition itself.
  const uint32_t subnormal = float_bits(bits_float(u) + 0.5f) - 0x3f000000u;
  uint32_t r = u < 0x38800000u ? subnormal : normal;
  r = u >= 0x477ff000u ? 0x7c00u : r; // 65520 and up (and inf) round to inf
  r = u > 0x7f800000u ? 0x7e00u : r;  // a quiet NaN
  return uint16_t(sign | r);
}
inline float f16_float_soft(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  const float subnormal = float(mantissa) * 5.9604644775390625e-8f; // mantissa · 2^-24, exact
  const uint32_t normal = exponent == 31 ? 0x7f800000u | (mantissa << 13) : ((exponent + 112) << 23) | (mantissa << 13);
  const uint32_t bits = exponent == 0 ? float_bits(subnormal) : normal;
  return bits_float(sign | bits);
}

#if defined(__F16C__)
inline uint16_t f16_bits(float f) { return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }
inline float f16_float(uint16_t h) { return _cvtsh_ss(h); }
#else
inline uint16_t f16_bits(float f) { return f16_bits_soft(f); }
inline float f16_float(uint16_t h) { return f16_float_soft(h); }
#endif

} // namespace rnnc::half

namespace rnnc {

/// A bfloat16 value: converts from float (rounding) and to float (exactly),
/// so generated code stores and loads it where it would a float.
struct bf16 {
  uint16_t bits;
  bf16() = default;
  bf16(float f) : bits(half::bf16_bits(f)) {}
  bf16 &operator=(float f) { // in place: no temporary, so a loop of stores vectorizes
    bits = half::bf16_bits(f);
    return *this;
  }
  operator float() const { return half::bf16_float(bits); }
};

/// An IEEE half: as bf16, with binary16's range and precision.
struct f16 {
  uint16_t bits;
  f16() = default;
  f16(float f) : bits(half::f16_bits(f)) {}
  f16 &operator=(float f) {
    bits = half::f16_bits(f);
    return *this;
  }
  operator float() const { return half::f16_float(bits); }
};

static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2, "16-bit storage");

} // namespace rnnc
