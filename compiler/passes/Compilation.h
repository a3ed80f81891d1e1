// What the pipeline works on and produces: the graph, its time classes, the
// schedule (stages of kernels on streams) and the memory plan. Passes read and
// write a Compilation; `rnnc show` prints its parts.
#pragma once

#include "analysis/TimeClasses.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rnnc {

/// One launch: a GEMM (cuBLAS / CBLAS) or a fused pointwise kernel.
struct Kernel {
  bool gemm = false;
  std::vector<NodeId> nodes; // in dependency order
};

/// Work that runs together: all steps at once (time-parallel: index space
/// T·B·n) or a sequential loop over time (B·n per step).
struct Stage {
  bool loop = false;
  int direction = +1;  // loops: +1 runs t = 0..T-1, -1 runs t = T-1..0
  int level = 0;       // TimeClasses level
  int loopIndex = -1;  // TimeClasses loop, for loops
  bool backward = false; // holds backward (autodiff) nodes
  std::vector<NodeId> nodes;
  std::vector<Kernel> kernels;
  int stream = 0;
  std::vector<int> after; // stages it needs (its inputs come from them)
  std::vector<int> waits; // of those, the ones on another stream: an event each
};

struct Schedule {
  std::vector<Stage> stages; // in the order they are issued
  int streams = 1;
};

/// How a fused launch visits the elements of a row: a map sweep computes its
/// ops at each element i < width; a reduce sweep is one sum, mean, mse or
/// cross_entropy over its operand's width; a softmax sweep is one
/// softmax_minus_onehot (a max and a sum, then the map).
enum class SweepKind : uint8_t { Map, Reduce, Softmax };

/// Chunks a loop run in parallel over time is cut into, at most (the rows of
/// its chunk scratch buffers).
constexpr int64_t kScanChunks = 64;

/// One workspace array of the plan: [fixedRows() + rowsPerStep()·T][B][width]
/// elements, float32 reals (double under RNNC_REAL_DOUBLE) or int32 for an
/// index input. It keeps all T steps plus its padding (the steps before the
/// first and after the last that a delayed read reaches: the initial state,
/// zeros), unless `fixed` (only the padding rows), `stepLocal` (one step's
/// rows, reused every step), `ring` (a ring of `ring` steps' rows) or
/// `lastSteps` (a final state's seed: its last steps' rows and one step of
/// zeros) says otherwise; at most one of the four holds.
struct WorkspaceBuffer {
  std::string name;      // a C identifier, from the value's name where it has one
  NodeId node = kNoNode; // the value it holds (kNoNode: a scan's scratch)
  int64_t width = 1;
  bool index = false;    // int32 elements
  bool backward = false; // written by backward (zeroed at its start)
  int64_t padBefore = 0, padAfter = 0;
  int input = -1;        // the graph input (or seed, for backward) copied into it
  bool fixed = false;     // no rows for steps 0..T-1: only the padding (initial-state gradients, chunk scratch)
  bool stepLocal = false; // written and read within one step of a loop: B rows, reused every step
  int ring = 0;           // read only by its loop, at most ring - 1 steps back: a ring of `ring` steps' rows (0: no ring)
  /// A final state's seed, zero but at the last `lastSteps` steps and read
  /// only by loops run step by step: slot 0 holds the zeros every earlier
  /// step reads, slots 1 .. lastSteps steps T - lastSteps .. T - 1 (0: all T).
  int lastSteps = 0;
  /// The buffer whose memory it reuses (their lives do not overlap), or -1:
  /// with every stage in its own place (CUDA; in a codegen::Program, the
  /// program's target's), and with the CPU's stages in blocks at their loops.
  int shares = -1;
  int cpuShares = -1;
  bool scratch = false;   // a scan's own memory (chunk aggregates, carries, Newton's coefficients)
  bool saved = false;     // a forward value backward reads: kept for every step
  bool half = false;      // stored in 16 bits (--dtype bf16|f16; plan-memory's step 7 says which)
  /// The CPU keeps one block of its loop's steps, min(T, block_steps(T, B))
  /// rows of B (rnnc/workspace.h), not all T: its writer and every reader
  /// run inside that loop, block by block, at the same step (plan-memory's
  /// step 6, MemoryPlan::blockLoop). CUDA keeps every step (rowsPerStep 1).
  bool block = false;
  /// The CPU uses the caller's array in place and the workspace has none:
  /// an input that launches read at the same step (inputs[k], in forward
  /// and backward), an input's gradient that one product writes and nothing reads (in
  /// input_grads[k]; skipped when that is null), or an output's seed that
  /// only fused launches read, at the same step (seeds[k]; a row of zeros
  /// when null). CUDA keeps it in the workspace.
  bool caller = false;

