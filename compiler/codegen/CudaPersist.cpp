// Persistent loops: which loop stages have the variant, its device helpers,
// the cooperative kernel of a stage and the stage function that picks it.
// The kernel reuses the fused kernels' bodies as they are (grid-stride loops
// over a step's rows, correct for any grid), so every cell the step-by-step
// loop runs, layer norm and softmax included, runs persistent too; only the
// products are new code.
#include "codegen/CudaPersist.h"

#include "codegen/CPrinter.h"
#include "codegen/CudaPrinter.h"
#include "codegen/CudaScan.h"
#include "codegen/HostCode.h"
#include "support/Crash.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <set>

namespace rnnc::codegen {

namespace {

bool isProduct(const KernelIR &k) { return k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT; }

// The helpers, after the prelude's warp_sum. A GPU's grid barrier counts the
// arrivals and the barriers passed in two words of the workspace; the
// emulator's is its own (tests/emulator/include/emulator.h).
const char *kPersistPrelude = R"cuda(
// Persistent loops (docs/cuda.md#persistent-loops): one cooperative kernel for
// all T steps, each block keeping its slice of the loop's weights on chip.
#ifdef RNNC_CUDA_EMULATOR // tests/emulator: its blocks, its barrier
__device__ __forceinline__ real *dynamic_shared() { return static_cast<real *>(rnnc_emulator::dynamic_shared()); }
__device__ __forceinline__ void grid_sync(unsigned *) { rnnc_emulator::grid_sync(); }
#else
__device__ __forceinline__ real *dynamic_shared() {
  extern __shared__ real4 rnnc_shared[]; // 16-byte aligned
  return reinterpret_cast<real *>(rnnc_shared);
}
// A barrier of every block of a cooperative launch: barrier[0] counts the
// blocks arrived, barrier[1] the barriers passed (both 0 at the launch). The
// last block to arrive resets the count, then opens the next generation.
__device__ __forceinline__ void grid_sync(unsigned *barrier) {
  __syncthreads(); // the block is done with this phase
  if (threadIdx.x == 0) {
    volatile unsigned *passed = barrier + 1;
    const unsigned generation = *passed;
    __threadfence(); // the block's writes, and the read above, before its arrival
    if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
      atomicExch(barrier, 0u);
      __threadfence();
      atomicAdd(barrier + 1, 1u);
    } else {
      while (*passed == generation) __nanosleep(32);
    }
    __threadfence(); // the other blocks' writes before this one goes on
  }
  __syncthreads();
}
#endif

// The block's share of n outputs: [first, first + count), count at most ceil(n / gridDim.x).
// The persistent kernel indexes in 32 bits (rnnc/persistent.h's indicesFit says where it may run).
struct Slice {
  int first, count;
};
__device__ __forceinline__ Slice block_slice(int n) {
  const int first = int(blockIdx.x * int64_t(n) / gridDim.x), end = int((blockIdx.x + 1) * int64_t(n) / gridDim.x);
  return {first, end - first};
}

// The block's rows of a product's `outputs`: in each piece of `unit` rows, the
// rows of its units s (an LSTM's i, f, g and o rows of the same hidden units);
// with unit = outputs, one piece: the slice s of the outputs. Row o of them:
__device__ __forceinline__ int owned_row(Slice s, int unit, int o) { return o / s.count * unit + s.first + o % s.count; }

// A value kept on chip holds, per sequence, only the block's units of each piece:
// element i of its row (a unit the block owns) is there at owned_row's inverse.
__device__ __forceinline__ int chip_element(Slice s, int unit, int i) { return i / unit * s.count + i % unit - s.first; }

)cuda";

// The products of a float or double model: FMA, the weights as they are.
const char *kFmaProduct = R"cuda(
// A product's input as the product multiplies it: as it is.
__device__ __forceinline__ real product_operand(real x) { return x; }
// The weights a block keeps of a product: its rows, each the whole reduction.
__device__ __forceinline__ int tile_rows(int rows) { return rows; }
__device__ __forceinline__ int tile_reduce(int reduce) { return reduce; }

// The weights of the block's rows into shared memory, w[o][j] for o < its rows,
// j < reduce: rows of W [outputs][reduce], or (transposed) columns of W [reduce][outputs].
__device__ void persist_load(const real *__restrict__ W, bool transposed, int outputs, int reduce, int unit, Slice s,
                             real *__restrict__ w) {
  const int rows = outputs / unit * s.count;
  for (int e = threadIdx.x; e < rows * reduce; e += blockDim.x) {
    const int o = e / reduce, j = e % reduce, row = owned_row(s, unit, o);
    w[e] = transposed ? W[j * outputs + row] : W[row * reduce + j];
  }
}

// The block's rows of one step's product: out[r][row(o)] = sum_j w[o][j] in[r][j]
// for the m rows (sequences) of the step, zero for rows running <= r (--lengths: past
// their end); on_chip: out[r][o], the block's rows in its shared memory. A warp per
// (row, output), its lanes over j, summed in a fixed order. (No scratch: that is the
// tensor cores'.)
__device__ void persist_product(const real *__restrict__ w, Slice s, int unit, int reduce, const real *__restrict__ in,
                                real *__restrict__ out, int outputs, int m, int running, bool on_chip, real *) {
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int rows = outputs / unit * s.count;
  for (int e = threadIdx.x >> 5; e < m * rows; e += warps) {
    const int r = e / rows, o = e % rows;
    real v = 0;
    if (r < running) {
      for (int j = lane; j < reduce; j += 32) v += w[o * reduce + j] * in[r * reduce + j];
      v = warp_sum(v);
    }
    if (lane == 0) out[on_chip ? r * rows + o : r * outputs + owned_row(s, unit, o)] = v;
  }
}
)cuda";

// A 16-bit model's operands for the tensor cores: mma.sync m16n8k16, two 16-bit
// values a register; %TYPE% becomes the model's 16-bit type (bf16, f16).
const char *kHalfFragments = R"cuda(
// The tensor cores' operands: 16-bit weights, inputs rounded to 16 bits (a state is float).
typedef store weight;
template <class In> __device__ __forceinline__ real product_operand(In x) { return store(real(x)); }
__device__ __forceinline__ store weight_of(real x) { return x; }
__device__ __forceinline__ store zero_weight() { return 0.0f; }
constexpr int kTileK = 16;       // mma.sync m16n8k16
constexpr int kPerRegister = 2; // two 16-bit values a register, the lower column of A (row of B) in the low half
__device__ __forceinline__ float half_of(unsigned pair, int high) {
  store v;
  v.bits = (unsigned short)(high ? pair >> 16 : pair & 0xffffu);
  return float(v);
}
// Column (of A; row of B) k's value in the register holding it.
__device__ __forceinline__ float fragment_value(unsigned pair, int k) { return half_of(pair, k & 1); }
// The instruction (mma_tile), and its emulation (tests/emulator).
#define RNNC_MMA "mma.sync.aligned.m16n8k16.row.col.f32.%TYPE%.%TYPE%.f32"
#ifdef RNNC_CUDA_EMULATOR
__device__ __forceinline__ void emulated_mma(float d[4], const unsigned a[4], const unsigned b[2]) {
  rnnc_emulator::mma_m16n8k16(d, a, b, [](unsigned short bits) { return half_of(bits, 0); });
}
#endif
)cuda";
const char *kHalfLoads = R"cuda(
// Two 16-bit values of one register: `lo` in the low half.
__device__ __forceinline__ unsigned pack2(store lo, store hi) { return unsigned(lo.bits) | unsigned(hi.bits) << 16; }
__device__ __forceinline__ unsigned load_pair(const store *p) { return *reinterpret_cast<const unsigned *>(p); }

