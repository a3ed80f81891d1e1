// The products' and weight gradients' kernels (runtime/include/rnnc/panels.h): every
// instruction set this CPU has gives the bits of one fused multiply-add chain
// per element, for any shape (rows past a tile, columns past a panel), both
// orientations of W, float and double, and any number of threads; and the bias
// gradients' column sums (rnnc/workspace.h), on one thread and on several.
#include "rnnc/panels.h"
#include "rnnc/half.h"
#include "rnnc/workspace.h"

#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <random>
#include <vector>

using namespace rnnc::cpu;
using panels_detail::Isa;

namespace {

template <class E> struct Case {
  int64_t M, N, K;
  bool transposed; // W is [N][K] (a Gemm kernel's), else [K][N]
  std::vector<E> A, W, panels;

  Case(int64_t m, int64_t n, int64_t k, bool t) : M(m), N(n), K(k), transposed(t), A(m * k), W(n * k) {
    std::mt19937 gen(static_cast<unsigned>(m * 10007 + n * 101 + k * 2 + t));
    std::normal_distribution<double> normal;
    for (E &a : A) a = E(normal(gen));
    for (E &w : W) w = E(normal(gen));
    panels.assign(panel_elements<E>(N, K), E(-7)); // poisoned: pack_panels writes every element
    pack_panels(transposed, N, K, W.data(), panels.data());
  }
  E w(int64_t k, int64_t n) const { return transposed ? W[n * K + k] : W[k * N + n]; }
  /// The reference: one std::fma chain per element, k in order.
  std::vector<E> expected(int64_t ldc) const {
    std::vector<E> C(M * ldc, E(0));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        E sum = 0;
        for (int64_t k = 0; k < K; ++k) sum = std::fma(A[m * K + k], w(k, n), sum);
        C[m * ldc + n] = sum;
      }
    return C;
  }
  std::vector<E> product(Isa isa, int64_t ldc) const {
    std::vector<E> C(M * ldc, E(0));
    panels_detail::product(isa, M, N, K, A.data(), panels.data(), C.data(), ldc);
    return C;
  }
};

std::vector<Isa> isas() {
  std::vector<Isa> all{Isa::Scalar};
  if (panels_detail::widest_isa() >= Isa::Avx2) all.push_back(Isa::Avx2);
  if (panels_detail::widest_isa() >= Isa::Avx512) all.push_back(Isa::Avx512);
  return all;
}

template <class E> void checkEveryIsa() {
  for (int64_t M : {1, 2, 5, 6, 7, 8, 9, 13, 17})
    for (int64_t N : {1, 7, 8, 16, 17, 31, 32, 33, 48, 70})
      for (int64_t K : {1, 3, 16, 37})
        for (bool transposed : {false, true}) {
          Case<E> c(M, N, K, transposed);
          const int64_t ldc = N + 3; // C's rows may be wider than the product
          const std::vector<E> want = c.expected(ldc);
          for (Isa isa : isas()) {
            INFO("M " << M << " N " << N << " K " << K << " transposed " << transposed << " isa " << int(isa));
            CHECK(c.product(isa, ldc) == want);
          }
        }
}

} // namespace

TEST_CASE("pack_panels lays op(W) out as [N / panel][K][panel], zeros past N", "[panels]") {
  Case<float> c(1, 20, 3, true);
  REQUIRE(c.panels.size() == size_t(2 * 3 * 16));
  CHECK(c.panels[0 * 16 + 5] == c.W[5 * 3 + 0]);      // panel 0, k 0, column 5
  CHECK(c.panels[2 * 16 + 15] == c.W[15 * 3 + 2]);    // panel 0, k 2, column 15
  CHECK(c.panels[(3 + 1) * 16 + 3] == c.W[19 * 3 + 1]); // panel 1, k 1, column 19
  CHECK(c.panels[(3 + 1) * 16 + 4] == 0.0f);          // column 20: past N
  Case<double> d(1, 9, 2, false);
  REQUIRE(d.panels.size() == size_t(2 * 2 * 8)); // 8 doubles a panel
  CHECK(d.panels[(2 + 1) * 8 + 0] == d.W[1 * 9 + 8]);
}

