// Which way a recurrent loop runs on a GPU (docs/cuda.md#persistent-loops):
// persistent, one cooperative kernel for all T steps whose blocks keep the
// loop's weights in shared memory and meet at grid barriers (one a product
// where each block owns units, one a kernel where not); fused, where blocks
// own units, one kernel a step per product (its blocks' rows of the product,
// read from global memory, then the cell for their units); or step by step, a
// launch per kernel per step (cuBLAS for the products). The generated host
// code asks at run time, with the device it runs on; `rnnc show --schedule
// --target cuda` asks with an H100.
// Plain C++: no CUDA header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace rnnc::persist {

/// What the choice reads of the device (cudaDeviceGetAttribute).
struct Gpu {
  int sms = 0;                      // multiprocessors: one block of the persistent kernel each
  int64_t sharedPerBlock = 0;       // cudaDevAttrMaxSharedMemoryPerBlockOptin, bytes
  bool cooperative = false;         // cudaDevAttrCooperativeLaunch
};

/// The GPU `rnnc show` assumes: an H100 SXM (132 SMs, 227 KiB of shared memory a block).
inline Gpu h100() { return {132, 227 << 10, true}; }

/// One product of a loop step: `outputs` dot products of length `reduce`
/// per sequence, its weights [outputs][reduce] (a GemmT's transposed).
struct Product {
  int64_t outputs = 0, reduce = 0;
};

/// A loop as the choice sees it: its products, the kernels of one step
/// (products and fused kernels: launches step by step), the bytes of a
/// real, the persistent kernel's grid barriers a step, and its units: each
/// block owns a slice of `units` (U) and of every product the rows p·U + u of
/// its units u (an LSTM's i, f, g, o rows of unit u); 0 where the blocks own
/// slices of each product's outputs instead (docs/cuda.md#persistent-loops);
/// and the widest row its blocks' fused kernels sweep (a step's B such rows
/// must have 32-bit indices, as each product's weights and rows must); the
/// launches a step of its fused variant (0: none, its step is not local to
/// units); and the values of a step the persistent and fused kernels keep in
/// shared memory (the products' outputs and the cell's values that only the
/// block's units read within a launch): per sequence and unit a block owns,
/// how many (an LSTM's four gates, a product's output, and their sum: 8).
/// A 16-bit model keeps its weights in 16 bits (`realBytes` 2) and its values
/// on chip in float (`chipBytes` 4). Its persistent kernel multiplies on tensor
/// cores (`tensorCores`: mma.sync m16n8k16), as a float model's does under
/// --tf32 (m16n8k8): each product's rows padded to a tile of 16, its reduction
/// to 16 (TF32: 8), a step's sequences to 8.
struct Loop {
  const Product *products = nullptr;
  int count = 0;
  int kernels = 0;
  int64_t realBytes = 4;
  int barriers = 0;
  int64_t units = 0;
  int64_t widest = 0;
  int fused = 0;
  int64_t onChip = 0;
  int64_t chipBytes = 4;
  bool tensorCores = false;
};

/// The tensor cores' tile: 16 rows of W, 8 sequences, 16 of the reduction for
/// 16-bit operands (mma.sync m16n8k16), 8 for TF32 (m16n8k8).
constexpr int64_t kTileRows = 16, kTileSequences = 8;
inline int64_t tileReduce(const Loop &l) { return l.realBytes == 2 ? 16 : 8; }
inline int64_t roundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
/// The tensor-core product's partial tiles, when its warps split the reduction: a tile of
/// floats for each of the block's 8 warps.
constexpr int64_t kSplitScratchBytes = 8 * kTileRows * kTileSequences * 4;

/// Whether the persistent kernel's 32-bit indices reach every element it
/// indexes: each product's weights, a step's B rows of its inputs and outputs
/// and of the widest row its fused kernels sweep.
inline bool indicesFit(const Loop &l, int64_t B) {
  constexpr int64_t kLimit = int64_t(1) << 31;
  auto fits = [&](int64_t rows, int64_t width) { return width <= (kLimit - 1) / std::max<int64_t>(rows, 1); };
  for (int k = 0; k < l.count; ++k) {
    const Product &p = l.products[k];
    if (!fits(p.outputs, p.reduce) || !fits(B, p.outputs) || !fits(B, p.reduce)) return false;
  }
  return fits(B, l.widest);
}

/// The rows of product `p` a block owns with `grid` blocks: its units' in each
/// piece of U, or its slice of the outputs.
inline int64_t rowsPerBlock(const Loop &l, const Product &p, int64_t grid) {
  return l.units ? p.outputs / l.units * ((l.units + grid - 1) / grid) : (p.outputs + grid - 1) / grid;
}

/// The three ways a loop runs.
enum class Variant { Stepwise, Persistent, Fused };
inline const char *variantName(Variant v) {
  return v == Variant::Persistent ? "persistent" : v == Variant::Fused ? "fused" : "stepwise";
}