// Lane l's registers of a 16 x 16 tile of A at `at` (row-major, rows kpad apart): rows
// l/4 and l/4 + 8, columns 2(l%4) + {0, 1} and those + 8.
__device__ __forceinline__ void load_a(const store *at, int kpad, int lane, unsigned a[4]) {
  const int j = (lane & 3) * 2;
  a[0] = load_pair(at + j), a[1] = load_pair(at + 8 * kpad + j), a[2] = load_pair(at + j + 8);
  a[3] = load_pair(at + 8 * kpad + j + 8);
}
// Lane l's registers of the 16 x 8 tile of B whose column (sequence) l/4 is its row `r`
// of the input: rows j0 + 2(l%4) + {0, 1} and those + 8.
template <class In>
__device__ __forceinline__ void load_b(const In *in, int r, int j0, int reduce, int running, int lane, unsigned b[2]) {
  const int j = j0 + (lane & 3) * 2;
  b[0] = pack2(product_input(in, r, j, reduce, running), product_input(in, r, j + 1, reduce, running));
  b[1] = pack2(product_input(in, r, j + 8, reduce, running), product_input(in, r, j + 9, reduce, running));
}
)cuda";

// --tf32 (a float model built with it, RNNC_TF32): mma.sync m16n8k8 with TF32 operands.
const char *kTf32Fragments = R"cuda(
// The tensor cores' operands: TF32 (float's exponent, 10 bits of mantissa), rounded to
// nearest, ties away, as cuBLAS's TF32 GEMMs take them; the weights rounded once.
typedef real weight;
__device__ __forceinline__ float to_tf32(float x) {
#if defined(RNNC_CUDA_EMULATOR) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  unsigned u = __float_as_uint(x);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return __uint_as_float(u);
#else
  unsigned u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
  return __uint_as_float(u);
#endif
}
__device__ __forceinline__ real product_operand(real x) { return to_tf32(x); }
__device__ __forceinline__ real weight_of(real x) { return to_tf32(x); }
__device__ __forceinline__ real zero_weight() { return 0; }
constexpr int kTileK = 8;       // mma.sync m16n8k8
constexpr int kPerRegister = 1; // a TF32 value a register
__device__ __forceinline__ float fragment_value(unsigned bits, int) { return __uint_as_float(bits); }
// The instruction (mma_tile), and its emulation (tests/emulator).
#define RNNC_MMA "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
#ifdef RNNC_CUDA_EMULATOR
__device__ __forceinline__ void emulated_mma(float d[4], const unsigned a[4], const unsigned b[2]) {
  rnnc_emulator::mma_m16n8k8_tf32(d, a, b);
}
#endif
)cuda";
const char *kTf32Loads = R"cuda(
// Lane l's registers of a 16 x 8 tile of A at `at` (row-major, rows kpad apart): rows
// l/4 and l/4 + 8, columns l%4 and l%4 + 4.
__device__ __forceinline__ void load_a(const real *at, int kpad, int lane, unsigned a[4]) {
  const int j = lane & 3;
  a[0] = __float_as_uint(at[j]), a[1] = __float_as_uint(at[8 * kpad + j]), a[2] = __float_as_uint(at[j + 4]);
  a[3] = __float_as_uint(at[8 * kpad + j + 4]);
}
// Lane l's registers of the 8 x 8 tile of B whose column (sequence) l/4 is its row `r`
// of the input: rows j0 + l%4 and j0 + l%4 + 4.
__device__ __forceinline__ void load_b(const real *in, int r, int j0, int reduce, int running, int lane, unsigned b[2]) {
  const int j = j0 + (lane & 3);
  b[0] = __float_as_uint(product_input(in, r, j, reduce, running));
  b[1] = __float_as_uint(product_input(in, r, j + 4, reduce, running));
}
)cuda";

// The persistent products on tensor cores: the weights' tiles, the input's elements
// and the shuffle version of mma after the operands of the model's type (kHalfFragments
// or kTf32Fragments: weight, kTileK, kPerRegister, product_operand, weight_of,
// fragment_value, RNNC_MMA, emulated_mma) and the mma itself (mma_tile), then
// (kTensorProductLoop) the product after its fragments' loads (kHalfLoads or
// kTf32Loads: load_a, load_b).
const char *kTensorProduct = R"cuda(
// The weights a block keeps of a product: its rows and its reduction as whole tiles.
__device__ __forceinline__ int tile_rows(int rows) { return (rows + 15) / 16 * 16; }
__device__ __forceinline__ int tile_reduce(int reduce) { return (reduce + kTileK - 1) / kTileK * kTileK; }

// The weights of the block's rows into shared memory as whole tiles: w[o][j] for o
// below tile_rows(its rows), j below tile_reduce(reduce) (kpad), zero past its rows and
// reduce; rows of W [outputs][reduce], or (transposed) columns of W [reduce][outputs].
template <class Weights>
__device__ void persist_load(const Weights *__restrict__ W, bool transposed, int outputs, int reduce, int unit, Slice s,
                             weight *__restrict__ w) {
  const int rows = outputs / unit * s.count, kpad = tile_reduce(reduce), padded = tile_rows(rows);
  for (int e = threadIdx.x; e < padded * kpad; e += blockDim.x) {
    const int o = e / kpad, j = e % kpad;
    weight v = zero_weight();
    if (o < rows && j < reduce)
      v = weight_of(transposed ? W[j * outputs + owned_row(s, unit, o)] : W[owned_row(s, unit, o) * reduce + j]);
    w[e] = v;
  }
}

// Element j of row r of a product's input as the tensor cores take it (product_operand),
// zero past the reduction and for the rows past the last one running.
template <class In>
__device__ __forceinline__ weight product_input(const In *__restrict__ in, int r, int j, int reduce, int running) {
  return r < running && j < reduce ? weight_of(product_operand(in[r * reduce + j])) : zero_weight();
}

