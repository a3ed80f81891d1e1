// 1. Sweeps: the nodes of a fused launch in order; a node joins the current
//    sweep when it maps element i to element i of the sweep's width and reads
//    what the sweep computed at the same element; reductions and softmax are
//    sweeps of their own. Values read only within their sweep stay locals.
// 2. Stored: a value is stored when anything reads it outside its sweep (a
//    later sweep, another launch, a later step, a port, the initial-state
//    gradients) or a library call computes it. A slice that only fused
//    kernels of its own stage read is a view: they load its source at an
//    offset, and the source is stored instead.
// 3. Buffers: the inputs in port order, the stored values by node, the
//    scratch of each loop that runs in parallel over time (its chunks'
//    coefficients and carries; Newton's coefficients of every step), one
//    buffer per initial-state gradient (its k steps before the first, all
//    padding). A loop runs in parallel when plan-time-parallel says so and
//    its step is wider than one element (ScanIR takes no scalar loads of its
//    own values).
// 4. Accesses: the loads and stores of every launch as the kernel IR makes
//    them (a read within its sweep at the same step is a local; a read of a
//    view loads its source at the sum of the delays), and each launch's place
//    in run order: forward stages, backward stages, the initial-state
//    gradients. A buffer is padded by the largest delay it is read with
//    before the first step and after the last (the initial-state gradients
//    read k steps further back).
// 5. Saved: forward values other than inputs that a backward launch loads.
// 6. Steps kept: a value that a loop run step by step writes and that only
//    that loop reads keeps one step's rows (read at the same step, no
//    padding) or a ring of k + 1 steps (read up to k steps back); so does
//    one the initial-state gradients also read, when they load only steps
//    the loop (backward in time) wrote last, which the ring still holds;
//    so does a state that only its loop reads (its ring's slots of steps
//    -k .. -1 take the initial state, the final state is read from the slots
//    of steps T - k .. T - 1: a forward-only LSTM's c). A final state's seed
//    that only loops run step by step read, zero but at its state's last k
//    steps, keeps those k steps and one step of zeros that the steps before
//    them read (the loops find the slot from T). Other ports, inputs and
//    indices keep all T, and so does every other value.
//    Blocks (the CPU): a time-parallel stage whose every stored value only
//    one loop run step by step reads (and the stage itself), at the same
//    step, runs inside that loop once per block of its steps, before them
//    (the hoisted W_ih·x); one after a loop, reading at the same step what
//    the loop (or the stage itself) writes and otherwise only what the host
//    wrote or was made before the loop, runs after each block's steps (the
//    weight gradients, W_ihᵀ·δ). A value written and read only there, at the same
//    step, with no padding and not a port, keeps one block of steps on the
//    CPU (WorkspaceBuffer::block); a stage runs in blocks only when it makes
//    such a value (forward) or reads one (after). Not at -O0, with
//    --lengths (the packed weight gradients) or 16-bit storage. CUDA runs
//    every stage in its own place, so each target gets its own sharing
//    (step 8); since a stage at its loop lives longer and may share less,
//    a loop's blocks are kept where they lower the CPU's workspace at four
//    blocks' rows of T·B (tried one loop at a time, and all of them).
//    The caller's arrays (the CPU, under the same conditions): an input
//    that launches read at the same step (no scan, not the host) is read
//    in inputs[k] itself, by forward and by backward (which is given the
//    inputs again); an input's gradient that one product writes and no
//    launch reads is written in input_grads[k] itself; an output's seed
//    that only fused launches read, at the same step, is read in seeds[k]
//    itself (a row of zeros when the caller passes none); none of them
//    takes workspace (WorkspaceBuffer::caller).
// 7. Storage (--dtype bf16|f16): a buffer that keeps every step is stored in
//    16 bits, computed in float, unless it is read at a delay (a recurrent
//    state: rounding it at every step would compound, so it stays float, as
//    do the padding's initial values) or a loop run in parallel over time
//    writes or reads it (its scans compose float coefficients); indices,
//    one step's rows, rings and scratch stay as they are.
// 8. Sharing: a buffer whose launches all come after another's last reuses
//    its memory when both have the same width, padding and storage (first
//    fit, in order of first use); ports, inputs, indices, the initial-state
//    gradients and buffers that keep fewer than T steps never share. Once
//    for CUDA, every stage in its place (WorkspaceBuffer::shares), once for
//    the CPU, a stage in blocks at its loop, where a buffer that keeps a
//    block takes only a block's slot (WorkspaceBuffer::cpuShares).
// 9. CUDA's ones (what cuBLAS multiplies to sum a vector param's gradient
//    over every row: one wide, or the summed value's width for a width-1
//    param), the masks' key (4 words, when the graph has keep ops), the
//    CPU's panels (each product's weight packed once per call, one per
//    weight and orientation; forward and backward share them), the CPU's
//    loss scale (one real, when backward seeds the loss) and, with 16-bit
//    storage, its float sums of the params' gradients, and the figures.
#include "passes/PlanMemory.h"

#include "passes/Autodiff.h"
#include "passes/FusePointwise.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

