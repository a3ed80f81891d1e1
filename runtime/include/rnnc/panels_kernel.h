// The panel-product kernel text of rnnc/panels.h, included by it once per
// instruction set inside a namespace that defines Vec<E> (the vector type, its
// lanes, a tile's rows and vectors, load, broadcast, fma, zero, store) and
// under that instruction set's target. Not for including elsewhere, and on
// purpose without #pragma once.

/// Rows [0, MR) and VR vectors of columns of C: w[v] is vector v's first
/// element in the panels (its k-th at w[v] + k·P). K fused multiply-adds per
/// element, k in order; `cols` < VR · lanes stores only the first cols.
template <class E, int MR, int VR>
inline void tile(int64_t K, const E *A, const E *const *w, E *C, int64_t ldc, int64_t cols) {
  using T = Vec<E>;
  using V = typename T::V;
  constexpr int64_t P = kPanel<E>;
  V acc[MR][VR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < VR; ++v) acc[r][v] = T::zero();
  for (int64_t k = 0; k < K; ++k) {
    V b[VR];
#pragma GCC unroll 4
    for (int v = 0; v < VR; ++v) b[v] = T::load(w[v] + k * P);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V a = T::broadcast(A + r * K + k);
#pragma GCC unroll 4
      for (int v = 0; v < VR; ++v) acc[r][v] = T::fma(a, b[v], acc[r][v]);
    }
  }
  if (cols == VR * T::kLanes) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < VR; ++v) T::store(C + r * ldc + v * T::kLanes, acc[r][v]);
    return;
  }
  alignas(64) E row[VR * T::kLanes];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) { // unrolled, as every loop over acc: it stays in registers
#pragma GCC unroll 4
    for (int v = 0; v < VR; ++v) T::store(row + v * T::kLanes, acc[r][v]);
    std::copy_n(row, cols, C + r * ldc);
  }
}

/// Rows MR at a time: one tile, its rows 1 .. kRows picked at run time.
template <class E, int VR, int MR = Vec<E>::kRows>
inline void rows_of(int64_t m, int64_t K, const E *A, const E *const *w, E *C, int64_t ldc, int64_t cols) {
  if constexpr (MR > 1)
    if (m < MR) return rows_of<E, VR, MR - 1>(m, K, A, w, C, ldc, cols);
  tile<E, MR, VR>(K, A, w, C, ldc, cols);
}

/// Columns [c0, c1) of rows [0, M) of C (c0 a multiple of a tile's columns):
/// for each tile of columns, every block of rows, so that the tile's panels
/// stay in the first-level cache while A's rows stream by.
template <class E>
inline void columns(int64_t M, int64_t K, const E *A, const E *panels, E *C, int64_t ldc, int64_t c0, int64_t c1) {
  using T = Vec<E>;
  constexpr int64_t P = kPanel<E>, L = T::kLanes, width = T::kVectors * L;
  static_assert(T::kVectors == 2, "a tile's last columns take one vector or two");
  for (int64_t c = c0; c < c1; c += width) {
    const int64_t cols = std::min(width, c1 - c);
    const E *w[T::kVectors];
    for (int v = 0; v < T::kVectors; ++v) {
      const int64_t n = c + v * L;
      w[v] = panels + (n / P) * K * P + n % P;
    }
    for (int64_t r = 0; r < M; r += T::kRows) {
      const int64_t m = std::min<int64_t>(T::kRows, M - r);
      if (cols > L) rows_of<E, T::kVectors>(m, K, A + r * K, w, C + r * ldc + c, ldc, cols);
      else rows_of<E, 1>(m, K, A + r * K, w, C + r * ldc + c, ldc, cols);
    }
  }
}

