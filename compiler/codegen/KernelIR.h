// The kernel IR: what a scheduled compilation becomes before it is printed.
// Every launch of the schedule is a kernel over an index space of rows (one
// row per step and sequence: B rows per step inside a loop, T·B rows at once
// outside), whose body is a list of sweeps of scalar ops over the elements of
// a row; GEMMs and accumulations are library calls on whole buffers. Values
// that leave their sweep live in the workspace buffers plan-memory planned,
// padded with the steps before the first and after the last, so a read of
// h[t-1] is a plain load; the sweeps and buffers are the plan's.
#pragma once

#include "ir/Graph.h"
#include "passes/Compilation.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rnnc::codegen {

/// A workspace array, as plan-memory planned it (passes/Compilation.h): the
/// kernel IR and the printers allocate exactly the plan's buffers.
using Buffer = WorkspaceBuffer;

/// A scalar read by a sweep: an earlier op of the same sweep, a load from a
/// buffer at step t - delay, a param element, a constant, the loss seed, or
/// a mask element drawn where it is read (dropout, zoneout: `value` is the
/// probability it keeps, at step t - delay), or whether step t - delay is
/// within its sequence's length (--lengths).
struct Operand {
  enum class Kind { Local, Load, Param, Const, LossSeed, Mask, Active } kind = Kind::Const;
  int64_t site = 0;                           // Mask: its site
  bool inverted = false, perSequence = false; // Mask: as its keep node's
  bool weighted = false;                      // Active: the loss's weight where active, not 1
  int local = -1;
  int buffer = -1;
  int32_t delay = 0;
  int64_t paramOffset = 0;
  bool scalar = false; // element 0 (a width-1 value broadcast), else element i + shift
  int64_t shift = 0;
  double value = 0;
};

/// One op of a sweep: a node's op applied at element i; `store` is the buffer
/// its value goes to (-1: it stays a local), at element i + storeShift. Concat keeps its pieces' widths
/// in `pieces`; Pad, Slice and Embed their offsets in `offset`/`width`.
struct Instr {
  Op op = Op::Add;
  NodeId node = kNoNode;
  std::vector<Operand> args;
  std::vector<int64_t> pieces;
  int64_t offset = 0;
  int64_t width = 1;      // the node's width
  int64_t inWidth = 1;    // Reduce, Embed, Softmax: the width of the first operand's value
  int64_t paramOffset = 0; // Embed: the table in the flat param array
  int store = -1;
  int64_t storeShift = 0; // the store's element: i + storeShift (a concat's piece stored in place)
};

/// Elements of one row visited together. A map sweep computes its ops at
/// each element i < width; a reduce sweep is one op (sum, mean, mse,
/// cross_entropy) over its operand's width; a softmax sweep is one
/// softmax_minus_onehot (a max and a sum, then the map).
struct Sweep {
  using Kind = SweepKind;
  Kind kind = Kind::Map;
  int64_t width = 1;
  std::vector<Instr> body;
};

struct KernelIR;
/// Calls f on each sweep of a fused kernel, the folded ones of rows past their end included.
template <class F> void forEachSweep(const KernelIR &k, F f);