namespace rnnc {

std::string bufferSteps(const WorkspaceBuffer &b) {
  return b.fixed       ? "none"
         : b.stepLocal ? "one"
         : b.ring      ? fmt::format("ring of {}", b.ring)
         : b.lastSteps ? fmt::format("last {}", b.lastSteps)
                       : "T";
}

std::string bufferRows(const WorkspaceBuffer &b) {
  if (b.rowsPerStep() == 0) return std::to_string(b.fixedRows());
  return b.fixedRows() ? fmt::format("T + {}", b.fixedRows()) : "T";
}

namespace {

bool isMap(Op op) {
  OpKind k = opKind(op);
  return k == OpKind::Pointwise || (k == OpKind::Layout && op != Op::SoftmaxMinusOneHot);
}

bool isLibraryCall(const Graph &g, const Kernel &k) {
  OpKind kind = opKind(g.node(k.nodes.front()).op);
  return k.nodes.size() == 1 && (kind == OpKind::Gemm || kind == OpKind::Accumulate);
}

/// The seed of the loss (1 / (T·B)): a constant of the workspace, not a buffer.
bool isLossSeed(const Node &n) { return n.backward && n.op == Op::Input && n.name == "grad.loss"; }

/// C identifier from a value's name ("h1.c" -> "h1_c").
std::string identifier(const std::string &name, NodeId id) {
  std::string s;
  for (char ch : name) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v" + s;
  return fmt::format("{}_{}", s, id);
}

/// A launch reading buffer `buffer` at step t - delay.
struct Load {
  int buffer;
  int32_t delay;
};

/// Where each buffer is written and read, in stages and in run order.
struct Accesses {
  std::vector<int> writer;                // the stage that stores it, -1
  std::vector<std::set<int>> readers;     // stages that load it (-1: the initial-state gradients)
  std::vector<int32_t> farthest;          // the largest |delay| it is loaded with
  std::vector<int> first, last;           // run order of its first and last launch (last -1: none)
  std::vector<bool> readByBackward;
  std::vector<std::vector<std::pair<int32_t, int64_t>>> initialReads; // (delay, depth) of each initial-state gradient's load
  std::vector<bool> libraryRead, libraryWritten; // by a GEMM or a gradient sum (not a fused launch)
};

class MemoryPlanner {
public:
  MemoryPlanner(const Compilation &c, MemoryPlan &m) : c_(c), g_(c.graph), m_(m), users_(g_.users()) {}
  void plan();

private:
  void formSweeps();
  void markStored();
  int addBuffer(WorkspaceBuffer b);
  void makeBuffers();
  void planScans();
  void padFor(int buffer, int32_t delay, int64_t extraBefore = 0);
  void pinPorts();
  void padDelays();
  std::optional<Load> load(const Edge &e) const;
  /// Where a stage in blocks runs, for liveness: in its own place (CUDA) or at its loop (the CPU).
  enum class Places { Own, Loops };
  void trace(Places places = Places::Own);
  void traceLaunch(const Kernel &k, int stage, int at);
  void traceInitialStateGradients(int at);
  /// Whether value `id` is zero at every step up to `last` (< 0), before the first.
  bool zeroBefore(NodeId id, int64_t last) const;
  void read(const std::optional<Load> &l, int stage, int at, bool backward);
  void write(int buffer, int stage, int at);
  void keepSteps();
  void keepSeedSteps();
  /// Blocks and the caller's arrays: not at -O0, with 16-bit storage or --lengths.
  bool cpuInPlace() const;
  bool blockable(size_t b) const;
  void blockStages();
  void markBlocks();
  /// A loop's blocks kept where they pay on the CPU (at 4 blocks' rows).
  void keepPayingBlocks();
  void callerArrays();
  void chooseStorage();
  /// Step 8 on the liveness trace() last computed: the owner of each buffer's memory, or -1.
  std::vector<int> share(bool cpu) const;
  void panels();
  void figures();

