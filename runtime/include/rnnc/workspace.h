// What the host code of every target's bundle shares: the workspace layout
// (Carver), the ring slots, the per-thread error text, and the checks of
// sizes and index inputs. Header-only, no dependencies beyond the C++ library.
#pragma once

#include "rnnc/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace rnnc::host {

/// rnnc/scalar.h on the host, for the masks' key (mask_words).
namespace scalar {
namespace math {
using std::exp;
using std::log1p;
using std::max;
using std::min;
inline double fast_exp(double x) { return std::exp(x); }
} // namespace math
#define RNNC_SCALAR inline
#include "rnnc/scalar.h"
#undef RNNC_SCALAR
} // namespace scalar

/// The words a model with masks keeps in its workspace (Workspace::rng): the
/// key of this call's masks (low, high) and 1 in training; options NULL is
/// evaluation.
inline void mask_words(const rnnc_run_options *options, unsigned words[3]) {
  const unsigned long long key = options ? scalar::mask_key(options->seed, options->call) : 0;
  words[0] = static_cast<unsigned>(key);
  words[1] = static_cast<unsigned>(key >> 32);
  words[2] = options && options->train ? 1u : 0u;
}

/// The reason the last call failed, per thread (rnnc_model::last_error).
inline std::string &last_error() {
  static thread_local std::string text;
  return text;
}

inline int fail_too_large(int64_t T, int64_t B) {
  last_error() = "T = " + std::to_string(T) + ", B = " + std::to_string(B) +
                 ": T and B must be at least 1 and the workspace must fit in 2^46 bytes";
  return 1;
}

/// backward of a forward-only build (rnnc compile --forward-only).
inline int fail_no_backward(const char *model) {
  last_error() = std::string(model) + " was compiled forward-only (rnnc compile --forward-only): it has no backward";
  return 1;
}

/// backward given no inputs: it takes forward's again (ABI version 7).
inline int fail_no_inputs(const char *model, int k) {
  last_error() = std::string(model) + ": backward needs the inputs forward was given (inputs" +
                 (k < 0 ? std::string(" is NULL)") : "[" + std::to_string(k) + "] is NULL)");
  return 1;
}

// Sequences of their own lengths (docs/lengths.md, "The steps past the end").

/// The rows of step t that a --lengths model computes: those up to its last
/// sequence still running (len > t), all B before the first step. Sorted
/// longest first, as PyTorch packs a batch, these are the running ones exactly.
inline int64_t running_rows(const int32_t *lengths, int64_t B, int64_t t) {
  if (t < 0) return B;
  int64_t n = B;
  while (n > 0 && lengths[n - 1] <= t) --n;
  return n;
}

/// Rows [r0, r1) (row r is step r / B of sequence r % B) cut into maximal
/// spans: `run(a, b)` for each span of running rows (running_rows of its step),
/// `stopped(a, b)` for each span past its sequence's end, in row order.
template <class Run, class Stopped>
inline void running_spans(const int32_t *lengths, int64_t B, int64_t r0, int64_t r1, Run run, Stopped stopped) {
  int64_t open = r0; // the running span not yet given to run
  for (int64_t r = r0; r < r1;) {
    const int64_t t = r >= 0 ? r / B : -((B - 1 - r) / B);
    const int64_t step_end = std::min(r1, (t + 1) * B);
    const int64_t running_end = std::max(r, std::min(step_end, t * B + running_rows(lengths, B, t)));
    if (running_end < step_end) { // the step stops early: close the span there
      if (open < running_end) run(open, running_end);
      stopped(running_end, step_end);
      open = step_end;
    }
    r = step_end;
  }
  if (open < r1) run(open, r1);
}

/// Pieces (first row, rows) of running rows, in row order.
using RowSpans = std::vector<std::pair<int64_t, int64_t>>;

/// The running rows of [r0, r1) (running_spans) up to `chunk` at a time:
/// `f(spans, n)` with their pieces and n, their count; `stopped(a, b)` for
/// the rest, as running_spans gives them.
template <class F, class Stopped>
inline void running_chunks(const int32_t *lengths, int64_t B, int64_t r0, int64_t r1, int64_t chunk, F f,
                           Stopped stopped) {
  RowSpans spans;
  int64_t n = 0;
  running_spans(
      lengths, B, r0, r1,
      [&](int64_t a, int64_t b) {
        while (a < b) {
          const int64_t take = std::min(b - a, chunk - n);
          spans.push_back({a, take});
          n += take;
          a += take;
          if (n == chunk) {
            f(spans, n);
            spans.clear();
            n = 0;
          }
        }
      },
      stopped);
  if (n) f(spans, n);
}