// The tensor cores' d += A B in FMA (GPUs before sm_80; the emulator with RNNC_SHUFFLE_MMA):
// each lane gathers its rows of A and columns of B by shuffles. Column k of A (row k of
// B) is in lane k % (4 kPerRegister) / kPerRegister of a group of 4, register k / (4
// kPerRegister) of B and twice that (plus 1 for rows + 8) of A.
__device__ __forceinline__ void mma_shuffle(float d[4], const unsigned a[4], const unsigned b[2]) {
  const int lane = threadIdx.x & 31, group = lane >> 2, column = (lane & 3) * 2;
#pragma unroll
  for (int k = 0; k < kTileK; ++k) {
    const int from = k % (4 * kPerRegister) / kPerRegister, q = k / (4 * kPerRegister);
    const float a0 = fragment_value(__shfl_sync(0xffffffffu, a[2 * q], group * 4 + from), k);      // A[group][k]
    const float a1 = fragment_value(__shfl_sync(0xffffffffu, a[2 * q + 1], group * 4 + from), k);  // A[group + 8][k]
    const float b0 = fragment_value(__shfl_sync(0xffffffffu, b[q], column * 4 + from), k);         // B[k][column]
    const float b1 = fragment_value(__shfl_sync(0xffffffffu, b[q], column * 4 + 4 + from), k);     // B[k][column + 1]
    d[0] += a0 * b0;
    d[1] += a0 * b1;
    d[2] += a1 * b0;
    d[3] += a1 * b1;
  }
}

// d += A B on the warp's tensor cores (RNNC_MMA; d 16 x 8 in float: lane l holds rows
// l/4 and l/4 + 8, columns 2(l%4) + {0, 1}); before sm_80 (no such mma), and under the
// emulator with RNNC_SHUFFLE_MMA, by shuffles.
__device__ __forceinline__ void mma_tile(float d[4], const unsigned a[4], const unsigned b[2]) {
#if defined(RNNC_CUDA_EMULATOR) && !defined(RNNC_SHUFFLE_MMA)
  emulated_mma(d, a, b);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(RNNC_SHUFFLE_MMA)
  asm volatile(RNNC_MMA " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  mma_shuffle(d, a, b);
#endif
}

// Element i of lane `lane`'s tile `tile` of a product's result: output o, sequence r.
__device__ __forceinline__ void tile_put(real *__restrict__ out, Slice s, int unit, int rows, int row_tiles, int outputs,
                                         int m, bool on_chip, int tile, int lane, int i, real v) {
  const int o = tile % row_tiles * 16 + (lane >> 2) + 8 * (i >> 1), r = tile / row_tiles * 8 + (lane & 3) * 2 + (i & 1);
  if (o < rows && r < m) out[on_chip ? r * rows + o : r * outputs + owned_row(s, unit, o)] = v;
}

)cuda";
const char *kTensorProductLoop = R"cuda(
// The block's rows of one step's product: out[r][row(o)] = sum_j w[o][j] in[r][j] for the
// m rows (sequences) of the step, zero for rows running <= r; on_chip: out[r][o], the
// block's rows in its shared memory. A warp per tile of 16 outputs by 8 sequences, the
// reduction kTileK at a time; where the tiles are fewer than the warps, each tile's
// reduction is split among warps, whose partial tiles `scratch` holds (8 x 128 floats)
// and one sum adds in a fixed order.
template <class In>
__device__ void persist_product(const weight *__restrict__ w, Slice s, int unit, int reduce, const In *__restrict__ in,
                                real *__restrict__ out, int outputs, int m, int running, bool on_chip,
                                real *__restrict__ scratch) {
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int rows = outputs / unit * s.count, kpad = tile_reduce(reduce), steps = kpad / kTileK;
  const int row_tiles = (rows + 15) / 16, tiles = row_tiles * ((m + 7) / 8);
  const int splits = tiles >= warps ? 1 : steps < warps / tiles ? steps : warps / tiles;
  for (int item = threadIdx.x >> 5; item < tiles * splits; item += warps) {
    const int tile = item / splits, split = item % splits;
    const weight *a = w + (tile % row_tiles * 16 + (lane >> 2)) * kpad;
    const int r = tile / row_tiles * 8 + (lane >> 2); // the sequence of this lane's column of B
    float d[4] = {0, 0, 0, 0};
    for (int k = steps * split / splits; k < steps * (split + 1) / splits; ++k) {
      unsigned A[4], B[2];
      load_a(a + k * kTileK, kpad, lane, A);
      load_b(in, r, k * kTileK, reduce, running, lane, B);
      mma_tile(d, A, B);
    }
    for (int i = 0; i < 4; ++i)
      if (splits == 1) tile_put(out, s, unit, rows, row_tiles, outputs, m, on_chip, tile, lane, i, d[i]);
      else scratch[item * 128 + lane * 4 + i] = d[i];
  }
  if (splits == 1) return;
  __syncthreads(); // every warp's partial tile is in
  for (int e = threadIdx.x; e < tiles * 128; e += blockDim.x) {
    real v = 0;
    for (int split = 0; split < splits; ++split) v += scratch[(e >> 7) * splits * 128 + split * 128 + (e & 127)];
    tile_put(out, s, unit, rows, row_tiles, outputs, m, on_chip, e >> 7, (e & 127) >> 2, e & 3, v);
  }
}
)cuda";

// The fused variant's product: like persist_product, its weights read from global memory.
const char *kFusedProduct = R"cuda(
// The block's rows of one step's product in a fused loop's kernel (its weights in
// global memory, read once a launch for every four rows): out[r][row(o)] =
// sum_j W[row(o)][j] in[r][j], or W[j][row(o)] transposed, zero for rows running <= r;
// on_chip: out[r][o], as persist_product's. Its operands as the persistent kernel's and
// cuBLAS's tensor cores take them (product_operand: a 16-bit model's input rounded to 16
// bits, TF32's both operands rounded to TF32).
template <class Weight, class In>
__device__ void fused_product(const Weight *__restrict__ W, bool transposed, Slice s, int unit, int reduce,
                              const In *__restrict__ in, real *__restrict__ out, int outputs, int m, int running,
                              bool on_chip) {
  const int rows = outputs / unit * s.count, quads = (m + 3) / 4;
  if (transposed) {
    // W [reduce][outputs]: a thread per (output, four rows), consecutive threads on
    // consecutive columns of W, each summing j in order.
    for (int e = threadIdx.x; e < rows * quads; e += blockDim.x) {
      const int o = e % rows, r0 = e / rows * 4, row = owned_row(s, unit, o);
      real v[4] = {0, 0, 0, 0};
      for (int j = 0; j < reduce; ++j) {
        const real w = product_operand(W[j * outputs + row]);
        for (int q = 0; q < 4; ++q)
          if (r0 + q < running) v[q] += w * product_operand(in[(r0 + q) * reduce + j]);
      }
      for (int q = 0; q < 4 && r0 + q < m; ++q) out[on_chip ? (r0 + q) * rows + o : (r0 + q) * outputs + row] = v[q];
    }
    return;
  }
  // W [outputs][reduce]: a warp per (output, four rows), its lanes over j, summed
  // in persist_product's order.
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int e = threadIdx.x >> 5; e < rows * quads; e += warps) {
    const int o = e % rows, r0 = e / rows * 4, row = owned_row(s, unit, o);
    real v[4] = {0, 0, 0, 0};
    for (int j = lane; j < reduce; j += 32) {
      const real w = product_operand(W[row * reduce + j]);
      for (int q = 0; q < 4; ++q)
        if (r0 + q < running) v[q] += w * product_operand(in[(r0 + q) * reduce + j]);
    }
    for (int q = 0; q < 4 && r0 + q < m; ++q) {
      const real sum = warp_sum(v[q]);
      if (lane == 0) out[on_chip ? (r0 + q) * rows + o : (r0 + q) * outputs + row] = sum;
    }
  }
}
)cuda";