  const Compilation &c_;
  const Graph &g_;
  MemoryPlan &m_;
  std::vector<std::vector<std::pair<NodeId, size_t>>> users_;
  std::vector<int> stageOf_; // node -> stage, -1
  std::vector<bool> stored_;
  std::set<int> ports_; // buffers a port reads or writes: never shared
  /// Of those, the ports that read their buffer at every step or that backward
  /// or the host writes: all but the states', whose initial and final steps
  /// alone the host reads and writes (a ring holds them: step 6).
  std::set<int> everyStepPorts_;
  std::map<std::string, int64_t> depths_; // per state: the steps before the first it is read at
  Accesses a_;
};

void MemoryPlanner::formSweeps() {
  m_.sweepOf.assign(g_.nodes.size(), -1);
  for (const Stage &stage : c_.schedule.stages)
    for (const Kernel &k : stage.kernels) {
      int current = -1;
      int64_t width = -1;
      for (NodeId id : k.nodes) {
        const Node &n = g_.node(id);
        if (k.gemm || opKind(n.op) == OpKind::Accumulate || opKind(n.op) == OpKind::Gemm) continue;
        bool joins = current >= 0 && isMap(n.op) && m_.sweeps[current] == SweepKind::Map && n.width == width;
        for (const Edge &e : n.inputs) {
          if (!joins) break;
          if (m_.sweepOf[e.src] != current) continue;
          joins = opKind(n.op) == OpKind::Pointwise && g_.node(e.src).width == n.width && e.delay == 0;
        }
        if (!joins) {
          current = static_cast<int>(m_.sweeps.size());
          m_.sweeps.push_back(isMap(n.op) ? SweepKind::Map
                                          : n.op == Op::SoftmaxMinusOneHot ? SweepKind::Softmax : SweepKind::Reduce);
          width = isMap(n.op) ? n.width : -1;
        }
        m_.sweepOf[id] = current;
      }
    }
}

void MemoryPlanner::markStored() {
  const std::vector<int> &sweepOf = m_.sweepOf;
  stored_.assign(g_.nodes.size(), false);
  for (NodeId id = 0; id < g_.nodes.size(); ++id) {
    const Node &n = g_.node(id);
    if (n.dead || n.op == Op::Const || n.op == Op::Param || n.op == Op::Keep || n.op == Op::Active) continue;
    if (n.op == Op::Input) {
      stored_[id] = !isLossSeed(n);
      continue;
    }
    if (sweepOf[id] < 0 || m_.sweeps[sweepOf[id]] != SweepKind::Map) {
      stored_[id] = opKind(n.op) != OpKind::Accumulate;
      continue;
    }
    for (auto [user, slot] : users_[id])
      if (sweepOf[user] != sweepOf[id] || g_.node(user).inputs[slot].delay != 0) stored_[id] = true;
  }
  auto mark = [&](const Edge &e) {
    const Node &n = g_.node(e.src);
    if (n.op != Op::Const && n.op != Op::Param && n.op != Op::Keep && n.op != Op::Active && !isLossSeed(n)) stored_[e.src] = true;
  };
  for (const GraphPort &o : g_.outputs) mark(o.value);
  if (g_.loss) mark(Edge(*g_.loss));
  for (const auto &[name, id] : g_.states()) mark(Edge(id));
  for (const GraphPort &p : g_.grads.inputs) mark(p.value);
  std::vector<bool> pinned(g_.nodes.size(), false); // ports and what the initial-state gradients read
  for (const auto &[name, id] : g_.grads.states)
    for (size_t i = 0; i < g_.node(id).inputs.size(); ++i) {
      const Edge &e = g_.node(id).inputs[i];
      if (isMap(g_.node(id).op) && zeroBefore(e.src, -1 - e.delay)) { // steps -k - delay .. -1 - delay
        m_.initialZeros.push_back({id, i});
        continue;
      }
      mark(e);
      pinned[e.src] = true;
    }
  for (const GraphPort &o : g_.outputs) pinned[o.value.src] = true;
  for (const GraphPort &p : g_.grads.inputs) pinned[p.value.src] = true;
  if (g_.loss) pinned[*g_.loss] = true;
  for (const auto &[name, id] : g_.states()) pinned[id] = true;
  // A slice that only fused kernels of its own stage read is a view: they
  // load its source at an offset, so it needs no buffer of its own (its
  // source does, and lives no longer for it).
  m_.view.assign(g_.nodes.size(), false);
  for (NodeId id : dataflowOrder(g_, c_.time)) {
    const Node &n = g_.node(id);
    if (n.dead || n.op != Op::Slice || !stored_[id] || pinned[id] || sweepOf[id] < 0) continue;
    NodeId src = n.inputs[0].src;
    const Node &s = g_.node(src);
    if (s.op == Op::Const || isLossSeed(s)) continue;
    bool fused = s.op == Op::Param || s.op == Op::Input || stageOf_[src] == stageOf_[id];
    for (auto [user, slot] : users_[id]) fused &= sweepOf[user] >= 0 && stageOf_[user] == stageOf_[id];
    if (!fused) continue;
    m_.view[id] = true;
    stored_[id] = false;
    if (s.op != Op::Param && !m_.view[src]) stored_[src] = true;
  }
}

int MemoryPlanner::addBuffer(WorkspaceBuffer b) {
  m_.buffers.push_back(std::move(b));
  return static_cast<int>(m_.buffers.size()) - 1;
}

void MemoryPlanner::makeBuffers() {
  m_.bufferOf.assign(g_.nodes.size(), -1);
  auto valueBuffer = [&](NodeId id) {
    if (m_.bufferOf[id] >= 0) return m_.bufferOf[id];
    const Node &n = g_.node(id);
    WorkspaceBuffer b;
    b.node = id;
    b.name = identifier(n.name.empty() ? opMnemonic(n.op) : n.name, id);
    b.width = n.isIndex ? 1 : n.width;
    b.index = n.isIndex;
    b.backward = n.backward;
    return m_.bufferOf[id] = addBuffer(std::move(b));
  };
  // Inputs first, in port order, so buffer order reads like the signature.
  for (size_t i = 0; i < g_.inputs.size(); ++i) m_.buffers[valueBuffer(g_.inputs[i].value.src)].input = static_cast<int>(i);
  for (NodeId id = 0; id < g_.nodes.size(); ++id)
    if (!g_.node(id).dead && stored_[id]) valueBuffer(id);
  int seed = 0;
  for (const GraphPort &s : g_.grads.seeds)
    if (s.name != "loss") m_.buffers[m_.bufferOf[s.value.src]].input = seed++;
  planScans();
  for (const auto &[state, id] : g_.grads.states) {
    const Node &n = g_.node(id);
    auto depth = depths_.find(state);
    // A constant gradient needs no buffer; a state whose delayed reads the
    // passes removed has no steps before the first (the kernel IR refuses it).
    if (n.op == Op::Const || depth == depths_.end()) continue;
    WorkspaceBuffer b;
    b.node = id;
    b.name = identifier("initial_" + state, id);
    b.width = n.width;
    b.backward = true;
    b.padBefore = depth->second;
    b.fixed = true;
    m_.initialStateGradients.emplace_back(state, addBuffer(std::move(b)));
  }
}

void MemoryPlanner::planScans() {
  const auto &stages = c_.schedule.stages;
  m_.scans.assign(stages.size(), ScanScratch());
  for (size_t s = 0; s < stages.size(); ++s) {
    const Stage &stage = stages[s];
    bool planned = stage.loop && stage.loopIndex >= 0 && static_cast<size_t>(stage.loopIndex) < c_.loopPlans.size() &&
                   c_.loopPlans[stage.loopIndex] != LoopPlan::Sequential;
    if (!planned || stage.nodes.empty() || g_.node(stage.nodes.front()).width <= 1) continue;
    ScanScratch &scan = m_.scans[s];
    std::set<NodeId> states; // what the loop reads one step back
    for (NodeId id : stage.nodes)
      for (const Edge &e : g_.node(id).inputs)
        if (e.delay == stage.direction && stageOf_[e.src] == static_cast<int>(s)) states.insert(e.src);
    int64_t n = g_.node(stage.nodes.front()).width, k = static_cast<int64_t>(states.size());
    scan.width = n;
    scan.states = static_cast<int>(k);
    auto scratch = [&](const char *what, int64_t width, bool perStep) {
      WorkspaceBuffer b;
      b.name = fmt::format("scan_{}_{}", s, what);
      b.width = width;
      b.scratch = true;
      b.backward = stage.backward;
      b.fixed = !perStep;
      b.padBefore = perStep ? 0 : kScanChunks;
      return addBuffer(std::move(b));
    };
    scan.aggregates = scratch("aggregates", n * (k * k + k), false);
    scan.carries = scratch("carries", n * k, false);
    if (c_.loopPlans[stage.loopIndex] == LoopPlan::Newton) scan.coefficients = scratch("coefficients", n * (k * k + k), true);
  }
}

void MemoryPlanner::padFor(int buffer, int32_t delay, int64_t extraBefore) {
  if (buffer < 0) return;
  WorkspaceBuffer &b = m_.buffers[buffer];
  b.padBefore = std::max<int64_t>(b.padBefore, delay + extraBefore);
  b.padAfter = std::max<int64_t>(b.padAfter, -delay);
}

void MemoryPlanner::pinPorts() {
  auto port = [&](const Edge &e) {
    int b = m_.bufferOf[e.src];
    padFor(b, e.delay);
    ports_.insert(b);
  };
  for (const GraphPort &p : g_.inputs) port(p.value);
  for (const GraphPort &p : g_.outputs) port(p.value);
  for (const GraphPort &p : g_.grads.seeds)
    if (p.name != "loss") port(p.value);
  for (const GraphPort &p : g_.grads.inputs) port(p.value);
  for (const auto &[state, b] : m_.initialStateGradients) ports_.insert(b);
  if (g_.loss) ports_.insert(m_.bufferOf[*g_.loss]);
  everyStepPorts_ = ports_;
  for (const auto &[name, id] : g_.states()) port(Edge(id));
  ports_.erase(-1); // ports whose value is a param or a constant
  everyStepPorts_.erase(-1);
}

void MemoryPlanner::padDelays() {
  for (NodeId id = 0; id < g_.nodes.size(); ++id) {
    if (g_.node(id).dead) continue;
    for (const Edge &e : g_.node(id).inputs) padFor(m_.bufferOf[e.src], e.delay);
  }
}

std::optional<Load> MemoryPlanner::load(const Edge &e) const {
  const Node &n = g_.node(e.src);
  if (n.op == Op::Const || n.op == Op::Param || n.op == Op::Keep || n.op == Op::Active || isLossSeed(n)) return std::nullopt;
  if (m_.view[e.src]) return load(Edge(n.inputs[0].src, n.inputs[0].delay + e.delay));
  if (m_.bufferOf[e.src] < 0) return std::nullopt;
  return Load{m_.bufferOf[e.src], e.delay};
}

void MemoryPlanner::read(const std::optional<Load> &l, int stage, int at, bool backward) {
  if (!l) return;
  padFor(l->buffer, l->delay); // a view's source, at the sum of the delays
  a_.readers[l->buffer].insert(stage);
  a_.farthest[l->buffer] = std::max(a_.farthest[l->buffer], std::abs(l->delay));
  a_.first[l->buffer] = std::min(a_.first[l->buffer], at);
  a_.last[l->buffer] = std::max(a_.last[l->buffer], at);
  if (backward) a_.readByBackward[l->buffer] = true;
}

void MemoryPlanner::write(int buffer, int stage, int at) {
  if (buffer < 0) return;
  a_.writer[buffer] = stage;
  a_.first[buffer] = std::min(a_.first[buffer], at);
  a_.last[buffer] = std::max(a_.last[buffer], at);
}

void MemoryPlanner::traceLaunch(const Kernel &k, int stage, int at) {
  bool backward = c_.schedule.stages[stage].backward;
  if (isLibraryCall(g_, k)) {
    NodeId id = k.nodes.front();
    const Node &n = g_.node(id);
    for (size_t i = 0; i < std::min<size_t>(2, n.inputs.size()); ++i) {
      std::optional<Load> l = load(n.inputs[i]);
      read(l, stage, at, backward);
      if (l) a_.libraryRead[l->buffer] = true;
    }
    if (n.op == Op::MatMul || n.op == Op::MatMulT) {
      write(m_.bufferOf[id], stage, at);
      if (m_.bufferOf[id] >= 0) a_.libraryWritten[m_.bufferOf[id]] = true;
    }
    return;
  }
  for (NodeId id : k.nodes) {
    int sweep = m_.sweepOf[id];
    if (m_.view[id]) { // a view is computed only where its own sweep reads it
      bool readHere = false;
      for (auto [user, slot] : users_[id]) readHere |= m_.sweepOf[user] == sweep && g_.node(user).inputs[slot].delay == 0;
      if (!readHere) continue;
    }
    write(m_.bufferOf[id], stage, at);
    for (const Edge &e : g_.node(id).inputs)
      if (!(sweep >= 0 && e.delay == 0 && m_.sweepOf[e.src] == sweep)) read(load(e), stage, at, backward); // else a local
  }
}

bool MemoryPlanner::zeroBefore(NodeId id, int64_t last) const {
  if (id == kNoNode || last >= 0) return false;
  const Node &n = g_.node(id);
  if (!n.backward) return false; // a forward state's padding holds its initial value
  if (n.op != Op::Input || n.name.rfind(kFinalSeedPrefix, 0) != 0) return true;
  // A final state's seed fills its last `depth` steps, which reach before
  // the first when T < depth: zero for every T >= 1 at steps up to -depth.
  auto depth = depths_.find(n.name.substr(kFinalSeedPrefix.size()));
  return depth != depths_.end() && last <= -depth->second;
}

void MemoryPlanner::traceInitialStateGradients(int at) {
  for (const auto &[state, buffer] : m_.initialStateGradients) {
    const NodeId id = m_.buffers[buffer].node;
    const Node &n = g_.node(id);
    if (n.op == Op::Input && n.backward) { // a seed alone (a final state's): copied from its steps -k .. -1
      padFor(m_.bufferOf[id], 0, depths_.at(state));
      read(load(Edge(id)), -1, at, true);
      write(buffer, -1, at);
      continue;
    }
    if (opKind(n.op) != OpKind::Gemm && !isMap(n.op)) continue; // the kernel IR refuses it
    const int64_t depth = depths_.at(state);
    size_t operands = opKind(n.op) == OpKind::Gemm ? std::min<size_t>(2, n.inputs.size()) : n.inputs.size();
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (std::count(m_.initialZeros.begin(), m_.initialZeros.end(), std::pair<NodeId, size_t>(id, i))) continue;
      padFor(m_.bufferOf[n.inputs[i].src], n.inputs[i].delay, depth); // steps -k .. -1
      if (i >= operands) continue;
      std::optional<Load> l = load(n.inputs[i]);
      read(l, -1, at, true);
      if (l) a_.initialReads[l->buffer].push_back({l->delay, depth});
    }
    write(buffer, -1, at);
  }
}

void MemoryPlanner::trace(Places places) {
  size_t count = m_.buffers.size();
  a_ = {std::vector<int>(count, -1), std::vector<std::set<int>>(count), std::vector<int32_t>(count, 0),
        std::vector<int>(count, INT_MAX), std::vector<int>(count, -1), std::vector<bool>(count, false),
        std::vector<std::vector<std::pair<int32_t, int64_t>>>(count), std::vector<bool>(count, false),
        std::vector<bool>(count, false)};
  const auto &stages = c_.schedule.stages;
  std::vector<int> order(stages.size());
  int at = 0;
  for (bool backward : {false, true})
    for (size_t s = 0; s < stages.size(); ++s)
      if (stages[s].backward == backward) order[s] = at++;
  for (size_t s = 0; s < stages.size(); ++s) {
    const int loop = places == Places::Loops && !m_.blockLoop.empty() ? m_.blockLoop[s] : -1;
    const int at = loop >= 0 ? order[static_cast<size_t>(loop)] : order[s]; // the CPU runs it at its loop
    for (const Kernel &k : stages[s].kernels) traceLaunch(k, static_cast<int>(s), at);
  }
  traceInitialStateGradients(at);
  for (size_t b = 0; b < count; ++b) {
    WorkspaceBuffer &buf = m_.buffers[b];
    buf.saved = a_.readByBackward[b] && buf.node != kNoNode && !g_.node(buf.node).backward &&
                g_.node(buf.node).op != Op::Input;
  }
}

void MemoryPlanner::keepSteps() {
  const auto &stages = c_.schedule.stages;
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    WorkspaceBuffer &buf = m_.buffers[b];
    int stage = a_.writer[b];
    if (buf.fixed || buf.input >= 0 || buf.index || everyStepPorts_.count(static_cast<int>(b)) || stage < 0 ||
        !stages[stage].loop || m_.scans[stage].aggregates >= 0) // a scan's chunks run at once
      continue;
    bool onlyItsLoop = true;
    for (int s : a_.readers[b]) onlyItsLoop &= s == stage || s == -1;
    if (!onlyItsLoop || (ports_.count(static_cast<int>(b)) && buf.padAfter)) continue;
    // One step's rows, or a ring of the steps the loop reads back (its
    // padding is zeros, which the ring starts with).
    int64_t ring = a_.farthest[b] + 1;
    if (a_.readers[b].count(-1)) {
      // The initial-state gradients run after a loop backward in time, which
      // writes steps 0 .. ring - 1 last: they read the ring in place when
      // every step they load (-depth - delay .. -1 - delay) is one of those.
      bool inRing = stages[stage].direction < 0;
      for (auto [delay, depth] : a_.initialReads[b]) {
        inRing &= -depth - delay >= 0;
        ring = std::max<int64_t>(ring, -delay);
      }
      if (!inRing) continue;
      buf.ring = static_cast<int>(ring);
      continue;
    }
    if (a_.farthest[b] == 0 && !buf.padBefore && !buf.padAfter) buf.stepLocal = true;
    else buf.ring = static_cast<int>(ring);
  }
}

