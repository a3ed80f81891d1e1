// What packing a weight into the products' panels costs (rnnc/panels.h's
// pack_panels, once per call and orientation: docs/codegen.md, "Per-step
// products"): W^T, the forward's orientation (transposed, 16 x 16 tiles) and W
// (backward's), best of 100, on the team OMP_NUM_THREADS gives, each checked
// against the panels' definition. docs/benchmarks/cpu.md quotes it.
//   c++ -O3 -march=native -fopenmp -std=c++20 -Iruntime/include bench/blas/pack.cpp -o pack
//   OMP_NUM_THREADS=1 ./pack [N K]; RNNC_CPU_ISA=avx2 OMP_NUM_THREADS=1 ./pack
#include "rnnc/panels.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  const int64_t N = argc > 2 ? std::atoll(argv[1]) : 1024, K = argc > 2 ? std::atoll(argv[2]) : 256;
  constexpr int64_t P = rnnc::cpu::kPanel<float>;
  std::vector<float> W(size_t(N * K)), panels(size_t(rnnc::cpu::panel_elements<float>(N, K)));
  for (size_t i = 0; i < W.size(); ++i) W[i] = float(i % 1000) * 0.25f;
  int wrong = 0;
  for (bool transposed : {true, false}) {
    double best = 1e30;
    for (int run = 0; run < 100; ++run) {
      const auto start = std::chrono::steady_clock::now();
      rnnc::cpu::pack_panels(transposed, N, K, W.data(), panels.data());
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    for (int64_t p = 0; p < (N + P - 1) / P; ++p)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < P; ++j) {
          const int64_t n = p * P + j;
          const float want = n >= N ? 0.0f : transposed ? W[size_t(n * K + k)] : W[size_t(k * N + n)];
          wrong += panels[size_t((p * K + k) * P + j)] != want;
        }
    std::printf("%s of [%lld x %lld]: %.1f us, %d threads%s\n", transposed ? "W^T" : "W", (long long)N,
                (long long)K, best, omp_get_max_threads(), wrong ? ", WRONG" : "");
  }
  return wrong ? 1 : 0;
}