  /// Bytes of one element: 2 when half, else 4 (float32; an int32 index takes as much).
  int64_t elementBytes() const { return half ? 2 : 4; }

  /// Rows per step of T: 1, or 0 when fixed, step-local, a ring or a seed's last steps.
  int64_t rowsPerStep() const { return fixed || stepLocal || ring || lastSteps ? 0 : 1; }
  /// Rows that do not grow with T: the padding, one step, the ring's steps, or the seed's steps and zeros.
  int64_t fixedRows() const {
    return stepLocal ? 1 : ring ? ring : lastSteps ? lastSteps + 1 : padBefore + padAfter;
  }
  /// Per sequence, in float32 where not half (f64 doubles them).
  int64_t bytesPerStep() const { return elementBytes() * width * rowsPerStep(); }
  int64_t fixedBytes() const { return elementBytes() * width * fixedRows(); }
};

/// The memory of a loop run in parallel over time (docs/time-parallel.md):
/// per chunk, the composed coefficients and the carried states; Newton also
/// each step's coefficients. -1 where the stage runs step by step.
struct ScanScratch {
  int aggregates = -1, carries = -1, coefficients = -1;
  int states = 0;    // k: the states coupled per element
  int64_t width = 0; // n: the loop's width
};

/// plan-memory's answer (passes/PlanMemory.h): which values of a launch stay
/// in registers and which are stored, every workspace buffer with its rows
/// and sharing, and the figures `show --stats` prints. The kernel IR and the
/// printers allocate exactly these buffers.
struct MemoryPlan {
  bool planned = false;
  std::vector<int> sweepOf;      // per node: its sweep (numbered over the compilation), -1 outside fused launches
  std::vector<SweepKind> sweeps; // per sweep
  std::vector<bool> view;        // per node: a slice its readers load from its source at an offset
  std::vector<int> bufferOf;     // per node: the buffer it is stored in, -1
  /// Inputs in port order, stored values by node, scans' scratch by stage,
  /// then the initial-state gradients.
  std::vector<WorkspaceBuffer> buffers;
  std::vector<ScanScratch> scans; // per stage
  std::vector<std::pair<std::string, int>> initialStateGradients; // state -> buffer, as g.grads.states
  /// (node, input) of an initial-state gradient's loads that are zero: steps
  /// before the first of a backward value, whose padding holds zeros.
  std::vector<std::pair<NodeId, size_t>> initialZeros;
  int64_t onesWidth = 0; // CUDA only: [T][B][onesWidth] ones that sum vector params' gradients over the rows
  int64_t maskKeyBytes = 0; // dropout, zoneout: the masks' key and mode forward keeps for backward (4 words)
  int64_t droppedElements = 0;     // dropped params (DropConnect): made in the workspace by forward
  int64_t droppedGradElements = 0; // and their gradients, folded into the params' by backward
  bool lossScale = false;          // backward seeds the loss, so forward keeps its loss scale (one real)
  int64_t gradSumElements = 0;     // --dtype bf16|f16 with backward: the params' gradients summed in float
  bool half = false;               // --dtype bf16|f16: dropped params are stored in 16 bits too
  /// CUDA, --dtype bf16|f16: the widest row of a product's or weight
  /// gradient's operands kept in float (a recurrent state, a gradient), which
  /// rnnc/cuda.h's gemm16 rounds to 16 bits by blocks of rows in a scratch of
  /// min(T·B·roundedPerRow, kRoundedElements) 16-bit elements, at least one
  /// row, one scratch per stream (roundedStreams: the schedule's streams run
  /// at once).
  int64_t roundedPerRow = 0;
  int roundedStreams = 1;
  static constexpr int64_t kRoundedElements = int64_t(1) << 20; // 2 MiB of 16-bit elements
  /// CUDA: two words per stage (arrivals, generation) for the grid barriers
  /// of the loops that may run persistent (docs/cuda.md#persistent-loops):
  /// set when the model has a loop and is not 16-bit; 0 else.
  int64_t gridBarrierWords = 0;
  bool lengths = false;      // --lengths: the workspace keeps lengths [B] (int32) and the loss's weight (one real)
  /// --lengths on the CPU: the weight gradients of every step at once gather
  /// the running rows, up to kPackedRows at a time, into a scratch of
  /// [min(T·B, kPackedRows)][packWidth] (their operands' widths, the widest);
  /// the products read and write them in place.
  int64_t packWidth = 0;
  static constexpr int64_t kPackedRows = 1024;
  /// The CPU's products with a weight (a loop's W_hh · h, W_hhᵀ · δ, and the
  /// hoisted W_ih · x, W_ihᵀ · δ): each call packs op(W) once into panels
  /// (runtime/include/rnnc/panels.h) of kPanelColumns-column slices;
  /// forward's and backward's share the memory.
  std::vector<int64_t> panelOffsetOf; // per node: its panels' offset in reals, -1
  int64_t panelElements = 0;          // reals, the larger of forward's and backward's
  static constexpr int64_t kPanelColumns = 16;
  /// Per stage: the loop it runs inside on the CPU, once per block of that
  /// loop's steps over the block's rows (before the block's steps when it
  /// comes before the loop, after them when after), or -1: it runs in its
  /// own place. Its buffers kept for a block are WorkspaceBuffer::block.
  std::vector<int> blockLoop;
  /// Rows a CPU block holds, about: block_steps(T, B) = min(T, ⌈kBlockRows / B⌉)
  /// steps (rnnc/workspace.h's RNNC_BLOCK_ROWS; a multiple of the weight
  /// gradients' 256-row chunks for B a power of two).
  static constexpr int64_t kBlockRows = 512;
  // Per sequence, float32. Bytes of the buffers with memory of their own (CUDA's sharing):
  int64_t bytesPerStep = 0;         // per step of T
  int64_t fixedBytes = 0;           // rows that do not grow with T
  int64_t unsharedBytesPerStep = 0; // the same per step without sharing
  int64_t savedBytesPerStep = 0;    // of those, forward values backward reads
  // The same with the CPU's sharing (cpuShares), every buffer counted for all T:
  int64_t cpuBytesPerStep = 0;
  int64_t cpuFixedBytes = 0;
  int64_t blockBytesPerStep = 0;    // of those, what the CPU keeps a block of steps of instead
  int64_t callerBytesPerStep = 0;   // of those, what the CPU reads or writes in the caller's arrays instead
  int64_t zeroRowElements = 0;      // CPU: a row of zeros a caller's seed reads when the caller passes none
};