void MemoryPlanner::keepSeedSteps() {
  const auto &stages = c_.schedule.stages;
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    WorkspaceBuffer &buf = m_.buffers[b];
    if (buf.node == kNoNode || buf.padBefore || buf.padAfter || a_.farthest[b] != 0 || a_.readers[b].empty()) continue;
    const Node &n = g_.node(buf.node);
    if (n.op != Op::Input || !n.backward || n.name.rfind(kFinalSeedPrefix, 0) != 0) continue;
    auto depth = depths_.find(n.name.substr(kFinalSeedPrefix.size()));
    if (depth == depths_.end()) continue;
    bool stepByStep = true; // each launch then covers one step's rows, whose slot the step gives
    for (int s : a_.readers[b]) stepByStep &= s >= 0 && stages[s].loop && m_.scans[s].aggregates < 0;
    if (stepByStep) buf.lastSteps = static_cast<int>(depth->second);
  }
}

bool MemoryPlanner::cpuInPlace() const {
  if (!c_.optimize || isHalf(c_.dtype)) return false;
  return std::none_of(g_.nodes.begin(), g_.nodes.end(), [](const Node &n) { return !n.dead && n.op == Op::Active; });
}

bool MemoryPlanner::blockable(size_t b) const {
  const WorkspaceBuffer &buf = m_.buffers[b];
  return !buf.saved && !buf.fixed && !buf.stepLocal && !buf.ring && !buf.lastSteps && !buf.scratch && !buf.index &&
         buf.input < 0 && !buf.padBefore && !buf.padAfter && a_.farthest[b] == 0 && a_.writer[b] >= 0 &&
         !ports_.count(static_cast<int>(b)) && !a_.readers[b].count(-1);
}