// --lengths: the rows of a step still running, as rnnc/workspace.h's running_rows.
const char *kRunningRows = R"cuda(
// The rows of step t the products compute (rnnc/workspace.h's running_rows):
// up to the last sequence still running, all B before the first step.
__device__ __forceinline__ int running_rows(const int32_t *lengths, int B, int64_t t) {
  if (t < 0) return B;
  int n = B;
  while (n > 0 && lengths[n - 1] <= t) --n;
  return n;
}
)cuda";

} // namespace

CudaPersistPrinter::CudaPersistPrinter(const Program &p, const SourceManager &sm, int stage)
    : p_(p), sm_(sm), stage_(stage), s_(p.stages[stage]), shape_(shape(p, stage)) {
  RNNC_ASSERT(shape_.persistent(), "not a stage with a persistent variant");
}

bool CudaPersistPrinter::persistent(const Program &p, int stage, std::string *why) {
  auto no = [&](const char *reason) {
    if (why) *why = reason;
    return false;
  };
  const StageIR &s = p.stages[stage];
  if (!s.loop) return no("not a loop");
  if (CudaScanPrinter::runsInParallel(p, stage)) return no("it runs in parallel over time");
  RNNC_ASSERT(p.gridBarrierWords >= 2 * static_cast<int64_t>(p.stages.size()), "plan-memory gave the grid barriers no memory");
  for (int k : s.kernels) {
    const KernelIR &kernel = p.kernels[k];
    if (kernel.kind != KernelIR::Kind::Fused && !isProduct(kernel)) return no("a weight gradient inside the loop");
  }
  return true;
}

namespace {

/// Narrower units would leave most multiprocessors idle (a width-1 value in
/// the step makes U = 1): the blocks then own slices of each product instead.
constexpr int64_t kMinUnits = 16;

} // namespace

int64_t CudaPersistPrinter::unitWidth(const Program &p, int stage, std::string *why) {
  auto no = [&](const std::string &reason) -> int64_t {
    if (why) *why = reason;
    return 0;
  };
  if (!persistent(p, stage, why)) return 0;
  const StageIR &st = p.stages[stage];
  // What the loop writes (each product's output, each fused store), and U: the
  // widest width that divides every sweep and every product's outputs.
  std::set<int> written;
  int64_t unit = 0;
  std::string reason;
  for (int k : st.kernels) {
    const KernelIR &kernel = p.kernels[k];
    if (isProduct(kernel)) {
      written.insert(kernel.out);
      unit = std::gcd(unit, p.buffers[kernel.out].width);
      continue;
    }
    forEachSweep(kernel, [&](const Sweep &s) {
      if (s.kind != Sweep::Kind::Map && reason.empty())
        reason = fmt::format("{} reduces over a whole row: a sum, mean or softmax", kernel.name);
      unit = std::gcd(unit, s.width);
      for (const Instr &in : s.body)
        if (in.store >= 0) written.insert(in.store);
    });
  }
  if (!reason.empty()) return no(reason);
  if (unit < kMinUnits)
    return no(fmt::format("its units would be {} wide: no common divisor of its widths is {} or more", unit, kMinUnits));
  // Each element of a sweep belongs to unit i mod U; every value the loop
  // writes must be read at the same unit (a shift by whole pieces of U).
  for (int k : st.kernels) {
    const KernelIR &kernel = p.kernels[k];
    if (isProduct(kernel)) continue;
    forEachSweep(kernel, [&](const Sweep &s) {
      for (const Instr &in : s.body) {
        if (in.op == Op::Embed || ((in.op == Op::Slice || in.op == Op::Pad) && in.offset % unit))
          reason = fmt::format("{} moves elements across units ({})", kernel.name, opMnemonic(in.op));
        if (in.op == Op::Concat)
          for (int64_t piece : in.pieces)
            if (piece % unit) reason = fmt::format("{} concatenates pieces narrower than a unit", kernel.name);
        if (in.store >= 0 && (p.buffers[in.store].width % unit || in.storeShift % unit))
          reason = fmt::format("{} stores a value narrower than a unit", kernel.name);
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load && written.count(o.buffer) &&
              (o.scalar || o.shift % unit || p.buffers[o.buffer].width % unit))
            reason = fmt::format("{} reads {} at another unit", kernel.name, p.buffers[o.buffer].name);
      }
    });
  }
  if (!reason.empty()) return no(reason);
  // Between two grid barriers a block may run ahead into the fused kernels after a
  // product (cyclically: the next step's kernels before it) while others still read
  // the product's input: none of those may write the rows it reads. A buffer with a
  // row per step is safe; a ring is where the writer runs in the same step (its slot
  // is t, the product's t - delay); one step's rows never are.
  const size_t n = st.kernels.size();
  for (size_t i = 0; i < n; ++i) {
    const KernelIR &product = p.kernels[st.kernels[i]];
    if (!isProduct(product)) continue;
    const Buffer &in = p.buffers[product.a];
    if (in.rowsPerStep() == 1) continue;
    for (size_t j = (i + 1) % n; j != i && !isProduct(p.kernels[st.kernels[j]]); j = (j + 1) % n) {
      const bool sameStepRing = in.ring && j > i && product.aDelay % in.ring != 0;
      forEachSweep(p.kernels[st.kernels[j]], [&](const Sweep &s) {
        for (const Instr &instr : s.body)
          if (instr.store == product.a && !sameStepRing)
            reason = fmt::format("{} writes {} while other blocks' {} may still read it", p.kernels[st.kernels[j]].name,
                                 in.name, product.name);
      });
    }
  }
  if (!reason.empty()) return no(reason);
  // Blocks synchronize only at the products: no two values of the loop may share memory.
  std::set<int> used = written;
  for (int k : st.kernels) {
    const KernelIR &kernel = p.kernels[k];
    if (isProduct(kernel)) used.insert(kernel.a);
    else
      forEachSweep(kernel, [&](const Sweep &s) {
        for (const Instr &in : s.body)
          for (const Operand &o : in.args)
            if (o.kind == Operand::Kind::Load) used.insert(o.buffer);
      });
  }
  std::map<int, int> memoryOf; // root of the shares chain -> a buffer of the loop there
  for (int b : used) {
    auto [at, fresh] = memoryOf.emplace(memoryOwner(p, b, true), b);
    if (!fresh) return no(fmt::format("{} and {} share memory", p.buffers[at->second].name, p.buffers[b].name));
  }
  return unit;
}

