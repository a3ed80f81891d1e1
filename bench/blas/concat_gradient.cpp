// Would the LSTM's two weight gradients pay for being one product (issue 22,
// deliver 2)? dW_ih [4H x I] += Σ_r δ[r]ᵀ x[r] and dW_hh [4H x H] += Σ_r δ[r]ᵀ
// h[r-1] over R = T·B rows, I = H, on rnnc's kernel (weight_gradient,
// rnnc/panels.h), timed two ways, best of ten calls each, in alternation:
//  - apart: two calls, as the generated code makes them (δ read twice);
//  - one: one call over the rows [x, h[t-1]] side by side into G [4H x 2H]
//    (the layout a merged kernel would have to split into the two params
//    afterwards; that split is not timed, nor is making the [x, h] rows).
// Both give the same bits (each element one chain over r); the program checks it.
// docs/benchmarks/cpu.md quotes it.
//   c++ -O3 -march=native -fopenmp -std=c++20 -Iruntime/include bench/blas/concat_gradient.cpp -o concat_gradient
//   ./concat_gradient [H]; OMP_NUM_THREADS=1 ./concat_gradient [H]   (H = 256 by default)
#include "rnnc/cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

} // namespace

int main(int argc, char **argv) {
  using rnnc::cpu::weight_gradient;
  const int64_t H = argc > 1 ? std::atoll(argv[1]) : 256, M = 4 * H;
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::printf("dW_ih and dW_hh, H = I = %lld, best of 10 calls (us)\n", (long long)H);
  std::printf("%6s %10s %10s %8s\n", "rows", "apart", "one", "ratio");
  for (int64_t R : {800, 3200, 6400}) {
    std::vector<float> D(size_t(R * M)), X(size_t(R * H)), Hs(size_t(R * H)), XH(size_t(R * 2 * H));
    for (float &d : D) d = u(gen);
    for (float &x : X) x = u(gen);
    for (float &h : Hs) h = u(gen);
    for (int64_t r = 0; r < R; ++r) {
      std::copy_n(&X[size_t(r * H)], H, &XH[size_t(r * 2 * H)]);
      std::copy_n(&Hs[size_t(r * H)], H, &XH[size_t(r * 2 * H + H)]);
    }
    std::vector<float> Gi(size_t(M * H)), Gh(size_t(M * H)), G(size_t(M * 2 * H));
    double apart = 1e30, one = 1e30;
    for (int call = 0; call < 10; ++call) {
      std::fill(Gi.begin(), Gi.end(), 0.0f);
      std::fill(Gh.begin(), Gh.end(), 0.0f);
      double t0 = now();
      weight_gradient(M, H, R, D.data(), X.data(), Gi.data());
      weight_gradient(M, H, R, D.data(), Hs.data(), Gh.data());
      apart = std::min(apart, now() - t0);
      std::fill(G.begin(), G.end(), 0.0f);
      t0 = now();
      weight_gradient(M, 2 * H, R, D.data(), XH.data(), G.data());
      one = std::min(one, now() - t0);
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t c = 0; c < H; ++c)
        if (G[size_t(i * 2 * H + c)] != Gi[size_t(i * H + c)] || G[size_t(i * 2 * H + H + c)] != Gh[size_t(i * H + c)]) {
          std::printf("different bits at (%lld, %lld)\n", (long long)i, (long long)c);
          return 1;
        }
    std::printf("%6lld %10.0f %10.0f %7.3fx\n", (long long)R, apart * 1e6, one * 1e6, apart / one);
  }
}