void MemoryPlanner::blockStages() {
  const auto &stages = c_.schedule.stages;
  const int n = static_cast<int>(stages.size());
  m_.blockLoop.assign(stages.size(), -1);
  if (!cpuInPlace()) return;
  // Stage s's place in run order (forward stages, then backward ones).
  auto rank = [&](int s) { return (stages[s].backward ? n : 0) + s; };
  auto sequential = [&](int s) { return s >= 0 && stages[s].loop && m_.scans[s].aggregates < 0; };
  std::vector<std::vector<size_t>> writes(stages.size()), reads(stages.size());
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    if (a_.writer[b] >= 0) writes[static_cast<size_t>(a_.writer[b])].push_back(b);
    for (int r : a_.readers[b])
      if (r >= 0) reads[static_cast<size_t>(r)].push_back(b);
  }
  // Before a loop: every value the stage stores is read by it and that loop alone.
  for (int s = 0; s < n; ++s) {
    if (stages[s].loop || writes[s].empty()) continue;
    int loop = -1;
    bool ok = true;
    for (size_t b : writes[s]) {
      ok &= blockable(b);
      for (int r : a_.readers[b])
        if (r != s) {
          ok &= loop < 0 || loop == r;
          loop = r;
        }
    }
    if (ok && sequential(loop) && rank(loop) > rank(s) && stages[loop].backward == stages[s].backward)
      m_.blockLoop[s] = loop;
  }
  // After a loop: what it reads the host wrote, or it was made before the
  // loop, or the loop (or the stage itself) makes it at the same step. Not
  // what another stage after the loop makes, so that one staying in its
  // place (below) leaves this one right.
  for (int s = 0; s < n; ++s) {
    if (stages[s].loop || m_.blockLoop[s] >= 0) continue;
    int loop = -1;
    for (size_t b : reads[s]) {
      const int w = a_.writer[b];
      if (sequential(w) && rank(w) < rank(s) && (loop < 0 || rank(w) > rank(loop))) loop = w;
    }
    // Forward's stages stay in forward and backward's in backward (the host fills backward's seeds).
    if (loop < 0 || stages[loop].backward != stages[s].backward) continue;
    bool ok = true;
    for (size_t b : reads[s]) {
      const int w = a_.writer[b];
      if (w < 0) continue; // the host's: every step is there
      if (w == s || w == loop) ok &= a_.farthest[b] == 0;
      else ok &= rank(w) < rank(loop);
    }
    if (ok) m_.blockLoop[s] = loop;
  }
  keepPayingBlocks();
}