/// Rows [0, MR) of a weight gradient G and VR whole vectors of its columns,
/// G[i][c] += Σ_r D[r·ldd + i] · X[r·ldx + c] over r in [0, R): G's value
/// first, then one fused multiply-add per r, in order (the scalar fallback's
/// chain). D's MR values of a step are one broadcast each, X's columns a load.
template <class E, int MR, int VR>
inline void gradient_tile(int64_t R, const E *D, int64_t ldd, const E *X, int64_t ldx, E *G, int64_t ldg) {
  using T = Vec<E>;
  using V = typename T::V;
  V acc[MR][VR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < VR; ++v) acc[i][v] = T::load(G + i * ldg + v * T::kLanes);
  for (int64_t r = 0; r < R; ++r) {
    V b[VR];
#pragma GCC unroll 4
    for (int v = 0; v < VR; ++v) b[v] = T::load(X + r * ldx + v * T::kLanes);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V a = T::broadcast(D + r * ldd + i);
#pragma GCC unroll 4
      for (int v = 0; v < VR; ++v) acc[i][v] = T::fma(a, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < VR; ++v) T::store(G + i * ldg + v * T::kLanes, acc[i][v]);
}

/// gradient_tile with its rows 1 .. kRows picked at run time.
template <class E, int VR, int MR = Vec<E>::kRows>
inline void gradient_rows_of(int64_t m, int64_t R, const E *D, int64_t ldd, const E *X, int64_t ldx, E *G, int64_t ldg) {
  if constexpr (MR > 1)
    if (m < MR) return gradient_rows_of<E, VR, MR - 1>(m, R, D, ldd, X, ldx, G, ldg);
  gradient_tile<E, MR, VR>(R, D, ldd, X, ldx, G, ldg);
}

/// Rows [m0, m1) of G[M][N] += Dᵀ · X (D [R][M], X [R][N]), blocked as a
/// GEMM is: columns in groups of at most kGroup, steps in chunks of at most
/// kChunk. Each (group, chunk) of X is copied into column blocks of contiguous
/// steps (xs, 256 KiB of floats: second-level cache) and each tile's D rows
/// into MR contiguous values per step (ds), so that a tile streams its
/// kChunk steps from the first-level cache instead of striding by whole rows;
/// G is loaded and stored once per (group, chunk). A tile continues every
/// element's chain from where the last chunk stored it (the same bits as one
/// pass); columns past the last whole vector are the scalar fallback's.
template <class E>
inline void gradient_rows(int64_t M, int64_t N, int64_t R, const E *D, const E *X, E *G, int64_t m0, int64_t m1) {
  using T = Vec<E>;
  constexpr int64_t L = T::kLanes, width = T::kVectors * L, MR = T::kRows, kTiles = 8;
  constexpr int64_t kGroup = 256, kChunk = 256;
  const int64_t vectors = N / L * L;
  thread_local std::vector<E> xs, ds;
  xs.resize(size_t(kChunk * kGroup));
  ds.resize(size_t(kChunk * MR * kTiles));
  for (int64_t g0 = 0; g0 < vectors; g0 += kGroup) {
    const int64_t g1 = std::min(vectors, g0 + kGroup);
    for (int64_t r0 = 0; r0 < R; r0 += kChunk) {
      const int64_t steps = std::min(kChunk, R - r0);
      const E *d = D + r0 * M, *x = X + r0 * N;
      for (int64_t c = g0; c < g1; c += width) { // block c: [steps][w], w = its columns
        const int64_t w = std::min(width, g1 - c);
        E *to = xs.data() + (c - g0) * steps;
        for (int64_t r = 0; r < steps; ++r) std::copy_n(x + r * N + c, w, to + r * w);
      }
      for (int64_t i0 = m0; i0 < m1; i0 += MR * kTiles) {
        const int64_t tiles = std::min<int64_t>(kTiles, (m1 - i0 + MR - 1) / MR);
        for (int64_t t = 0; t < tiles; ++t) { // tile t: [steps][MR], rows past m1 zero
          E *to = ds.data() + t * steps * MR;
          const int64_t rows = std::min<int64_t>(MR, m1 - i0 - t * MR);
          for (int64_t r = 0; r < steps; ++r)
            for (int64_t j = 0; j < MR; ++j) to[r * MR + j] = j < rows ? d[r * M + i0 + t * MR + j] : E(0);
        }
        for (int64_t c = g0; c < g1; c += width) {
          const int64_t w = std::min(width, g1 - c);
          const E *xt = xs.data() + (c - g0) * steps;
          for (int64_t t = 0; t < tiles; ++t) {
            const int64_t i = i0 + t * MR, m = std::min<int64_t>(MR, m1 - i);
            const E *dt = ds.data() + t * steps * MR;
            if (w == width) gradient_rows_of<E, T::kVectors>(m, steps, dt, MR, xt, w, G + i * N + c, N);
            else gradient_rows_of<E, 1>(m, steps, dt, MR, xt, w, G + i * N + c, N);
          }
        }
      }
    }
  }
  scalar_gradient(M, N, R, D, X, G, m0, m1, vectors, N);
}