namespace {
/// pack_panels against its definition: panel p, k, j holds op(W)[k][16p + j], zero past N.
template <class E> void checkPacking(int64_t N, int64_t K, bool transposed, int threads) {
  Case<E> c(1, N, K, transposed); // packs with the team omp_get_max_threads() gives
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<E> panels(panel_elements<E>(N, K), E(-7));
  pack_panels(transposed, N, K, c.W.data(), panels.data());
  omp_set_num_threads(before);
  constexpr int64_t P = kPanel<E>;
  std::vector<E> want(panels.size());
  for (int64_t p = 0; p < (N + P - 1) / P; ++p)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < P; ++j) want[(p * K + k) * P + j] = p * P + j < N ? c.w(k, p * P + j) : E(0);
  // The first element that differs (not the vectors: Catch2 would print them whole).
  const auto firstWrong = [&](const std::vector<E> &got) {
    return std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
  };
  INFO("N " << N << " K " << K << " transposed " << transposed << " threads " << threads);
  CHECK(firstWrong(panels) == std::ptrdiff_t(want.size()));
  CHECK(firstWrong(c.panels) == std::ptrdiff_t(want.size()));
}
} // namespace

TEST_CASE("pack_panels writes op(W) exactly, tile by tile and on a team", "[panels]") {
  // Shapes with whole 16 x 16 tiles (AVX-512 transposes them in registers), ragged edges
  // in N and K, and weights large enough for the OpenMP team.
  for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {16, 16}, {17, 15}, {33, 47}, {48, 32}, {70, 37}, {1024, 256}, {1000, 250}})
    for (bool transposed : {false, true})
      for (int threads : {1, 3}) {
        checkPacking<float>(N, K, transposed, threads);
        checkPacking<double>(N, K, transposed, threads);
      }
}

TEST_CASE("every ISA's 16 x 16 transpose (pack_panels' W^T) is the transpose", "[panels]") {
  constexpr int64_t ld = 21; // rows of the source wider than the tile
  std::vector<float> from(16 * ld);
  for (size_t i = 0; i < from.size(); ++i) from[i] = float(i);
  for (Isa isa : isas()) {
    if (isa == Isa::Scalar) continue; // packs element by element
    std::vector<float> to(16 * 16, -1.0f);
    if (isa == Isa::Avx512) panels_detail::avx512::transpose16(from.data(), ld, to.data());
    else panels_detail::avx2::transpose16(from.data(), ld, to.data());
    int wrong = 0;
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t c = 0; c < 16; ++c) wrong += to[c * 16 + r] != from[r * ld + c];
    INFO("isa " << int(isa));
    CHECK(wrong == 0);
  }
}

TEST_CASE("every ISA's panel product is the fma chain, bit for bit (float)", "[panels]") { checkEveryIsa<float>(); }
TEST_CASE("every ISA's panel product is the fma chain, bit for bit (double)", "[panels]") { checkEveryIsa<double>(); }

TEST_CASE("a panel product has the same bits on one thread and on several", "[panels]") {
  Case<float> c(32, 1024, 256, true); // enough work for a team
  std::vector<float> one(32 * 1024), many(32 * 1024);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  panel_product(c.M, c.N, c.K, c.A.data(), c.panels.data(), one.data(), c.N);
  omp_set_num_threads(4);
  panel_product(c.M, c.N, c.K, c.A.data(), c.panels.data(), many.data(), c.N);
  omp_set_num_threads(threads);
  CHECK(one == many);
  CHECK(one == c.expected(c.N));
}

namespace {

/// G[M][N] += Dᵀ X over R steps: G starts from values of its own, D [R][M], X [R][N].
template <class E> struct Gradient {
  int64_t M, N, R;
  std::vector<E> D, X, G0;

  Gradient(int64_t m, int64_t n, int64_t r) : M(m), N(n), R(r), D(r * m), X(r * n), G0(m * n) {
    std::mt19937 gen(static_cast<unsigned>(m * 7919 + n * 31 + r));
    std::normal_distribution<double> normal;
    for (E &d : D) d = E(normal(gen));
    for (E &x : X) x = E(normal(gen));
    for (E &g : G0) g = E(normal(gen));
  }
  /// The reference: G's value, then one std::fma per step, r in order.
  std::vector<E> expected() const {
    std::vector<E> G = G0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t r = 0; r < R; ++r) G[i * N + n] = std::fma(D[r * M + i], X[r * N + n], G[i * N + n]);
    return G;
  }
  std::vector<E> run(Isa isa) const {
    std::vector<E> G = G0;
    panels_detail::gradient(isa, M, N, R, D.data(), X.data(), G.data());
    return G;
  }
};