void MemoryPlanner::keepPayingBlocks() {
  const std::vector<int> wanted = m_.blockLoop;
  if (std::none_of(wanted.begin(), wanted.end(), [](int l) { return l >= 0; })) return;
  // The CPU's workspace per sequence at kPayRows rows (T·B) with these stages in blocks.
  constexpr int64_t kPayRows = 4 * MemoryPlan::kBlockRows;
  auto cpuBytes = [&](const std::vector<int> &blockLoop) {
    m_.blockLoop = blockLoop;
    markBlocks();
    trace(Places::Loops);
    const std::vector<int> shares = share(true);
    int64_t bytes = 0;
    for (size_t b = 0; b < m_.buffers.size(); ++b)
      if (shares[b] < 0) bytes += m_.buffers[b].bytesPerStep() * (m_.buffers[b].block ? MemoryPlan::kBlockRows : kPayRows);
    return bytes;
  };
  // One loop's blocks at a time, in order, each kept where it lowers the bytes; or all of them.
  std::vector<int> kept(wanted.size(), -1);
  int64_t best = cpuBytes(kept);
  for (int loop : std::set<int>(wanted.begin(), wanted.end())) {
    if (loop < 0) continue;
    std::vector<int> trial = kept;
    for (size_t s = 0; s < wanted.size(); ++s)
      if (wanted[s] == loop) trial[s] = loop;
    if (const int64_t bytes = cpuBytes(trial); bytes < best) {
      best = bytes;
      kept = m_.blockLoop; // as markBlocks left it
    }
  }
  if (cpuBytes(wanted) < best) kept = m_.blockLoop;
  m_.blockLoop = kept;
  markBlocks(); // the lives: plan() traces each target's before it shares
}

void MemoryPlanner::markBlocks() {
  const auto &stages = c_.schedule.stages;
  const int n = static_cast<int>(stages.size());
  auto sequential = [&](int s) { return s >= 0 && stages[s].loop && m_.scans[s].aggregates < 0; };
  for (WorkspaceBuffer &buf : m_.buffers) buf.block = false;
  // The values kept for a block: made and read only in one loop's blocks.
  std::vector<bool> blockUser(stages.size(), false);
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    if (!blockable(b)) continue;
    const int w = a_.writer[b];
    const int loop = stages[w].loop ? w : m_.blockLoop[w];
    if (!sequential(loop)) continue;
    bool ok = true;
    for (int r : a_.readers[b]) ok &= r == loop || m_.blockLoop[r] == loop;
    if (!ok) continue;
    m_.buffers[b].block = true;
    blockUser[w] = true;
    for (int r : a_.readers[b]) blockUser[r] = true;
  }
  // A stage that neither makes nor reads such a value stays in its place.
  for (int s = 0; s < n; ++s)
    if (m_.blockLoop[s] >= 0 && !blockUser[s]) m_.blockLoop[s] = -1;
}

