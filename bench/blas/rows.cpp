// One step's recurrent product of the LSTM (W_hh h[t-1]: W [4H x H], H = 256)
// at the rows a step of a --lengths batch has left, timed with OpenBLAS, with
// a plain dot-form loop that reads W where it is (no packing), and with the
// generated code's own kernels on W packed once (rnnc/panels.h): what a step
// with few sequences still running costs. docs/benchmarks/cpu.md quotes it.
//   c++ -O3 -march=native -fopenmp -std=c++20 -Iruntime/include bench/blas/rows.cpp -lopenblas -o rows
//   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ./rows; OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 ./rows
#include "rnnc/panels.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

using lanes = float __attribute__((vector_size(64))); // 16 floats; GCC splits it where the CPU is narrower

lanes load(const float *p) {
  lanes v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

float total(lanes v) {
  float s = 0;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

/// y[m][n] = Σ_k x[m][k] W[n][k] for M rows (M <= 4), four rows of W at a time.
template <int M> void dots(const float *x, const float *W, float *y, int N, int K) {
  for (int n = 0; n < N; n += 4) {
    lanes acc[M][4] = {};
    for (int k = 0; k < K; k += 16) {
      const lanes w[4] = {load(W + n * K + k), load(W + (n + 1) * K + k), load(W + (n + 2) * K + k),
                          load(W + (n + 3) * K + k)};
      for (int m = 0; m < M; ++m) {
        const lanes xm = load(x + m * K + k);
        for (int j = 0; j < 4; ++j) acc[m][j] += xm * w[j];
      }
    }
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < 4; ++j) y[m * N + n + j] = total(acc[m][j]);
  }
}

void unpacked(int M, const float *x, const float *W, float *y, int N, int K) {
  for (int m = 0; m < M; m += 4) {
    switch (std::min(4, M - m)) {
    case 4: dots<4>(x + m * K, W, y + m * N, N, K); break;
    case 3: dots<3>(x + m * K, W, y + m * N, N, K); break;
    case 2: dots<2>(x + m * K, W, y + m * N, N, K); break;
    default: dots<1>(x + m * K, W, y + m * N, N, K); break;
    }
  }
}

template <class F> double microseconds(F f) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) f();
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / 100);
  }
  return best;
}

} // namespace

int main() {
  const int H = 256, N = 4 * H, K = H, B = 32;
  std::vector<float> W(static_cast<size_t>(N) * K), x(static_cast<size_t>(B) * K), blas(static_cast<size_t>(B) * N),
      own(static_cast<size_t>(B) * N);
  for (size_t i = 0; i < W.size(); ++i) W[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * static_cast<float>(i));
  std::vector<float> panels(rnnc::cpu::panel_elements<float>(N, K)), mine(static_cast<size_t>(B) * N);
  rnnc::cpu::pack_panels(true, N, K, W.data(), panels.data()); // once, as a call of the generated code does
  std::printf("rows  openblas_us  per_row_us  unpacked_us  per_row_us  panels_us  per_row_us  max_difference\n");
  for (int M = 1; M <= B; ++M) {
    const double b = microseconds([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, x.data(), K, W.data(), K, 0.f, blas.data(), N);
    });
    const double u = microseconds([&] { unpacked(M, x.data(), W.data(), own.data(), N, K); });
    const double p = microseconds([&] { rnnc::cpu::panel_product(M, N, K, x.data(), panels.data(), mine.data(), N); });
    double worst = 0;
    for (int i = 0; i < M * N; ++i)
      worst = std::max({worst, static_cast<double>(std::fabs(blas[i] - own[i])), static_cast<double>(std::fabs(blas[i] - mine[i]))});
    std::printf("%4d  %11.1f  %10.2f  %11.1f  %10.2f  %9.1f  %10.2f  %.1e\n", M, b, b / M, u, u / M, p, p / M, worst);
  }
}