template <class E> void checkGradientEveryIsa() {
  // Rows past a tile (8 on AVX-512, 6 on AVX2) and past a thread's share, columns
  // past a vector and past a group (256), steps past a chunk (256).
  auto check = [](int64_t M, int64_t N, int64_t R) {
    Gradient<E> g(M, N, R);
    const std::vector<E> want = g.expected();
    for (Isa isa : isas()) {
      INFO("M " << M << " N " << N << " R " << R << " isa " << int(isa));
      CHECK(g.run(isa) == want);
    }
  };
  for (int64_t M : {1, 5, 6, 7, 8, 9, 17, 70})
    for (int64_t N : {1, 7, 8, 16, 17, 33, 48})
      for (int64_t R : {1, 3, 40}) check(M, N, R);
  check(9, 17, 600);
  check(70, 33, 513);
  check(9, 300, 270);
  check(17, 529, 3);
}

} // namespace

TEST_CASE("every ISA's weight gradient is G plus the fma chain, bit for bit (float)", "[panels]") {
  checkGradientEveryIsa<float>();
}
TEST_CASE("every ISA's weight gradient is G plus the fma chain, bit for bit (double)", "[panels]") {
  checkGradientEveryIsa<double>();
}

TEST_CASE("a weight gradient has the same bits on one thread and on several", "[panels]") {
  Gradient<float> g(1024, 256, 64); // the LSTM's W_ih at 64 rows: a team's work
  std::vector<float> one = g.G0, many = g.G0;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  weight_gradient(g.M, g.N, g.R, g.D.data(), g.X.data(), one.data());
  omp_set_num_threads(3); // rows that do not split evenly
  weight_gradient(g.M, g.N, g.R, g.D.data(), g.X.data(), many.data());
  omp_set_num_threads(threads);
  CHECK(one == many);
  CHECK(one == g.expected());
}

TEST_CASE("a 16-bit model's products round their float operands to 16 bits first", "[panels][half]") {
  // panel_product<S16> and weight_gradient<S16> (a bf16 or f16 model's) feed a float operand to
  // the sums as its 16-bit value, as cublasGemmEx does on CUDA: the result is the plain product's
  // on the operand rounded beforehand, and differs from the unrounded product's.
  auto check = [](auto s16) {
    using S = decltype(s16);
    Case<float> c(9, 33, 37, true);
    std::vector<float> rounded(c.A.size());
    for (size_t i = 0; i < c.A.size(); ++i) rounded[i] = float(S(c.A[i]));
    std::vector<float> got(c.M * c.N), want(c.M * c.N), plain(c.M * c.N);
    panel_product<S>(c.M, c.N, c.K, c.A.data(), c.panels.data(), got.data(), c.N);
    panel_product(c.M, c.N, c.K, rounded.data(), c.panels.data(), want.data(), c.N);
    panel_product(c.M, c.N, c.K, c.A.data(), c.panels.data(), plain.data(), c.N);
    CHECK(got == want);
    CHECK(got != plain);
    // A 16-bit operand is already its value: rounding it again changes nothing.
    std::vector<S> a16(c.A.begin(), c.A.end());
    std::vector<float> from16(c.M * c.N);
    panel_product<S>(c.M, c.N, c.K, a16.data(), c.panels.data(), from16.data(), c.N);
    CHECK(from16 == want);

    Gradient<float> g(17, 48, 40);
    std::vector<float> d(g.D.size()), x(g.X.size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = float(S(g.D[i]));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(S(g.X[i]));
    std::vector<float> G = g.G0, W = g.G0, P = g.G0;
    weight_gradient<S>(g.M, g.N, g.R, g.D.data(), g.X.data(), G.data());
    weight_gradient(g.M, g.N, g.R, d.data(), x.data(), W.data());
    weight_gradient(g.M, g.N, g.R, g.D.data(), g.X.data(), P.data());
    CHECK(G == W);
    CHECK(G != P);
  };
  check(rnnc::bf16{});
  check(rnnc::f16{});
}

TEST_CASE("a bias's column sums have the same bits on one thread and on several", "[panels]") {
  // 1000 columns: the threads' shares are whole 64-byte lines but the last, which is cut short.
  const int64_t R = 300, width = 1000;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> d(static_cast<size_t>(R * width)), g0(static_cast<size_t>(width));
  for (float &v : d) v = normal(rng);
  for (float &v : g0) v = normal(rng);
  std::vector<float> expected = g0, one = g0, many = g0;
  for (int64_t i = 0; i < width; ++i)
    for (int64_t r = 0; r < R; ++r) expected[i] += d[r * width + i]; // G's value plus one chain over r
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  rnnc::host::column_sums(R, width, d.data(), one.data());
  omp_set_num_threads(3);
  rnnc::host::column_sums(R, width, d.data(), many.data());
  omp_set_num_threads(threads);
  CHECK(one == expected);
  CHECK(many == expected);
}