struct KernelIR {
  enum class Kind {
    Fused,      // sweeps over rows
    Gemm,       // out[rows][R] = in[rows][C] · W^T   (W [R][C], stacked params are one W)
    GemmT,      // out[rows][C] = in[rows][R] · W     (W [R][C])
    GradMatrix, // G[R][C] += Σ_rows d[row][R] · x[row][C]
    GradVector, // G[w] += Σ_rows d[row][w]  (width-1 G: the sum of every element)
    GradEmbed,  // G[idx[row]][w] += d[row][w]
  } kind = Kind::Fused;
  std::string name;       // fused_3, gemm_4, ...
  bool perStep = false;   // inside a loop: one launch per step
  bool epilogue = false;  // the initial-state gradients: steps -depth .. -1
  int64_t epilogueDepth = 0;
  std::vector<Sweep> sweeps;
  /// --lengths: the sweeps at a row past its sequence's end (foldStoppedRows,
  /// codegen/StoppedRows.h); none when nothing there is needed.
  bool foldsStopped = false;
  std::vector<Sweep> stopped;
  // Library calls: out = node's buffer; a, b = operand buffers (GradMatrix: d, x).
  int out = -1, a = -1, b = -1;
  int32_t aDelay = 0, bDelay = 0;
  int64_t rows = 0, cols = 0; // W's (or G's) shape
  int64_t paramOffset = 0;    // W or G in the flat param (gradient) array
  bool dropped = false;       // W (G) is a dropped param's, at paramOffset in ws.dropped (ws.dropped_grad)
  int64_t panelOffset = -1;   // CPU, a loop's product: op(W) packed once per call at ws.panels + this
  /// A product whose one result is input k's gradient (`W_ihᵀ · δ`), which no
  /// other launch reads: the CPU's backward skips it when the caller passes no
  /// array for that gradient (-1: always runs).
  int inputGrad = -1;
  /// CUDA, a Gemm run for all rows at once: the params (offsets, `rows` wide)
  /// its epilogue adds to every row of out (FoldBias.h); with two, their sum
  /// is made first in the stream's cuBLAS workspace (rnnc/cuda.h's Context::biasSpace).
  std::vector<int64_t> biases;
  std::vector<NodeId> nodes;
  std::vector<SourceRange> equations; // the source lines it computes, in order, no duplicates
};

template <class F> void forEachSweep(const KernelIR &k, F f) {
  for (const Sweep &s : k.sweeps) f(s);
  for (const Sweep &s : k.stopped) f(s);
}

/// A loop run in parallel over time (docs/time-parallel.md). Its k states are
/// buffers of one width n that the loop reads one step back (at delay
/// `direction`); element i of the states at step t is a function of element i
/// of the states at the step before, `step`: the loop's kernels as one map
/// sweep of width n whose loads of a state at `direction` are the previous
/// values, and whose other in-loop loads became locals. A scan evaluates it at
/// a zero state with tangents (state_t = A_t state_{t-1} + b_t, A_t a k×k
/// block per element), composes the chunks, carries between them, then runs
/// the loop's own kernels inside each chunk; Newton linearizes it around a
/// guess of every step, `iterations` times.
struct ScanIR {
  LoopPlan plan = LoopPlan::Sequential;
  bool guarded = false;        // --time-parallel auto: the cost model picks at run time
  int iterations = 0;          // Newton
  int64_t width = 0;           // n
  std::vector<int> states;     // buffers, k of them
  std::vector<int> stateLocals; // per state: the local of `step` that is its new value
  Sweep step;                   // no stores, only what the states need: its tangents are the coefficients
  Sweep exactStep;              // every op of the loop's kernels, their stores kept
  std::vector<int> exactStateLocals; // per state: the local of `exactStep` that is its new value
  int aggregates = -1;   // scratch [kScanChunks][B][n·(k·k + k)]: per chunk, A then b, coefficient-major
  int carries = -1;      // scratch [kScanChunks][B][n·k]: the state before each chunk
  int coefficients = -1; // Newton: scratch [T][B][n·(k·k + k)], each step's A_t and b_t at the guess
};

struct StageIR {
  bool loop = false;
  int direction = +1;
  bool backward = false;
  int stream = 0;
  std::vector<int> waits; // stages (indices into Program::stages) on other streams it must wait for
  std::vector<int> kernels;
  ScanIR scan; // plan Sequential: the loop steps one t at a time
  /// The CPU: the loop (index into Program::stages) this stage runs inside,
  /// over the rows of each block of its steps, before them when it comes
  /// first, after them when later (MemoryPlan::blockLoop); -1: in its place.
  int blockLoop = -1;
};

/// A flat-array view of a param: its offset and element count.
struct ParamSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t elements = 0;
  bool initNormal = false; // how `rnnc init` draws it (set by the driver; scale 0: unknown)
  double initScale = 0;
};

/// A dropped param (DropConnect; ir/Graph.h DroppedParam): `elements` reals
/// at `offset` in the workspace's `dropped` array, made by each forward from
/// the param at `of` in the flat param array and the mask at `site`; backward
/// folds its gradient (the same place in `dropped_grad`) into the param's.
struct DroppedSlot {
  std::string name;
  int64_t offset = 0, elements = 0, of = 0;
  double keep = 1;
  int64_t site = 0;
};

