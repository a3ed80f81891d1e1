// The LSTM's weight gradient dW [1024 x 256] += Σ_r δ[r]ᵀ x[r] over R = T·B rows,
// timed with the BLAS path the generated code used before (rnnc::cpu::gemm:
// OpenBLAS on tiles fixed by the shape, rnnc/cpu.h) and with rnnc's own kernel
// (weight_gradient, rnnc/panels.h), best of ten calls each, in alternation.
// docs/benchmarks/cpu.md quotes it.
//   c++ -O3 -march=native -fopenmp -std=c++20 -Iruntime/include bench/blas/gradient.cpp -lopenblas -o gradient
//   ./gradient [H]; OMP_NUM_THREADS=1 ./gradient [H]   (H = 256 by default)
#include "rnnc/cpu.h"

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

} // namespace

int main(int argc, char **argv) {
  const int64_t H = argc > 1 ? std::atoll(argv[1]) : 256, M = 4 * H, N = H; // 4H x I, I = H
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::printf("%6s %12s %8s %12s %8s %7s\n", "rows", "gemm us", "GFLOPS", "own us", "GFLOPS", "ratio");
  for (int64_t R : {32, 800, 3200, 6400}) {
    std::vector<float> D(R * M), X(R * N), G(M * N, 0.0f);
    for (float &d : D) d = u(gen);
    for (float &x : X) x = u(gen);
    double blas = 1e9, own = 1e9;
    for (int rep = 0; rep < 10; ++rep) {
      double t0 = now();
      rnnc::cpu::gemm(true, false, M, N, R, D.data(), X.data(), G.data(), 1.0f);
      blas = std::min(blas, now() - t0);
      t0 = now();
      rnnc::cpu::weight_gradient<float>(M, N, R, D.data(), X.data(), G.data());
      own = std::min(own, now() - t0);
    }
    const double gflop = 2.0 * double(R) * M * N / 1e9;
    std::printf("%6lld %12.1f %8.0f %12.1f %8.0f %6.2fx\n", static_cast<long long>(R), blas * 1e6, gflop / blas, own * 1e6,
                gflop / own, blas / own);
  }
}