bool CudaPersistPrinter::anyPersistent(const Program &p) {
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (persistent(p, static_cast<int>(s))) return true;
  return false;
}

bool CudaPersistPrinter::inPersistentStage(const Program &p, int kernel) {
  for (size_t s = 0; s < p.stages.size(); ++s)
    for (int k : p.stages[s].kernels)
      if (k == kernel && persistent(p, static_cast<int>(s))) return true;
  return false;
}

std::string CudaPersistPrinter::kernelName(int stage) { return fmt::format("persist_{}", stage); }

std::string CudaPersistPrinter::devicePrelude(const Program &p) {
  bool fused = false;
  for (size_t s = 0; s < p.stages.size(); ++s) fused |= !fusedKernelNames(p, static_cast<int>(s)).empty();
  // FMA for float and double (tensor cores for float under --tf32: RNNC_TF32), tensor cores for 16 bits.
  std::string products = std::string("#if defined(RNNC_TF32) && !defined(RNNC_REAL_DOUBLE)\n") + kTf32Fragments +
                         kTensorProduct + kTf32Loads + kTensorProductLoop + "#else\n" + kFmaProduct + "#endif\n";
  if (isHalf(p.dtype)) {
    products = std::string(kHalfFragments) + kTensorProduct + kHalfLoads + kTensorProductLoop;
    const std::string type = p.dtype == DType::BF16 ? "bf16" : "f16";
    for (size_t at; (at = products.find("%TYPE%")) != std::string::npos;) products.replace(at, 6, type);
  }
  return std::string(kPersistPrelude) + products + (fused ? kFusedProduct : "") + (p.hasLengths ? kRunningRows : "");
}

CudaPersistPrinter::FusedPlan CudaPersistPrinter::fusedPlan(const Program &p, int stage) {
  FusedPlan plan;
  if (!unitWidth(p, stage)) return plan;
  for (int k : p.stages[stage].kernels)
    if (isProduct(p.kernels[k])) plan.launches.push_back({k});
    else if (plan.launches.empty()) plan.lead.push_back(k);
    else plan.launches.back().push_back(k);
  if (plan.launches.empty()) std::swap(plan.lead, plan.launches.emplace_back());
  if (!plan.lead.empty()) plan.names.push_back(fmt::format("step_{}_start", stage));
  for (size_t j = 0; j < plan.launches.size(); ++j) plan.names.push_back(fmt::format("step_{}_{}", stage, j));
  return plan;
}

std::vector<std::string> CudaPersistPrinter::fusedKernelNames(const Program &p, int stage) { return fusedPlan(p, stage).names; }

OnChip CudaPersistPrinter::onChip(const Program &p, int stage, int64_t unit) {
  OnChip chip;
  if (!unit) return chip;
  // The launch of the fused variant each kernel of the step runs in: 0 before
  // the first product, j + 1 from product j to the next.
  std::map<int, int> launchOf;
  int launch = 0;
  for (int k : p.stages[stage].kernels) launchOf[k] = launch += isProduct(p.kernels[k]);
  // Every kernel of the program that touches each buffer, and whether a product reads it.
  std::map<int, std::set<int>> touching;
  std::set<int> productReads;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelIR &kernel = p.kernels[k];
    const int at = static_cast<int>(k);
    if (kernel.kind != KernelIR::Kind::Fused) {
      for (int b : {kernel.out, kernel.a, kernel.b})
        if (b >= 0) touching[b].insert(at);
      if (kernel.a >= 0) productReads.insert(kernel.a);
      if (kernel.b >= 0) productReads.insert(kernel.b);
      continue;
    }
    forEachSweep(kernel, [&](const Sweep &sw) {
      for (const Instr &in : sw.body) {
        if (in.store >= 0) touching[in.store].insert(at);
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) touching[o.buffer].insert(at);
      }
    });
  }
  auto isPort = [&](int b) {
    for (const auto *ports : {&p.inputs, &p.outputs, &p.states, &p.seeds, &p.inputGrads, &p.stateGrads, &p.stateSeeds})
      for (const PortIR &port : *ports)
        if (port.buffer == b) return true;
    return false;
  };
  int64_t offset = 0;
  for (const auto &[b, kernels] : touching) {
    const Buffer &buffer = p.buffers[b];
    if (!buffer.stepLocal || buffer.half || buffer.index || buffer.width % unit || productReads.count(b) || isPort(b))
      continue;
    std::set<int> launches;
    for (int k : kernels) launches.insert(launchOf.count(k) ? launchOf[k] : -1);
    if (launches.size() != 1 || *launches.begin() < 0) continue;
    chip[b] = {offset, buffer.width / unit};
    offset += buffer.width / unit;
  }
  return chip;
}

CudaPersistPrinter::Shape CudaPersistPrinter::shape(const Program &p, int stage) {
  const StageIR &st = p.stages[stage];
  Shape sh;
  for (int k : st.kernels) {
    const KernelIR &kernel = p.kernels[k];
    if (kernel.kind == KernelIR::Kind::Gemm) sh.products.push_back({kernel.rows, kernel.cols});
    else if (kernel.kind == KernelIR::Kind::GemmT) sh.products.push_back({kernel.cols, kernel.rows});
    else forEachSweep(kernel, [&](const Sweep &sw) { sh.widest = std::max(sh.widest, sw.width); });
  }
  sh.launches = static_cast<int>(st.kernels.size());
  sh.realBytes = p.dtype == DType::F64 ? 8 : isHalf(p.dtype) ? 2 : 4;
  sh.chipBytes = p.dtype == DType::F64 ? 8 : 4;
  sh.tensorCores = isHalf(p.dtype);
  if (!persistent(p, stage, &sh.whyNot)) return sh;
  sh.unit = unitWidth(p, stage, &sh.whyNotUnits);
  sh.barriers = sh.unit ? static_cast<int>(sh.products.size()) : sh.launches;
  sh.fused = static_cast<int>(fusedPlan(p, stage).launches.size());
  sh.chip = onChip(p, stage, sh.unit);
  for (const auto &[buffer, region] : sh.chip) sh.chipPieces += region.pieces;
  return sh;
}

int64_t CudaPersistPrinter::Shape::stepwiseWeightBytes() const {
  int64_t bytes = 0;
  for (const persist::Product &pr : products) bytes += pr.outputs * pr.reduce * realBytes;
  return bytes;
}

persist::Loop CudaPersistPrinter::Shape::loop() const {
  return {products.empty() ? nullptr : products.data(), static_cast<int>(products.size()), launches, realBytes, barriers, unit,
          widest, fused, chipPieces, chipBytes, tensorCores};
}

std::string CudaPersistPrinter::chipNames() const {
  std::string names;
  for (const auto &[buffer, region] : shape_.chip) names += (names.empty() ? "" : ", ") + p_.buffers[buffer].name;
  return names;
}