/// `--dtype`: what params, ports and the values kept for every step are
/// stored in (docs/precision.md). F32 and F64 compute in their own type (one
/// bundle text: `real` is float, or double under RNNC_REAL_DOUBLE); BF16 and
/// F16 store 16 bits and compute in float.
enum class DType : uint8_t { F32, F64, BF16, F16 };

inline bool isHalf(DType d) { return d == DType::BF16 || d == DType::F16; }
inline const char *dtypeName(DType d) {
  return d == DType::F32 ? "f32" : d == DType::F64 ? "f64" : d == DType::BF16 ? "bf16" : "f16";
}

/// `--time-parallel`: which loops may run in parallel over time.
enum class TimeParallelMode : uint8_t {
  Off,    // every loop step by step
  Scan,   // affine loops with a (block-)diagonal Jacobian as parallel scans
  Newton, // those, and nonlinear ones with such a Jacobian as Newton iterations of scans
  Auto    // both, each chosen at run time by the cost model over T, B·n and the iterations
};

struct TimeParallelOptions {
  TimeParallelMode mode = TimeParallelMode::Auto;
  int newtonIterations = 3;
};

/// How one loop runs (per TimeClasses loop).
enum class LoopPlan : uint8_t { Sequential, Scan, Newton };

struct Compilation {
  Graph graph;
  bool optimize = true; // false: -O0
  DType dtype = DType::F32;
  TimeParallelOptions timeParallel;
  std::vector<LoopPlan> loopPlans; // per TimeClasses loop (plan-time-parallel; all Sequential at -O0 or Off)
  TimeClasses time;
  Schedule schedule;
  MemoryPlan memory;
};

} // namespace rnnc