/// The choice, and `why`: what decided it. `grid`: the persistent kernel's
/// blocks, or the fused kernels'; 0 step by step. `notPersistent`: why not
/// persistent where that was ruled out before the cost model (null if not).
struct Choice {
  Variant variant = Variant::Stepwise;
  unsigned grid = 0;
  int64_t shared = 0; // the persistent or fused kernels' dynamic shared memory per block, bytes
  const char *why = "";
  const char *notPersistent = nullptr;
};

/// RNNC_CUDA_LOOPS: auto (the cost model, the default), persistent (whenever
/// the weights fit), fused (where the loop has the variant), or stepwise.
enum class Mode { Auto, Persistent, Fused, Stepwise };
inline Mode modeFromEnvironment() {
  const char *m = std::getenv("RNNC_CUDA_LOOPS");
  if (m && std::strcmp(m, "persistent") == 0) return Mode::Persistent;
  if (m && std::strcmp(m, "fused") == 0) return Mode::Fused;
  if (m && std::strcmp(m, "stepwise") == 0) return Mode::Stepwise;
  return Mode::Auto;
}

/// The shared memory a block needs with `grid` blocks for a step's values of
/// B sequences kept on chip: those of each unit it owns.
inline int64_t onChipBytes(const Loop &l, int64_t grid, int64_t B) {
  return l.units ? B * l.onChip * ((l.units + grid - 1) / grid) * l.chipBytes : 0;
}

/// The shared memory a block of the persistent kernel needs with `grid` blocks:
/// every weight of the rows it owns (rowsPerBlock) of each product, and the
/// step's values it keeps on chip; on tensor cores each product's weights
/// padded to whole tiles, and the scratch of the warps' partial tiles.
inline int64_t sharedBytes(const Loop &l, int64_t grid, int64_t B) {
  int64_t bytes = onChipBytes(l, grid, B);
  for (int k = 0; k < l.count; ++k) {
    const int64_t rows = rowsPerBlock(l, l.products[k], grid), reduce = l.products[k].reduce;
    bytes += l.tensorCores ? roundUp(rows, kTileRows) * roundUp(reduce, tileReduce(l)) * l.realBytes : rows * reduce * l.realBytes;
  }
  return bytes + (l.tensorCores ? kSplitScratchBytes : 0);
}

/// The dynamic shared memory a launch may have without opting in (every GPU
/// since Kepler): the fused kernels' ceiling for their values on chip.
constexpr int64_t kSharedWithoutOptin = 48 << 10;

// The cost model's figures, per step, in microseconds: provisional, from
// public H100 numbers, until tools/gpu-check.sh measures ours (docs/cuda.md).
constexpr double kLaunchUs = 4.0;       // a dependent launch's latency, cuBLAS's included
constexpr double kGridBarrierUs = 1.5;  // one grid barrier of a cooperative kernel
constexpr double kHbmBytesPerUs = 3.0e6;      // 3 TB/s: the weights a stepwise product reads every step
constexpr double kL2BytesPerUs = 5.0e6;       // 5 TB/s: every block reads the whole state every step
constexpr double kFmaPerUsPerSm = 128 * 1.7e3; // 128 FMA lanes at 1.7 GHz
constexpr double kMmaPerUsPerSm = 1024 * 1.7e3; // dense bf16/f16 tensor cores: 1024 multiply-adds a cycle (TF32: half)
constexpr double kPersistentEfficiency = 0.15; // one warp per dot product, weights from shared memory
constexpr double kFusedEfficiency = 0.15;      // a warp per output row and four sequences, weights from L2
constexpr double kCublasEfficiency = 0.5;
constexpr int kFusedBlocksPerSm = 2;            // the fused kernels' blocks (of 256 threads): twice the SMs at most

/// A multiprocessor's multiply-adds a microsecond for the loop's products: FMA, or tensor cores.
inline double productRate(const Loop &l) {
  return !l.tensorCores ? kFmaPerUsPerSm : l.realBytes == 2 ? kMmaPerUsPerSm : kMmaPerUsPerSm / 2;
}

/// A step's products: their weights' bytes and their multiply-adds for B sequences.
struct Work {
  double weightBytes = 0, fma = 0;
};
inline Work work(const Loop &l, int64_t B) {
  Work w;
  for (int k = 0; k < l.count; ++k) {
    const double weights = double(l.products[k].outputs) * double(l.products[k].reduce);
    w.weightBytes += weights * double(l.realBytes);
    w.fma += double(B) * weights;
  }
  return w;
}

/// Step by step: the launches, the weights read from memory, the products' work.
inline double stepwiseMicroseconds(const Loop &l, const Gpu &g, int64_t B) {
  const Work w = work(l, B);
  const double rate = productRate(l); // cuBLAS on tensor cores too where the loop's products are
  return l.kernels * kLaunchUs + w.weightBytes / kHbmBytesPerUs + w.fma / (g.sms * rate * kCublasEfficiency);
}

/// Fused: a launch a step per product, every weight read from memory, the
/// products' work at the fused kernels' rate.
inline double fusedMicroseconds(const Loop &l, const Gpu &g, int64_t B) {
  const Work w = work(l, B);
  return l.fused * kLaunchUs + w.weightBytes / kHbmBytesPerUs + w.fma / (g.sms * kFmaPerUsPerSm * kFusedEfficiency);
}