std::string CudaPersistPrinter::chipArgument(const KernelIR &k) const { return touchesChip(k, shape_.chip) ? ", chip" : ""; }

CudaPersistPrinter::Operands CudaPersistPrinter::operands(const KernelIR &k) const {
  Operands o;
  const Buffer &in = p_.buffers[k.a], &out = p_.buffers[k.out];
  o.in = fmt::format("ws.{} + {}", in.name, CPrinter::rowOffset(in, k.aDelay, "r0"));
  o.out = fmt::format("ws.{} + {}", out.name, CPrinter::rowOffset(out, 0, "r0"));
  if (auto at = shape_.chip.find(k.out); at != shape_.chip.end()) { // the block's rows in its shared memory
    o.out = at->second.offset ? fmt::format("chip + B * {} * units.count", at->second.offset) : "chip";
    o.onChip = "true";
  }
  o.weights = fmt::format("{} + {}", k.dropped ? "ws.dropped" : "P", k.paramOffset);
  o.transposed = k.kind == KernelIR::Kind::GemmT;
  o.outputs = o.transposed ? k.cols : k.rows;
  o.reduce = o.transposed ? k.rows : k.cols;
  RNNC_ASSERT(in.width == o.reduce && out.width == o.outputs, "a product's rows are dense");
  return o;
}

std::string CudaPersistPrinter::kernel() const {
  Writer w;
  KernelIR all; // the equations of every kernel of the loop, for the comment
  for (int k : s_.kernels)
    for (const SourceRange &r : p_.kernels[k].equations) all.equations.push_back(r);
  const int64_t unit = shape_.unit;
  w.line("// {}: stage {}'s loop, t = {}, as one cooperative kernel (docs/cuda.md#persistent-loops)", kernelName(stage_),
         stage_, s_.direction > 0 ? "0 .. T-1" : "T-1 .. 0");
  w.raw(CudaPrinter(p_, sm_).equationsComment(all));
  const bool tensor = shape_.tensorCores;
  w.open("RNNC_KERNEL __launch_bounds__(256) void {}(const Workspace ws, const {} *__restrict__ P, int64_t T, int64_t B, "
         "unsigned *barrier) {{",
         kernelName(stage_), portType(p_));
  if (unit) {
    w.line("// Each block owns a slice of the loop's {} units and keeps the weights of its units' rows", unit);
    w.line("// in shared memory for all T steps; it computes those rows of each product and runs the");
    w.line("// fused kernels for its units. The blocks meet at a grid barrier before each product.");
    w.line("const Slice units = block_slice({});", unit);
  } else {
    w.line("// Each block keeps its slice of the loop's weights in shared memory for all T steps; the");
    w.line("// blocks meet at a grid barrier after each kernel of a step.");
  }
  // The weights, once: each product's rows after the one before, as whole tiles on tensor cores
  // (tile_rows, tile_reduce: the rows themselves with FMA).
  std::string next = tensor ? "reinterpret_cast<store *>(dynamic_shared())" : "dynamic_shared()";
  for (size_t i = 0; i < s_.kernels.size(); ++i) {
    const KernelIR &k = p_.kernels[s_.kernels[i]];
    if (!isProduct(k)) continue;
    const Operands o = operands(k);
    const int64_t pieces = unit ? o.outputs / unit : 1;
    const std::string slice = unit ? "units" : k.name + "_slice";
    if (unit)
      w.line("// {}: {} [{} x {}], the {} of the block's units{}", k.name, o.weights, k.rows, k.cols,
             o.transposed ? "columns (W^T d)" : "rows (W x)",
             pieces > 1 ? fmt::format(" in each of its {} pieces", pieces) : "");
    else {
      w.line("// {}: {} [{} x {}], the block's {}", k.name, o.weights, k.rows, k.cols,
             o.transposed ? "columns (W^T d)" : "rows (W x)");
      w.line("const Slice {} = block_slice({});", slice, o.outputs);
    }
    w.line("{} *{}_w = {};", tensor ? "store" : "real", k.name, next);
    w.line("persist_load({}, {}, {}, {}, {}, {}, {}_w);", o.weights, o.transposed ? "true" : "false", o.outputs, o.reduce,
           unit ? unit : o.outputs, slice, k.name);
    const int64_t span = unit ? unit : o.outputs;
    const std::string rows = pieces > 1 ? fmt::format("{} * (({} + gridDim.x - 1) / gridDim.x)", pieces, span)
                                        : fmt::format("({} + gridDim.x - 1) / gridDim.x", span);
    next = fmt::format("{}_w + tile_rows({}) * tile_reduce({})", k.name, rows, o.reduce);
  }
  const std::string after = tensor ? fmt::format("reinterpret_cast<real *>({})", next) : next;
  if (!shape_.chip.empty()) {
    w.line("// The step's values that never leave the block ({}), after the weights", chipNames());
    w.line("real *chip = {};", after);
  }
  w.line("// The warps' partial tiles of a product on tensor cores whose reduction they split, after {}",
         shape_.chip.empty() ? "the weights" : "them");
  w.line("real *scratch = {};", shape_.chip.empty() ? after
                                                  : fmt::format("chip + B * {} * ((int64_t({}) + gridDim.x - 1) / gridDim.x)",
                                                                shape_.chipPieces, unit));
  w.line("__syncthreads(); // the weights are in");
  w.open("for (int64_t step = 0; step < T; ++step) {{");
  w.line("const int64_t t = {}, r0 = t * B, r1 = r0 + B;", s_.direction > 0 ? "step" : "T - 1 - step");
  if (p_.hasLengths) w.line("const int running = running_rows(ws.lengths, int(B), t);");
  for (size_t i = 0; i < s_.kernels.size(); ++i) {
    const KernelIR &k = p_.kernels[s_.kernels[i]];
    // Units: a product reads whole states other blocks wrote; a fused kernel only
    // its own units', which its block's threads wrote.
    if (unit)
      w.line(isProduct(k) ? "grid_sync(barrier); // what every block wrote, before the product reads it"
                          : "__syncthreads(); // what the block wrote, before its units read it");
    if (isProduct(k)) {
      const Operands o = operands(k);
      w.line("persist_product({0}_w, {1}, {2}, {3}, {4}, {5}, {6}, int(B), {7}, {8}, scratch); // {0}", k.name,
             unit ? "units" : k.name + "_slice", unit ? unit : o.outputs, o.reduce, o.in, o.out, o.outputs,
             p_.hasLengths ? "running" : "int(B)", o.onChip);
    } else {
      w.line(unit ? "{}_units(ws, P, B, r0, r1, units{});" : "{}_step(ws, P, B, r0, r1);", k.name, chipArgument(k));
    }
    if (!unit) w.line("grid_sync(barrier);");
  }
  bool fused = false;
  for (int k : s_.kernels) fused |= p_.kernels[k].kind == KernelIR::Kind::Fused;
  if (!fused) w.line("(void)r1;");
  w.close();
  w.close();
  return w.take();
}

