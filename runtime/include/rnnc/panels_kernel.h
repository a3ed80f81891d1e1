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