struct PortIR {
  std::string name;
  int64_t width = 1;
  bool index = false;
  int buffer = -1;   // where its value is (-1: a leaf, see leaf)
  int32_t delay = 0; // the port reads the buffer at t - delay
  int depth = 0;     // states: steps before the first
  Operand leaf;      // a port whose value is a param or constant
};

struct Program {
  std::string name;
  std::map<std::string, int64_t> dims; // the file's dims after -D (for the manifest; set by the driver)
  std::vector<Buffer> buffers; // plan-memory's, in its order; `shares` the CPU's (cpuShares) until keepEveryStep
  std::vector<int> cudaShares; // per buffer: the memory it shares on CUDA (the plan's `shares`), or -1
  int64_t onesWidth = 0;       // CUDA: [T][B][onesWidth] ones (plan-memory's)
  std::vector<KernelIR> kernels;
  std::vector<StageIR> stages; // forward stages, then backward stages, in issue order
  std::vector<int> epilogue;   // kernels of the initial-state gradients
  std::vector<ParamSlot> params;
  int64_t paramElements = 0;
  std::vector<DroppedSlot> dropped; // made in the workspace by forward
  int64_t droppedElements = 0;
  bool droppedGrads = false;        // backward accumulates their gradients in ws.dropped_grad
  std::vector<PortIR> inputs, outputs, states, seeds, inputGrads, stateGrads;
  /// dL/d(final state), by state name: a [T][B][w] seed buffer the host fills
  /// at the last `depth` steps (autodiff's "final.<state>" seeds).
  std::vector<PortIR> stateSeeds;
  bool hasBackward = false; // autodiff ran (else a forward-only build: backward fails)
  int lossBuffer = -1; // the per-step loss values
  bool hasLoss = false;
  bool lossSeeded = false; // backward differentiates the loss
  bool hasMasks = false;   // dropout or zoneout: the workspace keeps the masks' key (Workspace::rng)
  bool hasLengths = false; // --lengths: the workspace keeps them and the loss's weight (Workspace::lengths)
  int64_t packWidth = 0;   // --lengths, CPU: MemoryPlan::packWidth (Workspace::packed)
  int64_t panelElements = 0; // CPU: MemoryPlan::panelElements (Workspace::panels)
  int64_t zeroRowElements = 0; // CPU: MemoryPlan::zeroRowElements (Workspace::zeros)
  int64_t roundedPerRow = 0; // CUDA, 16 bits: MemoryPlan::roundedPerRow (Workspace::rounded, per stream)
  int64_t gridBarrierWords = 0; // CUDA: MemoryPlan::gridBarrierWords (Workspace::grid_barrier)
  DType dtype = DType::F32;  // --dtype: 16-bit buffers (Buffer::half) and ports are `store`, computed in `real`
};

/// The buffer whose memory `b` is: b's owner on the CPU (the program's
/// `shares`) or on CUDA (Program::cudaShares); b itself when it owns memory.
inline int memoryOwner(const Program &p, int b, bool cuda) {
  for (;;) {
    int next = cuda ? p.cudaShares[static_cast<size_t>(b)] : p.buffers[static_cast<size_t>(b)].shares;
    if (next < 0) return b;
    b = next;
  }
}

/// What the bundle calls the element type of its params and ports: `store`
/// when they are 16 bits wide, else `real`.
inline const char *portType(const Program &p) { return isHalf(p.dtype) ? "store" : "real"; }

/// The CUDA bundle's program: every stage in its own place and every buffer
/// keeping all T in the workspace (a persistent loop reads its hoisted
/// products for all T in one launch), not the CPU's blocks of steps
/// (Buffer::block) nor its use of the caller's arrays (Buffer::caller), and
/// CUDA's sharing (Program::cudaShares) for the CPU's.
void keepEveryStep(Program &p);

/// Builds the kernel IR of a scheduled compilation whose memory is planned
/// (c.memory), checking that its loads and stores fit the plan. Returns false
/// with a one-line reason for what the compiled engines cannot run.
bool buildProgram(const Compilation &c, Program &out, std::string &error);

} // namespace rnnc::codegen