std::string CudaPersistPrinter::fusedKernels() const {
  const int64_t unit = shape_.unit;
  const FusedPlan plan = fusedPlan(p_, stage_);
  std::string out;
  // The fused kernels' steps for the block's units, a block barrier before each but a launch's first.
  auto units = [&](Writer &w, const std::vector<int> &kernels, const char *rows, bool first) {
    for (int k : kernels) {
      if (!first) w.line("__syncthreads(); // what the block wrote, before its units read it");
      first = false;
      w.line("{}_units(ws, P, B, {}, units{});", p_.kernels[k].name, rows, chipArgument(p_.kernels[k]));
    }
  };
  // Kernel `name`: `kernels` (a product first, or none) for step t, then (`lead`) the next step's lead.
  auto print = [&](const std::string &name, const std::vector<int> &kernels, bool lead, const std::string &what) {
    Writer w;
    KernelIR all; // the equations it computes, for the comment
    for (int k : kernels)
      for (const SourceRange &r : p_.kernels[k].equations) all.equations.push_back(r);
    if (lead)
      for (int k : plan.lead)
        for (const SourceRange &r : p_.kernels[k].equations) all.equations.push_back(r);
    w.line("// {}: stage {}'s loop, {}", name, stage_, what);
    w.raw(CudaPrinter(p_, sm_).equationsComment(all));
    w.open("RNNC_KERNEL __launch_bounds__(256) void {}(const Workspace ws, const {} *__restrict__ P, int64_t B, int64_t t{}) {{",
           name, portType(p_), lead ? ", int64_t next" : "");
    const bool product = !kernels.empty() && isProduct(p_.kernels[kernels.front()]);
    if (product) {
      w.line("// Each block owns a slice of the loop's {} units: their rows of the product, its", unit);
      w.line("// weights read from global memory, then the fused kernels for them{}.", lead ? " and the next step's" : "");
    } else {
      w.line("// Each block owns a slice of the loop's {} units and runs the fused kernels for them.", unit);
    }
    w.line("const Slice units = block_slice({});", unit);
    bool chip = false;
    for (int k : kernels) chip |= touchesChip(p_.kernels[k], shape_.chip) || shape_.chip.count(p_.kernels[k].out);
    if (lead)
      for (int k : plan.lead) chip |= touchesChip(p_.kernels[k], shape_.chip);
    if (chip) w.line("real *chip = dynamic_shared(); // {}: B rows of the block's units each", chipNames());
    if (product) {
      const Operands o = operands(p_.kernels[kernels.front()]);
      w.line("const int64_t r0 = t * B;");
      if (p_.hasLengths) w.line("const int running = running_rows(ws.lengths, int(B), t);");
      w.line("fused_product({0}, {1}, units, {2}, {3}, {4}, {5}, {6}, int(B), {7}, {8}); // {9}", o.weights,
             o.transposed ? "true" : "false", unit, o.reduce, o.in, o.out, o.outputs, p_.hasLengths ? "running" : "int(B)",
             o.onChip, p_.kernels[kernels.front()].name);
      units(w, std::vector<int>(kernels.begin() + 1, kernels.end()), "r0, r0 + B", false);
    } else {
      units(w, kernels, "t * B, (t + 1) * B", true);
    }
    if (lead) {
      w.line("// The next step's kernels before its product (none after the loop's last step).");
      w.line("if (next < 0) return;");
      units(w, plan.lead, "next * B, (next + 1) * B", false);
    }
    w.close();
    out += w.take() + "\n";
  };
  size_t name = 0;
  if (!plan.lead.empty()) print(plan.names[name++], plan.lead, false, "its first step's kernels before the product (the fused variant)");
  for (size_t j = 0; j < plan.launches.size(); ++j, ++name)
    print(plan.names[name], plan.launches[j], j + 1 == plan.launches.size() && !plan.lead.empty(),
          fmt::format("{} (the fused variant: docs/cuda.md#persistent-loops)",
                      plan.launches.size() == 1 ? std::string("a kernel a step")
                                                : fmt::format("launch {} of a step's {}", j + 1, plan.launches.size())));
  return out;
}

void CudaPersistPrinter::stageFunction(Writer &w, const std::vector<std::string> &names) const {
  auto indexOf = [&](const std::string &name) {
    const auto at = std::find(names.begin(), names.end(), name);
    RNNC_ASSERT(at != names.end(), "a kernel missing from kernel_[]");
    return static_cast<int>(at - names.begin());
  };
  const int kernelIndex = indexOf(kernelName(stage_));
  w.line("/// Stage {}{}: a loop over time, t = {}: persistent ({}, one cooperative launch for all", stage_,
         s_.backward ? " (backward)" : "", s_.direction > 0 ? "0 .. T-1" : "T-1 .. 0", kernelName(stage_));
  if (shape_.fused)
    w.line("/// T steps), fused (a kernel a step per product) or its kernels step by step, as rnnc/persistent.h's choice says.");
  else w.line("/// T steps) where rnnc/persistent.h's choice says so, else its kernels step by step.");
  w.open("int stage_{}(const Workspace &ws, const {} *P, real *G, int64_t T, int64_t B, cudaStream_t s, "
         "cublasHandle_t blas) {{",
         stage_, portType(p_));
  std::string list;
  for (const persist::Product &pr : shape_.products)
    list += fmt::format("{}{{{}, {}}}", list.empty() ? "" : ", ", pr.outputs, pr.reduce);
  if (!list.empty())
    w.line("static const rnnc::persist::Product products[] = {{{}}}; // {{outputs, reduce}} of each product", list);
  w.line("// {{products, count, launches a step, bytes of a real, grid barriers a step, units, widest row swept,");
  w.line("//  fused launches a step, values on chip per unit, bytes of one, products on tensor cores}}");
  w.line("const rnnc::persist::Loop loop{{{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}}};", list.empty() ? "nullptr" : "products",
         shape_.products.size(), shape_.launches, shape_.tensorCores ? "2" : "sizeof(real)", shape_.barriers, shape_.unit,
         shape_.widest, shape_.fused, shape_.chipPieces, "sizeof(real)",
         shape_.tensorCores ? "true" : "kTf32 && sizeof(real) == 4");
  w.line("const rnnc::persist::Choice c = persistent_choice(kernel_[{}], \"stage {}\", loop, B);", kernelIndex, stage_);
  w.open("if (c.variant == rnnc::persist::Variant::Persistent) {{");
  w.line("unsigned *barrier = ws.grid_barrier + {};", 2 * stage_);
  w.line("RNNC_CUDA_CHECK(cudaMemsetAsync(barrier, 0, 2 * sizeof(unsigned), s));");
  w.line("if (!launch_cooperative(kernel_[{}], \"{}\", c.grid, 256, static_cast<size_t>(c.shared), s, ws, P, T, B, "
         "barrier)) return 1;",
         kernelIndex, kernelName(stage_));
  w.line("return 0;");
  w.close();
  if (shape_.fused) {
    w.open("if (c.variant == rnnc::persist::Variant::Fused) {{");
    if (!fusedPlan(p_, stage_).lead.empty())
      w.line("if (T > 0 && !launch_shared(kernel_[{}], \"{}\", c.grid, 256, static_cast<size_t>(c.shared), s, ws, P, B, {})) "
             "return 1;",
             indexOf(fusedKernelNames(p_, stage_).front()), fusedKernelNames(p_, stage_).front(),
             s_.direction > 0 ? "int64_t(0)" : "T - 1");
    if (s_.direction > 0) w.open("for (int64_t t = 0; t < T; ++t) {{");
    else w.open("for (int64_t t = T - 1; t >= 0; --t) {{");
    const FusedPlan plan = fusedPlan(p_, stage_);
    const bool lead = !plan.lead.empty();
    for (size_t j = 0; j < plan.launches.size(); ++j) {
      const std::string &name = plan.names[j + lead];
      const bool last = lead && j + 1 == plan.launches.size();
      w.line("if (!launch_shared(kernel_[{}], \"{}\", c.grid, 256, static_cast<size_t>(c.shared), s, ws, P, B, t{})) return 1;",
             indexOf(name), name,
             !last ? "" : s_.direction > 0 ? ", t + 1 < T ? t + 1 : int64_t(-1)" : ", t - 1");
    }
    w.close();
    w.line("return 0;");
    w.close();
  }
  stageLaunches(w, p_, s_, [](const KernelIR &k, const std::string &rows) {
    return fmt::format("if (launch_{}(ws, P, G, B, {}, s, blas)) return 1;", k.name, rows);
  });
  w.line("return 0;").close();
}

