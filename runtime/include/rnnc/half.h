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
/// f16_bits and f16_float take one F16C instruction where the target has it
/// (x86 since 2012), which rounds the same as these.
inline uint16_t f16_bits_soft(float f) {
  uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u >= 0x7f800000u) return uint16_t(sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u)); // NaN, inf
  if (u >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // 65520 and up round to inf
  if (u < 0x38800000u) {
    // Below 2^-14: a subnormal or zero. Adding 0.5f puts the 2^-24 units in
    // the low bits, rounded to nearest even by the float addition itself.
    const float shifted = bits_float(u) + 0.5f;
    return uint16_t(sign | (float_bits(shifted) - 0x3f000000u));
  }
  const uint32_t odd = (u >> 13) & 1u;
  u += (uint32_t(15 - 127) << 23) + 0xfffu + odd; // rebias the exponent, round half to even
  return uint16_t(sign | (u >> 13));
}
inline float f16_float_soft(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) { // zero or subnormal: mantissa · 2^-24, exact in float
    const float m = std::ldexp(float(mantissa), -24);
    return sign ? -m : m;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
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
  operator float() const { return half::bf16_float(bits); }
};

/// An IEEE half: as bf16, with binary16's range and precision.
struct f16 {
  uint16_t bits;
  f16() = default;
  f16(float f) : bits(half::f16_bits(f)) {}
  operator float() const { return half::f16_float(bits); }
};

static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2, "16-bit storage");

} // namespace rnnc