/// The rows of `spans` of a [*][width] array (row 0 at `a`) copied, in order, to `packed`; and back
/// (converted where one side is stored in 16 bits: rnnc/half.h). Row by row across the OpenMP
/// team when they are many: a copy on one core is the serial part of a packed product, which the
/// other core would spend waiting (docs/benchmarks/cpu.md#sequence-lengths).
constexpr int64_t kParallelCopy = int64_t(1) << 16; // elements
inline const int64_t *packed_sources(const RowSpans &spans, int64_t &n) {
  thread_local std::vector<int64_t> rows; // packed row k is row rows[k]
  rows.clear();
  for (auto [first, count] : spans)
    for (int64_t r = first; r < first + count; ++r) rows.push_back(r);
  n = int64_t(rows.size());
  return rows.data(); // the caller's thread's: read by the team through this pointer
}
template <class S, class E> inline void gather_rows(const RowSpans &spans, const S *a, int64_t width, E *packed) {
  int64_t n = 0;
  const int64_t *rows = packed_sources(spans, n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * width >= kParallelCopy)
#endif
  for (int64_t k = 0; k < n; ++k) std::copy_n(a + rows[k] * width, width, packed + k * width);
}
template <class E, class S> inline void scatter_rows(const RowSpans &spans, const E *packed, int64_t width, S *a) {
  int64_t n = 0;
  const int64_t *rows = packed_sources(spans, n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * width >= kParallelCopy)
#endif
  for (int64_t k = 0; k < n; ++k) std::copy_n(packed + k * width, width, a + rows[k] * width);
}

/// A bias's gradient over R rows: g[i] += Σ_r d[r][i] for i < width ([R][width], 16-bit
/// storage converted as it is read), each g[i] one chain of additions over r in order whatever
/// the thread count: across the OpenMP team when the rows are many, each thread its own columns
/// (whole 64-byte lines of floats), so both cores stream the gradients a weight's sums read.
template <class S, class E> inline void column_sums(int64_t R, int64_t width, const S *d, E *g) {
  const auto columns = [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = c0; i < c1; ++i) g[i] += d[r * width + i];
  };
#ifdef _OPENMP
  if (R * width >= kParallelCopy && width >= 32) {
#pragma omp parallel
    {
      const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
      const int64_t per = ((width + 15) / 16 + team - 1) / team * 16;
      columns(std::min(width, me * per), std::min(width, (me + 1) * per));
    }
    return;
  }
#endif
  columns(0, width);
}

/// A product of every step at once over the running rows of [r0, r1) only,
/// read and written in place: `product(rows, in, out)` computes those rows of
/// `out` ([*][out_width]) from those of `in` ([*][in_width]), where `rows` is
/// a count (the rows are one piece; in and out at its first row) or the pieces
/// (RowPieces, rnnc/panels.h: first row and rows; in and out at row 0). The
/// other rows are zeros.
template <class SI, class SO, class Product>
inline void running_product(const int32_t *lengths, int64_t B, int64_t r0, int64_t r1, const SI *in, int64_t in_width,
                            SO *out, int64_t out_width, Product product) {
  RowSpans pieces;
  running_spans(
      lengths, B, r0, r1, [&](int64_t a, int64_t b) { pieces.push_back({a, b - a}); },
      [&](int64_t a, int64_t b) { std::fill(out + a * out_width, out + b * out_width, SO(0)); });
  if (pieces.size() == 1) return product(pieces[0].second, in + pieces[0].first * in_width, out + pieces[0].first * out_width);
  if (!pieces.empty()) product(pieces, in, out);
}

/// A weight gradient of every step at once, Σ over the running rows of
/// [r0, r1) of d[r] x[r]^T: `gradient(n, d, x)` adds n rows' ([*][d_width]
/// and [*][x_width]); the rows of a chunk in one piece in place, else packed
/// into `scratch` (E, the compute type) first.
template <class SD, class SX, class E, class Gradient>
inline void packed_gradient(const int32_t *lengths, int64_t B, int64_t r0, int64_t r1, int64_t chunk, const SD *d,
                            int64_t d_width, const SX *x, int64_t x_width, E *scratch, Gradient gradient) {
  running_chunks(
      lengths, B, r0, r1, chunk,
      [&](const RowSpans &spans, int64_t n) {
        if (spans.size() == 1) return gradient(n, d + spans[0].first * d_width, x + spans[0].first * x_width);
        gather_rows(spans, d, d_width, scratch);
        gather_rows(spans, x, x_width, scratch + n * d_width);
        gradient(n, static_cast<const E *>(scratch), static_cast<const E *>(scratch + n * d_width));
      },
      [](int64_t, int64_t) {});
}

/// Lengths given to a model compiled without --lengths.
inline int fail_no_lengths(const char *model) {
  last_error() = std::string(model) + " was compiled without --lengths: it cannot take sequence lengths";
  return 1;
}

/// forward's options->loss_scale (0 or no options: 1) into `scale`, for
/// backward's loss seed. False with the reason in last_error() when it is
/// negative or not finite.
template <class Real> inline bool keep_loss_scale(const rnnc_run_options *options, Real *scale) {
  const double s = options ? options->loss_scale : 0;
  if (!(s >= 0) || !std::isfinite(s)) {
    last_error() = "loss_scale = " + std::to_string(s) + ": it must be finite and not negative (0 means 1)";
    return false;
  }
  *scale = static_cast<Real>(s > 0 ? s : 1);
  return true;
}

