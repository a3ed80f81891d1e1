// The BLAS calls of one LSTM training step (I = H = 256, T = 100), each timed
// alone with OpenBLAS: what the generated code's GEMMs cost before any of its
// own work. docs/benchmarks/cpu.md quotes it.
//   c++ -O2 -std=c++20 bench/blas/shapes.cpp -lopenblas -o shapes && ./shapes 32
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

template <class F> double ms(F f, int reps) {
  f();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / reps;
}

} // namespace

int main(int argc, char **argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 32, T = 100, H = 256, I = 256, G = 4 * H;
  const int rows = T * B;
  std::vector<float> A(static_cast<size_t>(rows) * G, 0.01f), W(static_cast<size_t>(G) * G, 0.02f),
      C(static_cast<size_t>(std::max(rows, G)) * G); // the largest product: rows x 4H, or dW [4H x H]
  // C = op(A) op(W) with C [M][N]; one row is a matrix-vector product, as rnnc::cpu::gemm does it.
  auto run = [&](bool ta, bool tb, int M, int N, int K) {
    if (M == 1 && !ta) {
      if (tb) cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.f, W.data(), K, A.data(), 1, 0.f, C.data(), 1);
      else cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.f, W.data(), N, A.data(), 1, 0.f, C.data(), 1);
      return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.f, A.data(),
                ta ? M : K, W.data(), tb ? K : N, 0.f, C.data(), N);
  };
  double hoisted = ms([&] { run(false, true, rows, G, I); }, 20);  // W_ih x, every step at once
  double step = ms([&] { run(false, true, B, G, H); }, 200);       // W_hh h(t-1), per step
  double stepBack = ms([&] { run(false, false, B, H, G); }, 200);  // W_hh^T delta, per step
  double dx = ms([&] { run(false, false, rows, I, G); }, 20);      // W_ih^T delta, every step at once
  double dW = ms([&] { run(true, false, G, H, rows); }, 20);       // sum delta x^T (twice: W_ih, W_hh)
  double total = hoisted + T * step + T * stepBack + dx + 2 * dW;
  std::printf("B = %d: hoisted %.3f, per step %.4f (x %d = %.2f), per step backward %.4f (x %d = %.2f), "
              "dx %.3f, dW %.3f (x 2); total %.2f ms\n",
              B, hoisted, step, T, T * step, stepBack, T, T * stepBack, dx, dW, total);
}
