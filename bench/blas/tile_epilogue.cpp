// Would the LSTM's pointwise work pay for being applied inside the product's
// tile (issue 22, deliver 2)? One forward step at I = H (W_hh h[t-1] and the
// gates), one thread, two ways, on the generated code's own kernels
// (rnnc/panels.h) and math (rnnc/cpu.h):
//  - apart: as the generated code runs a step: the product of all 4H columns
//    into a [B][4H] buffer, then the fused kernel's two sweeps (the gates'
//    sums into a one-step buffer, then the cell, storing the six values
//    backward keeps and c, h);
//  - in the tile: W's rows interleaved by 16 units (their i, f, g, o rows in
//    four consecutive 16-column panels), and each such group's product, up to
//    64 rows at a time, followed at once by those 16 units' cell while its
//    [rows][64] tile is in the first-level cache: the gate buffer never leaves
//    it. (A true epilogue would run inside the micro-kernel; this one pays a
//    call per group, so it bounds what the fusion can save from below.)
// Both compute the same h; the program checks it. "product" is the product alone. docs/benchmarks/cpu.md quotes it.
//   c++ -O3 -march=native -std=c++20 -Iruntime/include bench/blas/tile_epilogue.cpp -o tile_epilogue
//   ./tile_epilogue [H]
#include "rnnc/cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

using namespace rnnc::cpu;

struct Step {
  int64_t B, H;
  std::vector<float> W, panels, tiled, pre, bias, h, c, gates, sums, saved, c1, h1;

  Step(int64_t B_, int64_t H_) : B(B_), H(H_) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 1 / std::sqrt(float(H)));
    W.resize(size_t(4 * H * H));
    for (float &w : W) w = normal(rng);
    pre.resize(size_t(B * 4 * H));
    for (float &v : pre) v = normal(rng);
    bias.resize(size_t(4 * H));
    for (float &v : bias) v = normal(rng);
    h.resize(size_t(B * H));
    c.resize(size_t(B * H));
    for (float &v : h) v = normal(rng);
    for (float &v : c) v = normal(rng);
    panels.resize(size_t(panel_elements<float>(4 * H, H)));
    pack_panels(true, 4 * H, H, W.data(), panels.data());
    // Row 64·g + 16·q + j of the interleaved W is row q·H + 16·g + j of W: gate q of unit 16·g + j.
    std::vector<float> interleaved(W.size());
    for (int64_t u = 0; u < H; ++u)
      for (int64_t q = 0; q < 4; ++q)
        std::copy_n(&W[size_t((q * H + u) * H)], H, &interleaved[size_t((u / 16 * 64 + q * 16 + u % 16) * H)]);
    tiled.resize(panels.size());
    pack_panels(true, 4 * H, H, interleaved.data(), tiled.data());
    gates.resize(size_t(B * 4 * H));
    sums.resize(size_t(B * 4 * H));
    saved.resize(size_t(6 * B * H));
    c1.resize(size_t(B * H));
    h1.resize(size_t(B * H));
  }

  /// The cell at unit u of row r from its four gate sums.
  void cell(int64_t r, int64_t u, float i, float f, float g, float o) {
    const float si = sigmoid(i), sf = sigmoid(f), tg = fast_tanh(g), so = sigmoid(o);
    const float cn = sf * c[size_t(r * H + u)] + si * tg, tc = fast_tanh(cn);
    float *s = &saved[size_t(r * H + u)];
    s[0] = sf, s[B * H] = si, s[2 * B * H] = tg, s[3 * B * H] = so, s[4 * B * H] = tc, s[5 * B * H] = cn;
    c1[size_t(r * H + u)] = cn;
    h1[size_t(r * H + u)] = so * tc;
  }

  void apart() {
    panel_product(B, 4 * H, H, h.data(), panels.data(), gates.data(), 4 * H);
    for (int64_t r = 0; r < B; ++r) {
      const float *p = &pre[size_t(r * 4 * H)], *m = &gates[size_t(r * 4 * H)];
      float *s = &sums[size_t(r * 4 * H)];
#pragma omp simd
      for (int64_t i = 0; i < 4 * H; ++i) s[i] = m[i] + p[i] + bias[size_t(i)];
#pragma omp simd
      for (int64_t u = 0; u < H; ++u) cell(r, u, s[u], s[H + u], s[2 * H + u], s[3 * H + u]);
    }
  }

  void inTile() {
    alignas(64) float tile[64 * 64];
    for (int64_t g = 0; g < H / 16; ++g) {
      for (int64_t r0 = 0; r0 < B; r0 += 64) {
        const int64_t rows = std::min<int64_t>(64, B - r0);
        panel_product(rows, 64, H, h.data() + r0 * H, tiled.data() + g * 64 * H, tile, 64);
        for (int64_t r = r0; r < r0 + rows; ++r) {
          const float *t = tile + (r - r0) * 64, *pr = &pre[size_t(r * 4 * H)];
#pragma omp simd
          for (int64_t j = 0; j < 16; ++j) {
            const int64_t u = g * 16 + j;
            cell(r, u, t[j] + pr[u] + bias[size_t(u)], t[16 + j] + pr[H + u] + bias[size_t(H + u)],
                 t[32 + j] + pr[2 * H + u] + bias[size_t(2 * H + u)], t[48 + j] + pr[3 * H + u] + bias[size_t(3 * H + u)]);
          }
        }
      }
    }
  }
};

template <class F> double best_us(F f, int steps) {
  double best = 1e30;
  for (int round = 0; round < 15; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) f();
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / steps);
  }
  return best;
}

} // namespace

int main(int argc, char **argv) {
  const int64_t H = argc > 1 ? std::atoll(argv[1]) : 256;
  std::printf("LSTM forward step, H = %lld, one thread, best of 15 rounds (us per step)\n", (long long)H);
  std::printf("%5s %10s %10s %10s %10s %8s\n", "B", "product", "apart", "in tile", "ratio", "max|dh|");
  for (int64_t B : {1, 8, 32, 64, 256}) {
    Step s(B, H);
    s.apart();
    std::vector<float> h = s.h1;
    s.inTile();
    double diff = 0;
    for (size_t i = 0; i < h.size(); ++i) diff = std::max(diff, double(std::fabs(h[i] - s.h1[i])));
    const int steps = int(std::max<int64_t>(3, 20000 * 256 * 256 / (H * H) / B)); // about 5 ms a round at H = 256
    const double product = best_us([&] { panel_product(B, 4 * H, H, s.h.data(), s.panels.data(), s.gates.data(), 4 * H); },
                                   steps);
    const double a = best_us([&] { s.apart(); }, steps), t = best_us([&] { s.inTile(); }, steps);
    std::printf("%5lld %10.2f %10.2f %10.2f %9.3fx %8.1e\n", (long long)B, product, a, t, a / t, diff);
  }
}