/// The steps each sequence runs, from options->lengths (NULL: all T), checked
/// to be in 1..T, into `lengths` [B]; `weight` = T·B / Σ lengths, the loss's
/// weight at a valid step (the loss is a mean over the valid steps). False
/// with the reason in last_error().
template <class Real>
inline bool sequence_lengths(const rnnc_run_options *options, int64_t T, int64_t B, int32_t *lengths, Real *weight) {
  const int32_t *given = options ? options->lengths : nullptr;
  int64_t valid = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = given ? given[b] : T;
    if (len < 1 || len > T) {
      last_error() = "lengths[" + std::to_string(b) + "] = " + std::to_string(len) + " is not in 1.." + std::to_string(T) +
                     " (T = " + std::to_string(T) + ")";
      return false;
    }
    lengths[b] = static_cast<int32_t>(len);
    valid += len;
  }
  *weight = static_cast<Real>(static_cast<double>(T * B) / static_cast<double>(valid));
  return true;
}

/// Every index in [0, range); else the error names the input and the position.
inline bool check_indices(const int32_t *x, int64_t n, int64_t range, const char *input) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] < 0 || x[i] >= range) {
      char text[160];
      std::snprintf(text, sizeof text, "input %s: index %d at position %lld is out of range [0, %lld)", input, x[i],
                    static_cast<long long>(i), static_cast<long long>(range));
      last_error() = text;
      return false;
    }
  return true;
}

/// Lays out arrays of rows × B × width, 64-byte aligned, checking every size.
class Carver {
public:
  static constexpr int64_t kMaxBytes = int64_t(1) << 46;
  /// Rows of B sequences at most: BLAS and cuBLAS take int dimensions, and the
  /// hoisted GEMMs and the gradient sums span all (T + pad) · B rows at once.
  static constexpr int64_t kMaxRows = (int64_t(1) << 31) - 1;
  Carver(void *base, int64_t T, int64_t B) : base_(static_cast<char *>(base)), T_(T), B_(B) {
    ok_ = T >= 1 && B >= 1 && T <= kMaxRows && B <= kMaxRows && T * B <= kMaxRows;
  }
  /// An array of (perT · T + pad) rows of B × width elements.
  template <class E> E *take(int64_t perT, int64_t pad, int64_t width) {
    if (!ok_) return nullptr;
    const __int128 rows = (__int128(perT) * T_ + pad) * B_;
    __int128 bytes = rows * width * __int128(sizeof(E));
    if (rows > kMaxRows || bytes > kMaxBytes || at_ + bytes > kMaxBytes) {
      ok_ = false;
      return nullptr;
    }
    E *p = base_ ? reinterpret_cast<E *>(base_ + at_) : nullptr;
    at_ += (static_cast<int64_t>(bytes) + 63) / 64 * 64;
    return p;
  }
  /// An array of n elements, whatever T and B.
  template <class E> E *take_fixed(int64_t n) {
    if (!ok_) return nullptr;
    E *p = base_ ? reinterpret_cast<E *>(base_ + at_) : nullptr;
    at_ += (n * static_cast<int64_t>(sizeof(E)) + 63) / 64 * 64;
    return p;
  }
  int64_t bytes() const { return ok_ ? std::max<int64_t>(at_, 64) : 0; }

private:
  char *base_;
  int64_t T_, B_;
  int64_t at_ = 0;
  bool ok_ = true;
};

/// Rows of B sequences a CPU bundle's block of steps holds, about: the
/// hoisted products and the weight gradients run once per block inside their
/// loop, so their buffers keep a block, not all T (docs/codegen.md). Tests
/// build with a small value to run many blocks.
#ifndef RNNC_BLOCK_ROWS
#define RNNC_BLOCK_ROWS 512
#endif

/// The steps of a block: ⌈RNNC_BLOCK_ROWS / B⌉, at most T, at least 1.
inline int64_t block_steps(int64_t T, int64_t B) {
  const int64_t steps = B >= RNNC_BLOCK_ROWS ? 1 : (RNNC_BLOCK_ROWS + B - 1) / B;
  return T < steps ? (T < 1 ? 1 : T) : steps;
}

/// The slot of `step` in a ring of `ring` steps (steps before the first wrap around).
inline int64_t ring_slot(int64_t step, int64_t ring) { return ((step % ring) + ring) % ring; }

/// The slot of `step` in a final state's seed of T steps that keeps its last
/// k: 1 .. k for steps T - k .. T - 1, else 0, whose rows hold zeros.
inline int64_t seed_slot(int64_t step, int64_t T, int64_t k) { return step >= T - k ? step - (T - k) + 1 : 0; }

/// The mean of n values, summed in double.
template <class E> inline double mean_of(const E *a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i];
  return s / static_cast<double>(n);
}

} // namespace rnnc::host
