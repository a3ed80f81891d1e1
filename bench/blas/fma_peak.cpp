// The roofline the CPU tables are held against: the f32 fused multiply-adds
// this machine's cores retire per second, each OpenMP thread running 12
// independent chains of vector FMAs (enough to cover the latency of two FMA
// pipes), with the widest vectors the compiler was allowed (-march=native:
// AVX-512, else AVX2, else scalar). Best of 5 repetitions; docs/benchmarks/cpu.md quotes it.
//   c++ -O3 -march=native -fopenmp -std=c++20 bench/blas/fma_peak.cpp -o fma_peak
//   OMP_NUM_THREADS=2 ./fma_peak; OMP_NUM_THREADS=1 ./fma_peak
#include <omp.h>

#include <chrono>
#include <cstdio>

#if defined(__AVX512F__)
#include <immintrin.h>
using Vec = __m512;
constexpr int kLanes = 16;
constexpr const char *kIsa = "AVX-512";
inline Vec splat(float x) { return _mm512_set1_ps(x); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float first(Vec v) { return _mm512_cvtss_f32(v); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
using Vec = __m256;
constexpr int kLanes = 8;
constexpr const char *kIsa = "AVX2 + FMA";
inline Vec splat(float x) { return _mm256_set1_ps(x); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float first(Vec v) { return _mm256_cvtss_f32(v); }
#else
#include <cmath>
using Vec = float;
constexpr int kLanes = 1;
constexpr const char *kIsa = "scalar";
inline Vec splat(float x) { return x; }
inline Vec fma(Vec a, Vec b, Vec c) { return std::fma(a, b, c); }
inline float first(Vec v) { return v; }
#endif

int main() {
  constexpr int kChains = 12;
  constexpr long kRounds = 20'000'000; // kChains FMAs each
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    float sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
      Vec acc[kChains];
      for (int i = 0; i < kChains; ++i) acc[i] = splat(1.0f + 1e-3f * static_cast<float>(i));
      const Vec m = splat(0.999999f), c = splat(1e-7f);
      for (long k = 0; k < kRounds; ++k)
        for (int i = 0; i < kChains; ++i) acc[i] = fma(acc[i], m, c);
      for (int i = 0; i < kChains; ++i) sink += first(acc[i]); // keeps the chains alive
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * kLanes * kChains * static_cast<double>(kRounds) * omp_get_max_threads();
    if (flops / seconds > best) best = flops / seconds;
    if (sink == 0.5f) std::puts(""); // never: the sum is used
  }
  std::printf("%d threads, %s: %.0f GFLOPS f32 (fused multiply-adds)\n", omp_get_max_threads(), kIsa, best / 1e9);
}