/// The fused kernels' grid: blocks owning units, at most kFusedBlocksPerSm a multiprocessor.
inline unsigned fusedGrid(const Loop &l, const Gpu &g) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(l.units, int64_t(g.sms) * kFusedBlocksPerSm)));
}

/// Persistent: its grid barriers, every block reading the states its
/// products multiply (in float: a 16-bit model's states are float), the
/// products' work spread over `grid` blocks (on tensor cores: whole tiles).
inline double persistentMicroseconds(const Loop &l, int64_t grid, int64_t B) {
  double reads = 0, fma = 0;
  for (int k = 0; k < l.count; ++k) {
    const int64_t rows = rowsPerBlock(l, l.products[k], grid), reduce = l.products[k].reduce;
    reads += double(grid) * double(B) * double(reduce) * double(l.chipBytes);
    fma += l.tensorCores ? double(roundUp(B, kTileSequences)) * double(roundUp(rows, kTileRows)) * double(roundUp(reduce, tileReduce(l)))
                         : double(B) * double(rows) * double(reduce);
  }
  const double rate = productRate(l);
  return l.barriers * kGridBarrierUs + std::max(reads / kL2BytesPerUs, fma / (rate * kPersistentEfficiency));
}

/// Why the persistent kernel cannot run loop `l` for B sequences on `g`
/// (null where it can), and its grid and shared memory where it can.
template <class Occupancy>
inline const char *persistentRefusal(const Loop &l, const Gpu &g, int64_t B, Occupancy blocksPerSm, int64_t &grid,
                                     int64_t &shared) {
  if (!g.cooperative || g.sms < 1) return "the device has no cooperative launch";
  if (!indicesFit(l, B)) return "its rows at this B pass 32-bit indices";
  int64_t widest = 1;
  for (int k = 0; k < l.count; ++k) widest = std::max(widest, l.products[k].outputs);
  // One block per multiprocessor, no more blocks than there are units (or outputs of the widest product).
  grid = std::min<int64_t>(g.sms, l.units ? l.units : widest);
  shared = sharedBytes(l, grid, B);
  if (shared > g.sharedPerBlock) return "its weights and a step's values on chip do not fit in shared memory";
  if (blocksPerSm(shared) < 1) return "a block with its weights does not fit on a multiprocessor";
  return nullptr;
}

/// Persistent, fused or step by step, for B sequences on `g`. `blocksPerSm(shared)`
/// says how many blocks of the persistent kernel with that much dynamic shared
/// memory a multiprocessor holds at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
/// Where the cost model decides, the fastest of the ways the loop may run.
template <class Occupancy>
inline Choice choose(const Loop &l, const Gpu &g, int64_t B, Mode mode, Occupancy blocksPerSm) {
  if (mode == Mode::Stepwise) return {Variant::Stepwise, 0, 0, "RNNC_CUDA_LOOPS=stepwise"};
  // The fused kernels index in 32 bits as the persistent one does.
  const char *notFused = !l.fused || !l.units ? "its step is not local to units"
                         : g.sms < 1          ? "the device has no multiprocessor"
                         : !indicesFit(l, B)  ? "its rows at this B pass 32-bit indices"
                         : onChipBytes(l, fusedGrid(l, g), B) > kSharedWithoutOptin
                             ? "a block's values of a step on chip pass 48 KiB of shared memory"
                             : nullptr;
  const Choice fused{Variant::Fused, notFused ? 0u : fusedGrid(l, g), notFused ? 0 : onChipBytes(l, fusedGrid(l, g), B),
                     "RNNC_CUDA_LOOPS=fused"};
  if (mode == Mode::Fused) return notFused ? Choice{Variant::Stepwise, 0, 0, notFused} : fused;
  int64_t grid = 0, shared = 0;
  const char *notPersistent = persistentRefusal(l, g, B, blocksPerSm, grid, shared);
  if (mode == Mode::Persistent) {
    if (notPersistent) return {Variant::Stepwise, 0, shared, notPersistent};
    return {Variant::Persistent, static_cast<unsigned>(grid), shared, "RNNC_CUDA_LOOPS=persistent"};
  }
  if (notPersistent && notFused) return {Variant::Stepwise, 0, shared, notPersistent};
  const double stepwiseUs = stepwiseMicroseconds(l, g, B);
  const double fusedUs = notFused ? stepwiseUs : fusedMicroseconds(l, g, B);
  if (!notPersistent && persistentMicroseconds(l, grid, B) < std::min(stepwiseUs, fusedUs))
    return {Variant::Persistent, static_cast<unsigned>(grid), shared, "the cost model expects it fastest"};
  if (fusedUs < stepwiseUs)
    return {Variant::Fused, fused.grid, fused.shared, "the cost model expects one fused kernel a step faster", notPersistent};
  return {Variant::Stepwise, 0, shared, "the cost model expects cuBLAS step by step faster", notPersistent};
}

} // namespace rnnc::persist
