// rnnc/half.h: bf16 and f16 round to nearest even from float and convert back
// exactly. f16 is checked against an independent reference (every half decoded
// with ldexp, the nearest found by search, ties to the even one), bf16 against
// its definition (the nearer of its two neighbours, ties to the even one), on
// a sweep of float bit patterns; the 16-bit products against the float ones.
#include "rnnc/half.h"
#include "rnnc/panels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace rnnc;

namespace {

/// Float bit patterns: every 4099th, and every one near the halves' edges.
template <class F> void sweep(F f) {
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) f(uint32_t(u));
  for (uint32_t base : {0x38800000u, 0x33800000u, 0x477fe000u, 0x3f800000u, 0x7f7f0000u, 0x00800000u})
    for (uint32_t d = 0; d < 1 << 14; ++d)
      for (uint32_t sign : {0u, 0x80000000u}) f(sign | (base - (1 << 13) + d));
}

/// The value of the half with these bits, from the format's definition (NaN for a NaN).
double halfValue(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v = exponent == 0    ? std::ldexp(double(mantissa), -24)
             : exponent == 31 ? (mantissa ? std::nan("") : HUGE_VAL)
                              : std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  return sign ? -v : v;
}

/// The half nearest to f, ties to the even bits; 65520 and up round to infinity.
uint16_t nearestHalf(float f) {
  static const std::vector<double> finite = [] {
    std::vector<double> v;
    for (uint16_t h = 0; h < 0x7c00; ++h) v.push_back(halfValue(h)); // increasing with the bits
    return v;
  }();
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return uint16_t(sign | 0x7c00);
  const size_t up = size_t(std::lower_bound(finite.begin(), finite.end(), a) - finite.begin());
  if (up == finite.size()) return uint16_t(sign | 0x7bff); // above 65504, below 65520
  if (finite[up] == a || up == 0) return uint16_t(sign | up);
  const double below = a - finite[up - 1], above = finite[up] - a;
  const size_t pick = below < above ? up - 1 : above < below ? up : (up % 2 == 0 ? up : up - 1);
  return uint16_t(sign | pick);
}

} // namespace

TEST_CASE("half: f16 round trips and rounds as IEEE binary16 (round to nearest even)", "[half]") {
  for (uint32_t h = 0; h < 0x10000; ++h) { // every half converts exactly and back
    const float f = half::f16_float_soft(uint16_t(h));
    const double want = halfValue(uint16_t(h));
    const bool nan = std::isnan(want);
    CHECK((nan ? std::isnan(f) : double(f) == want));
    if (!nan) CHECK(half::f16_bits_soft(f) == h);
    if (!nan) CHECK(half::f16_bits(f) == h);
  }
  int64_t checked = 0, wrong = 0;
  sweep([&](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    ++checked;
    if (std::isnan(f)) {
      wrong += !std::isnan(half::f16_float_soft(half::f16_bits_soft(f))) + !std::isnan(half::f16_float(half::f16_bits(f)));
      return;
    }
    const uint16_t want = nearestHalf(f);
    wrong += (half::f16_bits_soft(f) != want) + (half::f16_bits(f) != want);
  });
  CHECK(checked > 1000000);
  CHECK(wrong == 0);
  CHECK(half::f16_bits(65520.0f) == 0x7c00); // past the largest finite (65504) by half a step: infinity
  CHECK(half::f16_bits(65519.0f) == 0x7bff);
  CHECK(half::f16_bits(std::ldexp(1.0f, -25)) == 0); // a tie between 0 and the smallest subnormal: 0 (even)
  CHECK(half::f16_bits(std::ldexp(1.5f, -24)) == 2); // a tie between 1 and 2 units: 2 (even)
  CHECK(float(f16(0.1f)) == float(halfValue(nearestHalf(0.1f))));
}

TEST_CASE("half: bf16 is the nearest of its neighbours, ties to even, and converts back exactly", "[half]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half::bf16_float(uint16_t(h));
    if (!std::isnan(f)) CHECK(half::bf16_bits(f) == h);
  }
  int64_t wrong = 0;
  sweep([&](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    const uint16_t got = half::bf16_bits(f);
    if (std::isnan(f)) {
      wrong += !std::isnan(half::bf16_float(got));
      return;
    }
    const uint16_t down = uint16_t(u >> 16), up = uint16_t(down + 1); // toward zero, away from zero
    const double below = std::fabs(double(f) - double(half::bf16_float(down)));
    const double above = (u & 0x7fffffffu) >= 0x7f7f0000u && (u & 0xffffu) >= 0x8000u
                             ? 0.0 // rounds past the largest finite: to infinity, which is `up`
                             : std::fabs(double(half::bf16_float(up)) - double(f));
    const uint16_t want = (u & 0xffffu) == 0 ? down : below < above ? down : above < below ? up : (down & 1 ? up : down);
    wrong += got != want;
  });
  CHECK(wrong == 0);
  CHECK(float(bf16(1.0f)) == 1.0f);
  CHECK(half::bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);   // the tie rounds to the even 1.0
  CHECK(half::bf16_bits(1.0f + std::ldexp(3.0f, -8)) == 0x3f82);   // the tie rounds up to the even neighbour
  CHECK(std::isinf(float(bf16(std::numeric_limits<float>::max()))));
}

TEST_CASE("half: products and weight gradients of 16-bit rows equal the float ones, rounded once", "[half][panels]") {
  // Rows stored in bf16 go through float blocks (rnnc/panels.h): the same bits as the float
  // kernels on the converted values, then one rounding; over several blocks of rows too.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t M = 20000, N = 40, K = 64;
  std::vector<bf16> a(size_t(M * K));
  std::vector<float> af(a.size()), w(size_t(N * K));
  for (size_t i = 0; i < a.size(); ++i) af[i] = a[i] = bf16(normal(rng));
  for (float &x : w) x = normal(rng);
  std::vector<float> panels(size_t(cpu::panel_elements<float>(N, K)));
  cpu::pack_panels(true, N, K, w.data(), panels.data());
  std::vector<bf16> c(size_t(M * N));
  std::vector<float> cf(c.size());
  cpu::panel_product(M, N, K, a.data(), panels.data(), c.data(), N);
  cpu::panel_product(M, N, K, af.data(), panels.data(), cf.data(), N);
  int64_t differ = 0;
  for (size_t i = 0; i < c.size(); ++i) differ += c[i].bits != bf16(cf[i]).bits;
  CHECK(differ == 0);
  // G[N][K] += Σ_r d[r]ᵀ x[r] with d the bf16 rows of c and x those of a: 2 blocks of rows at these widths.
  std::vector<float> cfr(c.size()), g(size_t(N * K), 0.5f), gf(g);
  for (size_t i = 0; i < c.size(); ++i) cfr[i] = c[i];
  cpu::weight_gradient(N, K, M, c.data(), a.data(), g.data());
  cpu::weight_gradient(N, K, M, cfr.data(), af.data(), gf.data());
  CHECK(std::memcmp(g.data(), gf.data(), g.size() * sizeof(float)) == 0);
}