void MemoryPlanner::callerArrays() {
  const auto &stages = c_.schedule.stages;
  if (!cpuInPlace()) return;
  // How many ports name each buffer: one that two ports name stays in the workspace.
  std::map<int, int> named;
  auto count = [&](const Edge &e) { ++named[m_.bufferOf[e.src]]; };
  for (const GraphPort &p : g_.inputs) count(p.value);
  for (const GraphPort &p : g_.outputs) count(p.value);
  for (const GraphPort &p : g_.grads.seeds) count(p.value);
  for (const GraphPort &p : g_.grads.inputs) count(p.value);
  for (const auto &[name, id] : g_.states()) count(Edge(id));
  for (const auto &[state, b] : m_.initialStateGradients) ++named[b];
  if (g_.loss) ++named[m_.bufferOf[*g_.loss]];
  auto alone = [&](const Edge &e, size_t &b) {
    const int buffer = m_.bufferOf[e.src];
    if (buffer < 0 || e.delay != 0 || named[buffer] != 1) return false;
    b = static_cast<size_t>(buffer);
    const WorkspaceBuffer &buf = m_.buffers[b];
    return !buf.padBefore && !buf.padAfter && !buf.index && !buf.scratch && buf.rowsPerStep() == 1 && !buf.block;
  };
  // An input that launches read, at the same step, none of them a scan's or the host: forward
  // reads it in inputs[k] and backward in the same array, which it is given again (ABI 7).
  for (const GraphPort &p : g_.inputs) {
    size_t b;
    if (!alone(p.value, b) || a_.readers[b].empty() || a_.farthest[b] != 0) continue;
    bool plain = true;
    for (int r : a_.readers[b]) plain &= r >= 0 && !(stages[r].loop && m_.scans[r].aggregates >= 0);
    if (plain) m_.buffers[b].caller = true;
  }
  // An input's gradient that one product writes and no launch reads.
  for (const GraphPort &p : g_.grads.inputs) {
    size_t b;
    if (alone(p.value, b) && a_.readers[b].empty() && a_.libraryWritten[b]) m_.buffers[b].caller = true;
  }
  // An output's seed that only fused launches read, at the same step, none of them a scan's.
  for (const GraphPort &p : g_.grads.seeds) {
    size_t b;
    if (p.name == "loss" || p.name.rfind("final.", 0) == 0 || !alone(p.value, b) || a_.libraryRead[b] ||
        a_.farthest[b] != 0 || a_.readers[b].empty())
      continue;
    bool fused = true;
    for (int r : a_.readers[b]) fused &= r >= 0 && !(stages[r].loop && m_.scans[r].aggregates >= 0);
    if (!fused) continue;
    m_.buffers[b].caller = true;
    m_.zeroRowElements = std::max(m_.zeroRowElements, m_.buffers[b].width);
  }
}

void MemoryPlanner::chooseStorage() {
  if (!isHalf(c_.dtype)) return;
  auto scan = [&](int stage) { return stage >= 0 && m_.scans[stage].aggregates >= 0; };
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    WorkspaceBuffer &buf = m_.buffers[b];
    if (buf.index || buf.scratch || buf.rowsPerStep() == 0 || buf.padBefore || buf.padAfter || scan(a_.writer[b]))
      continue;
    buf.half = std::none_of(a_.readers[b].begin(), a_.readers[b].end(), scan);
  }
}

std::vector<int> MemoryPlanner::share(bool cpu) const {
  std::vector<int> shares(m_.buffers.size(), -1);
  std::vector<int> candidates;
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    const WorkspaceBuffer &buf = m_.buffers[b];
    if (!ports_.count(static_cast<int>(b)) && buf.rowsPerStep() && !buf.index && buf.input < 0 &&
        a_.last[b] >= 0)
      candidates.push_back(static_cast<int>(b));
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](int x, int y) { return a_.first[x] < a_.first[y]; });
  // Slots of one shape (width and padding), in the order they were made. A
  // buffer takes the first free one of its shape; candidates come in order of
  // their first use, so a slot once free for one stays free for the next.
  struct Shape {
    std::set<int> free; // slot numbers
    std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> busy; // (freeAfter, slot)
  };
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Shape> shapes;
  std::vector<int> owner; // per slot: the buffer that owns its memory
  for (int b : candidates) {
    const WorkspaceBuffer &buf = m_.buffers[b];
    Shape &shape = shapes[{buf.width, buf.padBefore, buf.padAfter, buf.half}];
    while (!shape.busy.empty() && shape.busy.top().first < a_.first[b]) {
      shape.free.insert(shape.busy.top().second);
      shape.busy.pop();
    }
    // On the CPU a slot whose owner keeps a block holds a block: only a buffer
    // that keeps a block too fits there; one that does fits any (CUDA: all T).
    auto fits = [&](int slot) { return !cpu || buf.block || !m_.buffers[owner[static_cast<size_t>(slot)]].block; };
    auto free = std::find_if(shape.free.begin(), shape.free.end(), fits);
    int slot;
    if (free != shape.free.end()) {
      slot = *free;
      shape.free.erase(free);
      shares[static_cast<size_t>(b)] = owner[static_cast<size_t>(slot)];
    } else {
      slot = static_cast<int>(owner.size());
      owner.push_back(b);
    }
    shape.busy.push({a_.last[b], slot});
  }
  return shares;
}