namespace {

constexpr int64_t kShownBatches[] = {1, 4, 16, 64, 256};
constexpr int64_t kH100SharedPerSm = 228 << 10;

/// The choice on an H100 (rnnc/persistent.h's h100()): blocks of 256 threads, 8 a multiprocessor at most.
persist::Choice chooseOnH100(const persist::Loop &loop, int64_t B) {
  return persist::choose(loop, persist::h100(), B, persist::Mode::Auto, [](int64_t shared) {
    return static_cast<int>(std::min<int64_t>(8, shared ? kH100SharedPerSm / shared : 8));
  });
}

} // namespace

std::string CudaPersistPrinter::loopsText(const Program &p) {
  std::string out = "cuda loops (rnnc/persistent.h's choice on an H100: 132 SMs, 227 KiB of shared memory a block):\n";
  bool any = false;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const StageIR &st = p.stages[s];
    if (!st.loop) continue;
    any = true;
    const int stage = static_cast<int>(s);
    const Shape sh = shape(p, stage);
    out += fmt::format("  stage {}{}: step by step {} launch{} and {} bytes of weights read a step", s,
                       st.backward ? " (backward)" : "", sh.launches, sh.launches == 1 ? "" : "es", sh.stepwiseWeightBytes());
    if (!sh.persistent()) {
      out += fmt::format("; no persistent variant: {}\n", sh.whyNot);
      continue;
    }
    out += fmt::format("; {}: no launch and no weight read a step, {} grid barrier{} a step, ", kernelName(stage), sh.barriers,
                       sh.barriers == 1 ? "" : "s");
    std::vector<std::string> chip;
    for (const auto &[buffer, region] : sh.chip) chip.push_back(p.buffers[buffer].name);
    out += sh.unit ? fmt::format("each block owning units of {}{}\n    fused ({}): {} launch{} and {} bytes of weights read a step\n",
                                 sh.unit, chip.empty() ? "" : fmt::format(", keeping {} on chip", fmt::join(chip, ", ")),
                                 fmt::join(fusedKernelNames(p, stage), ", "), sh.fused, sh.fused == 1 ? "" : "es",
                                 sh.stepwiseWeightBytes())
                   : fmt::format("each block a slice of each product (not by units: {}); no fused variant\n", sh.whyNotUnits);
    for (int64_t B : kShownBatches) {
      const persist::Choice c = chooseOnH100(sh.loop(), B);
      if (c.variant == persist::Variant::Persistent)
        out += fmt::format("    B = {}: persistent, {} blocks, {} bytes of shared memory each: {}\n", B, c.grid, c.shared, c.why);
      else if (c.variant == persist::Variant::Fused)
        out += fmt::format("    B = {}: fused, {} blocks a launch: {}{}\n", B, c.grid, c.why,
                           c.notPersistent ? fmt::format(" (not persistent: {})", c.notPersistent) : "");
      else
        out += fmt::format("    B = {}: step by step: {}{}\n", B, c.why,
                           c.notPersistent ? fmt::format(" (not persistent: {})", c.notPersistent) : "");
    }
  }
  return any ? out : "";
}

nlohmann::json CudaPersistPrinter::loopsJson(const Program &p) {
  nlohmann::json loops = nlohmann::json::array();
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const StageIR &st = p.stages[s];
    if (!st.loop) continue;
    const int stage = static_cast<int>(s);
    const Shape sh = shape(p, stage);
    nlohmann::json loop = {{"stage", stage},
                           {"backward", st.backward},
                           {"stepwise", {{"launches_per_step", sh.launches}, {"weight_bytes_per_step", sh.stepwiseWeightBytes()}}}};
    if (!sh.persistent()) {
      loop["persistent"] = nullptr;
      loop["fused"] = nullptr;
      loop["why_not"] = sh.whyNot;
    } else {
      loop["persistent"] = {{"kernel", kernelName(stage)},
                            {"launches_per_step", 0},
                            {"weight_bytes_per_step", 0},
                            {"grid_barriers_per_step", sh.barriers},
                            {"units", sh.unit},
                            {"on_chip", nlohmann::json::array()}};
      for (const auto &[buffer, region] : sh.chip) loop["persistent"]["on_chip"].push_back(p.buffers[buffer].name);
      if (!sh.unit) loop["persistent"]["why_not_units"] = sh.whyNotUnits;
      loop["fused"] = sh.fused ? nlohmann::json{{"kernels", fusedKernelNames(p, stage)},
                                                {"launches_per_step", sh.fused},
                                                {"weight_bytes_per_step", sh.stepwiseWeightBytes()}}
                               : nlohmann::json(nullptr);
      nlohmann::json choices = nlohmann::json::array();
      for (int64_t B : kShownBatches) {
        const persist::Choice c = chooseOnH100(sh.loop(), B);
        nlohmann::json choice = {{"batch", B},
                                 {"variant", persist::variantName(c.variant)},
                                 {"grid", c.grid},
                                 {"shared_bytes", c.shared},
                                 {"why", c.why}};
        if (c.notPersistent) choice["not_persistent"] = c.notPersistent;
        choices.push_back(choice);
      }
      loop["h100"] = choices;
    }
    loops.push_back(loop);
  }
  return loops;
}

} // namespace rnnc::codegen