/// The products with a weight (MatMul, MatMulT of a param), in a loop or of
/// every step at once, get panels: one per weight and orientation, forward's
/// from 0 and backward's from 0 too, since a call packs its own before its
/// first stage.
void MemoryPlanner::panels() {
  m_.panelOffsetOf.assign(g_.nodes.size(), -1);
  for (bool backward : {false, true}) {
    std::map<std::pair<Op, std::string>, int64_t> offsets; // (orientation, first param) -> offset
    int64_t end = 0;
    for (const Stage &stage : c_.schedule.stages) {
      if (stage.backward != backward) continue;
      for (const Kernel &k : stage.kernels) {
        const Node &n = g_.node(k.nodes.front());
        if (!isLibraryCall(g_, k) || (n.op != Op::MatMul && n.op != Op::MatMulT)) continue;
        auto [at, fresh] = offsets.try_emplace({n.op, n.params[0]}, end);
        if (fresh) {
          const int64_t columns = (n.width + MemoryPlan::kPanelColumns - 1) / MemoryPlan::kPanelColumns;
          end += columns * MemoryPlan::kPanelColumns * g_.node(n.inputs[0].src).width;
        }
        m_.panelOffsetOf[k.nodes.front()] = at->second;
      }
    }
    m_.panelElements = std::max(m_.panelElements, end);
  }
}

void MemoryPlanner::figures() {
  for (const Node &n : g_.nodes)
    if (!n.dead && n.op == Op::Keep) m_.maskKeyBytes = 16;
    else if (!n.dead && n.op == Op::Active) m_.lengths = true;
  for (const DroppedParam &d : g_.dropped) {
    m_.maskKeyBytes = 16;
    m_.droppedElements += d.shape[0] * d.shape[1];
  }
  for (const auto &[name, id] : g_.grads.params)
    if (g_.droppedParam(name)) m_.droppedGradElements = m_.droppedElements;
  for (const GraphPort &seed : g_.grads.seeds) m_.lossScale |= seed.name == "loss";
  if (isHalf(c_.dtype) && !g_.grads.seeds.empty())
    for (const GraphParam &p : g_.params) {
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      m_.gradSumElements += n;
    }
  m_.half = isHalf(c_.dtype);
  m_.roundedStreams = std::max(1, c_.schedule.streams);
  // Any loop may have a persistent variant (codegen/CudaPersist.h decides which): two words a stage.
  for (const Stage &stage : c_.schedule.stages)
    if (stage.loop) m_.gridBarrierWords = 2 * static_cast<int64_t>(c_.schedule.stages.size());
  panels();
  for (const Stage &stage : c_.schedule.stages)
    for (const Kernel &k : stage.kernels) {
      const Node &n = g_.node(k.nodes.front());
      if (m_.half && isLibraryCall(g_, k) && (n.op == Op::MatMul || n.op == Op::MatMulT || n.op == Op::GradMatrix)) {
        int64_t perRow = 0; // the operands in float: a product's input, a weight gradient's two
        for (size_t i = 0; i < (n.op == Op::GradMatrix ? n.inputs.size() : 1); ++i) {
          const int b = m_.bufferOf[n.inputs[i].src];
          if (b >= 0 && !m_.buffers[b].half) perRow += g_.node(n.inputs[i].src).width;
        }
        m_.roundedPerRow = std::max(m_.roundedPerRow, perRow);
      }
      if (isLibraryCall(g_, k) && n.op == Op::GradVector)
        m_.onesWidth = std::max<int64_t>(m_.onesWidth, n.width == 1 ? g_.node(n.inputs[0].src).width : 1);
      // A weight gradient of every step at once packs its two operands' running rows (a product
      // reads and writes them in place: rnnc/workspace.h's running_product).
      if (m_.lengths && !stage.loop && isLibraryCall(g_, k) && n.op == Op::GradMatrix)
        m_.packWidth = std::max(m_.packWidth, g_.node(n.inputs[0].src).width + g_.node(n.inputs[1].src).width);
    }
  for (const WorkspaceBuffer &b : m_.buffers) {
    m_.unsharedBytesPerStep += b.bytesPerStep();
    if (b.saved) m_.savedBytesPerStep += b.bytesPerStep();
    if (b.shares < 0) {
      m_.bytesPerStep += b.bytesPerStep();
      m_.fixedBytes += b.fixedBytes();
    }
    if (b.cpuShares < 0) {
      m_.cpuBytesPerStep += b.bytesPerStep();
      m_.cpuFixedBytes += b.fixedBytes();
      if (b.block) m_.blockBytesPerStep += b.bytesPerStep();
      if (b.caller) m_.callerBytesPerStep += b.bytesPerStep();
    }
  }
}

void MemoryPlanner::plan() {
  depths_ = stateDepths(g_);
  stageOf_.assign(g_.nodes.size(), -1);
  for (size_t s = 0; s < c_.schedule.stages.size(); ++s)
    for (NodeId id : c_.schedule.stages[s].nodes) stageOf_[id] = static_cast<int>(s);
  formSweeps();   // 1
  markStored();   // 2
  makeBuffers();  // 3
  pinPorts();     // 4, 6, 8
  padDelays();    // 4
  trace();        // 4, 5
  keepSteps();    // 6
  keepSeedSteps(); // 6
  blockStages();  // 6
  callerArrays(); // 6
  chooseStorage(); // 7
  trace(Places::Own);                          // 4 again, CUDA's: every stage in its place
  const std::vector<int> cuda = share(false); // 8
  trace(Places::Loops);                       // 4 again, the CPU's: blocked stages at their loop
  const std::vector<int> cpu = share(true);   // 8
  for (size_t b = 0; b < m_.buffers.size(); ++b) {
    m_.buffers[b].shares = cuda[b];
    m_.buffers[b].cpuShares = cpu[b];
  }
  figures();      // 9
  m_.planned = true;
}

} // namespace

void planMemory(Compilation &c) {
  MemoryPlan plan;
  MemoryPlanner(c, plan).plan();
  c.memory = std::move(plan);
}

} // namespace rnnc
