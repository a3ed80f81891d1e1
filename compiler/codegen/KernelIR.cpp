// 1. Params: one flat array in declaration order, a stacked group laid out
//    side by side (by rows) where its first member is declared.
// 2. Memory: the sweeps, the stored values, the views and every buffer are
//    plan-memory's (passes/PlanMemory.cpp); the builder reads them.
// 3. Kernels: each launch's sweeps, in order, or its library call; a loop the
//    plan runs in parallel over time gets its ScanIR (ScanIR.cpp), over the
//    plan's scratch.
// 4. Operands: a value of the same sweep is a local, a stored one a load at
//    t - delay, a view a load of its source at an offset, a param an element
//    of the flat array, a constant a literal.
// 5. Check: every load and store fits the plan (a step-local buffer read only
//    at its step, a ring deep enough, padding that covers each delay, buffers
//    sharing memory never live at once); a failure is a compiler bug.
#include "codegen/KernelIR.h"
#include "codegen/ConcatInPlace.h"

#include "codegen/ScanIR.h"

#include "support/Crash.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc::codegen {

namespace {

bool isMap(Op op) {
  OpKind k = opKind(op);
  return k == OpKind::Pointwise || (k == OpKind::Layout && op != Op::SoftmaxMinusOneHot);
}

class ProgramBuilder {
public:
  ProgramBuilder(const Compilation &c, Program &p) : c_(c), g_(c.graph), m_(c.memory), p_(p) {}
  bool build(std::string &error);

private:
  void layoutParams();
  Operand operand(const Edge &e, int sweepOf, const std::map<NodeId, int> &locals, bool scalarWanted);
  /// The op of node id at element i, its operands read from `sweep`'s locals.
  Instr instr(NodeId id, int sweep, Sweep::Kind kind, const std::map<NodeId, int> &locals);
  void emitSweeps(KernelIR &k, const Kernel &launch);
  bool emitLibraryCall(KernelIR &k, NodeId id, std::string &error);
  bool emitEpilogue(const std::string &state, NodeId id, int buffer, std::string &error);
  void addEquations(KernelIR &k);
  PortIR port(const std::string &name, const Edge &e);
  void checkMemory() const;

  const Compilation &c_;
  const Graph &g_;
  const MemoryPlan &m_;
  Program &p_;
  std::map<std::string, int64_t> paramOffset_;
  std::map<std::string, int64_t> droppedOffset_; // in ws.dropped
  std::map<std::string, int64_t> depths_;
  std::vector<std::vector<std::pair<NodeId, size_t>>> users_;
};

void ProgramBuilder::layoutParams() {
  std::set<std::string> placed;
  auto place = [&](const GraphParam &p) {
    if (!placed.insert(p.name).second) return;
    ParamSlot s{p.name, p.shape, p_.paramElements, 1};
    for (int64_t d : p.shape) s.elements *= d;
    paramOffset_[p.name] = s.offset;
    p_.paramElements += s.elements;
    p_.params.push_back(s);
  };
  for (const GraphParam &p : g_.params) {
    if (p.stackedWith.size() > 1) {
      for (const auto &member : p.stackedWith) place(*g_.param(member));
    } else if (!placed.count(p.name)) {
      bool inGroup = false;
      for (const GraphParam &q : g_.params)
        inGroup |= q.stackedWith.size() > 1 && std::count(q.stackedWith.begin(), q.stackedWith.end(), p.name);
      if (!inGroup) place(p);
    }
  }
  for (const DroppedParam &d : g_.dropped) {
    DroppedSlot s{d.name, p_.droppedElements, d.shape[0] * d.shape[1], paramOffset_.at(d.of), d.keep, d.site};
    droppedOffset_[d.name] = s.offset;
    p_.droppedElements += s.elements;
    p_.dropped.push_back(s);
  }
  // Slots in declaration order for the table; offsets already fixed.
  std::map<std::string, size_t> order;
  for (size_t i = 0; i < g_.params.size(); ++i) order[g_.params[i].name] = i;
  std::sort(p_.params.begin(), p_.params.end(),
            [&](const ParamSlot &a, const ParamSlot &b) { return order[a.name] < order[b.name]; });
}

Operand ProgramBuilder::operand(const Edge &e, int sweep, const std::map<NodeId, int> &locals, bool scalar) {
  const Node &n = g_.node(e.src);
  Operand o;
  o.scalar = scalar;
  if (n.op == Op::Const) {
    o.kind = Operand::Kind::Const;
    o.value = n.value;
  } else if (n.op == Op::Keep) {
    o.kind = Operand::Kind::Mask;
    o.value = n.value;
    o.site = n.offset;
    o.inverted = n.inverted;
    o.perSequence = n.perSequence;
    o.delay = e.delay;
  } else if (n.op == Op::Active) {
    o.kind = Operand::Kind::Active;
    o.weighted = n.weighted;
    o.delay = e.delay;
  } else if (n.op == Op::Param) {
    o.kind = Operand::Kind::Param;
    o.paramOffset = paramOffset_.at(n.params[0]);
  } else if (n.op == Op::Input && n.backward && n.name == "grad.loss") {
    o.kind = Operand::Kind::LossSeed;
  } else if (sweep >= 0 && e.delay == 0 && m_.sweepOf[e.src] == sweep && locals.count(e.src)) {
    o.kind = Operand::Kind::Local;
    o.local = locals.at(e.src);
  } else if (m_.view[e.src]) { // the slice's source, at the slice's offset
    const Edge &in = n.inputs[0];
    o = operand(Edge(in.src, in.delay + e.delay), -1, {}, scalar);
    RNNC_ASSERT(o.kind == Operand::Kind::Load || o.kind == Operand::Kind::Param, "a slice view of a local");
    if (o.kind == Operand::Kind::Param) o.paramOffset += n.offset;
    else o.shift += n.offset;
  } else {
    o.kind = Operand::Kind::Load;
    o.buffer = m_.bufferOf[e.src];
    o.delay = e.delay;
    o.scalar = scalar || n.isIndex;
  }
  return o;
}

Instr ProgramBuilder::instr(NodeId id, int sweep, Sweep::Kind kind, const std::map<NodeId, int> &locals) {
  const Node &n = g_.node(id);
  Instr in;
  in.op = n.op;
  in.node = id;
  in.width = n.width;
  in.offset = n.offset;
  in.inWidth = n.inputs.empty() ? 1 : g_.node(n.inputs[0].src).width;
  for (const Edge &e : n.inputs) {
    // A width-1 value read by a map op is broadcast (a concat's pieces are not).
    bool scalar = (kind == Sweep::Kind::Map && g_.node(e.src).width == 1 && n.op != Op::Concat) || n.op == Op::Broadcast;
    in.args.push_back(operand(e, sweep, locals, scalar));
    if (n.op == Op::Concat) in.pieces.push_back(g_.node(e.src).width);
  }
  if (n.op == Op::Embed) in.paramOffset = paramOffset_.at(n.params[0]);
  return in;
}

void ProgramBuilder::emitSweeps(KernelIR &k, const Kernel &launch) {
  int current = -1;
  std::map<NodeId, int> locals;
  for (NodeId id : launch.nodes) {
    const Node &n = g_.node(id);
    int s = m_.sweepOf[id];
    if (s != current) {
      current = s;
      locals.clear();
      Sweep sw;
      sw.kind = m_.sweeps[s];
      sw.width = sw.kind == Sweep::Kind::Map ? n.width : g_.node(n.inputs[0].src).width;
      k.sweeps.push_back(sw);
    }
    Sweep &sw = k.sweeps.back();
    if (m_.view[id]) { // read in place by the later sweeps; a local only if this one reads it
      bool readHere = false;
      for (auto [user, slot] : users_[id]) readHere |= m_.sweepOf[user] == s && g_.node(user).inputs[slot].delay == 0;
      if (!readHere) continue;
    }
    Instr in = instr(id, s, sw.kind, locals);
    in.store = m_.bufferOf[id];
    locals[id] = static_cast<int>(sw.body.size());
    sw.body.push_back(std::move(in));
  }
  k.sweeps.erase(std::remove_if(k.sweeps.begin(), k.sweeps.end(), [](const Sweep &sw) { return sw.body.empty(); }),
                 k.sweeps.end());
}

bool ProgramBuilder::emitLibraryCall(KernelIR &k, NodeId id, std::string &error) {
  const Node &n = g_.node(id);
  auto operandBuffer = [&](const Edge &e, int &buffer, int32_t &delay) {
    const Node &src = g_.node(e.src);
    if (m_.bufferOf[e.src] < 0) {
      error = fmt::format("the compiled engines cannot yet apply {} to a {} (a value that is the same at every step); "
                          "--engine interp can", opMnemonic(n.op), opMnemonic(src.op));
      return false;
    }
    buffer = m_.bufferOf[e.src];
    delay = e.delay;
    return true;
  };
  k.out = n.op == Op::MatMul || n.op == Op::MatMulT ? m_.bufferOf[id] : -1;
  if (!operandBuffer(n.inputs[0], k.a, k.aDelay)) return false;
  if (n.inputs.size() > 1 && !operandBuffer(n.inputs[1], k.b, k.bDelay)) return false;
  k.dropped = droppedOffset_.count(n.params[0]) > 0;
  k.paramOffset = k.dropped ? droppedOffset_.at(n.params[0]) : paramOffset_.at(n.params[0]);
  const GraphParam &w = *g_.param(n.params[0]);
  k.rows = w.shape[0];
  k.cols = w.shape.size() > 1 ? w.shape[1] : 1;
  switch (n.op) {
  case Op::MatMul:
    k.kind = KernelIR::Kind::Gemm;
    k.rows = n.width; // every stacked param's rows
    break;
  case Op::MatMulT: k.kind = KernelIR::Kind::GemmT; break;
  case Op::GradMatrix: k.kind = KernelIR::Kind::GradMatrix; break;
  case Op::GradVector:
    k.kind = KernelIR::Kind::GradVector;
    k.rows = n.width;
    k.cols = g_.node(n.inputs[0].src).width;
    break;
  case Op::GradEmbed: k.kind = KernelIR::Kind::GradEmbed; break;
#include "ir/TableOpCases.def"
  case Op::Input:
  case Op::Param:
  case Op::Const:
  case Op::Keep:
  case Op::Active:
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Neg:
  case Op::Sum:
  case Op::Mean:
  case Op::CrossEntropy:
  case Op::Mse:
  case Op::Slice:
  case Op::Concat:
  case Op::Embed:
  case Op::SoftmaxMinusOneHot:
  case Op::Pad:
  case Op::Broadcast: RNNC_UNREACHABLE("not a library call");
  }
  return true;
}

void ProgramBuilder::addEquations(KernelIR &k) {
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (NodeId id : k.nodes)
    for (const SourceRange &r : g_.node(id).locs)
      if (r.valid() && seen.insert({r.begin.file, r.begin.offset}).second) k.equations.push_back(r);
}

bool ProgramBuilder::emitEpilogue(const std::string &state, NodeId id, int buffer, std::string &error) {
  const Node &n = g_.node(id);
  if (!depths_.count(state)) {
    error = fmt::format("the compiled engines cannot yet compute the initial-state gradient of {}: the passes removed "
                        "every read of it at an earlier step (--engine interp can)", state);
    return false;
  }
  int64_t k = depths_.at(state);
  PortIR port;
  port.name = state;
  port.width = n.width;
  port.depth = static_cast<int>(k);
  if (n.op == Op::Const) {
    port.leaf.kind = Operand::Kind::Const;
    port.leaf.value = n.value;
    p_.stateGrads.push_back(port);
    return true;
  }
  // Its own buffer of k steps, all padding: rows -k .. -1.
  RNNC_ASSERT(buffer >= 0 && m_.buffers[buffer].node == id, "the plan has no buffer for an initial-state gradient");
  port.buffer = buffer;
  KernelIR kernel;
  kernel.name = fmt::format("initial_{}", p_.kernels.size());
  kernel.epilogue = true;
  kernel.epilogueDepth = k;
  kernel.nodes = {id};
  if (opKind(n.op) == OpKind::Gemm) {
    if (!emitLibraryCall(kernel, id, error)) return false;
    kernel.out = port.buffer;
  } else if (isMap(n.op)) {
    Sweep sw;
    sw.width = n.width;
    Instr in = instr(id, -1, Sweep::Kind::Map, {});
    for (const auto &[node, input] : m_.initialZeros) // a backward value before its first step: zero
      if (node == id) in.args[input] = Operand();
    in.store = port.buffer;
    sw.body.push_back(in);
    kernel.sweeps.push_back(sw);
  } else if (n.op == Op::Input && n.backward) {
    // The adjoint is a seed alone (a final state's, when nothing else reaches
    // the state): copied out of the seed's padding as seed + 0.
    Sweep sw;
    sw.width = n.width;
    Instr in;
    in.op = Op::Add;
    in.node = id;
    in.width = n.width;
    in.args = {operand(Edge(id), -1, {}, false), Operand()};
    in.store = port.buffer;
    sw.body.push_back(in);
    kernel.sweeps.push_back(sw);
  } else {
    error = fmt::format("the compiled engines cannot yet compute the initial-state gradient of {} (a {})", state,
                        opMnemonic(n.op));
    return false;
  }
  addEquations(kernel);
  p_.epilogue.push_back(static_cast<int>(p_.kernels.size()));
  p_.kernels.push_back(std::move(kernel));
  p_.stateGrads.push_back(port);
  return true;
}

PortIR ProgramBuilder::port(const std::string &name, const Edge &e) {
  const Node &n = g_.node(e.src);
  PortIR port;
  port.name = name;
  port.width = n.width;
  port.index = n.isIndex;
  port.delay = e.delay;
  if (n.op == Op::Const || n.op == Op::Param) {
    port.leaf = operand(e, -1, {}, n.width == 1);
  } else {
    port.buffer = m_.bufferOf[e.src];
  }
  return port;
}

void ProgramBuilder::checkMemory() const {
  // Each kernel's stage and place in run order: forward stages, backward
  // stages, then the initial-state gradients (stage -1).
  size_t kernels = p_.kernels.size(), buffers = p_.buffers.size();
  std::vector<int> stageOf(kernels, -1), order(kernels, 0);
  // A stage the CPU runs in blocks inside a loop also lives at the loop.
  std::vector<int> stageOrder(p_.stages.size()), blockOrder(kernels, -1);
  int next = 0;
  for (bool backward : {false, true})
    for (size_t s = 0; s < p_.stages.size(); ++s) {
      if (p_.stages[s].backward != backward) continue;
      stageOrder[s] = next++;
      for (int k : p_.stages[s].kernels) {
        stageOf[k] = static_cast<int>(s);
        order[k] = stageOrder[s];
      }
    }
  for (size_t s = 0; s < p_.stages.size(); ++s)
    if (p_.stages[s].blockLoop >= 0)
      for (int k : p_.stages[s].kernels) blockOrder[k] = stageOrder[static_cast<size_t>(p_.stages[s].blockLoop)];
  for (int k : p_.epilogue) order[k] = next;
  auto loopOf = [&](int s) { // the loop a stage runs in on the CPU, -1
    const StageIR &st = p_.stages[static_cast<size_t>(s)];
    return st.loop && st.scan.plan == LoopPlan::Sequential ? s : st.blockLoop;
  };
  struct Load {
    int buffer, stage;
    int32_t delay;
    int64_t before; // steps before the first the kernel runs (the initial-state gradients)
  };
  std::vector<Load> loads;
  // Lives on the CPU (a stage in blocks at its loop) and on CUDA (every stage in its place).
  std::vector<int> writer(buffers, -2), first(buffers, INT_MAX), last(buffers, -1), cudaFirst(buffers, INT_MAX),
      cudaLast(buffers, -1);
  auto touch = [&](int b, size_t k) {
    const int at = blockOrder[k] >= 0 ? blockOrder[k] : order[k];
    first[b] = std::min(first[b], at);
    last[b] = std::max(last[b], at);
    cudaFirst[b] = std::min(cudaFirst[b], order[k]);
    cudaLast[b] = std::max(cudaLast[b], order[k]);
  };
  for (size_t k = 0; k < kernels; ++k) {
    const KernelIR &kernel = p_.kernels[k];
    auto store = [&](int b) {
      if (b < 0) return;
      writer[b] = stageOf[k];
      touch(b, k);
    };
    auto read = [&](int b, int32_t delay) {
      if (b < 0) return;
      loads.push_back({b, stageOf[k], delay, kernel.epilogueDepth});
      touch(b, k);
    };
    for (const Sweep &sw : kernel.sweeps)
      for (const Instr &in : sw.body) {
        store(in.store);
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) read(o.buffer, o.delay);
      }
    store(kernel.out);
    read(kernel.a, kernel.aDelay);
    read(kernel.b, kernel.bDelay);
  }
  for (const Load &l : loads) {
    const Buffer &b = p_.buffers[l.buffer];
    std::string what = fmt::format("{} read at delay {} by stage {}", b.name, l.delay, l.stage);
    if (b.stepLocal) RNNC_ASSERT(l.stage == writer[l.buffer] && l.delay == 0, what + ": a step-local buffer");
    else if (b.ring && l.stage < 0) // the initial-state gradients: steps the loop (backward in time) wrote last
      RNNC_ASSERT(p_.stages[writer[l.buffer]].direction < 0 && -l.before - l.delay >= 0 && -l.delay <= b.ring,
                  what + ": a step its ring no longer holds");
    else if (b.ring) RNNC_ASSERT(l.stage == writer[l.buffer] && std::abs(l.delay) < b.ring, what + ": past its ring");
    else if (b.lastSteps)
      RNNC_ASSERT(l.stage >= 0 && p_.stages[l.stage].loop && p_.stages[l.stage].scan.plan == LoopPlan::Sequential &&
                      l.delay == 0,
                  what + ": a seed that keeps its last steps, outside a loop run step by step");
    else RNNC_ASSERT(l.delay + l.before <= b.padBefore && -l.delay <= b.padAfter, what + ": past its padding");
    if (b.block) // made and read block by block inside one loop, at the same step
      RNNC_ASSERT(l.delay == 0 && l.stage >= 0 && writer[l.buffer] >= 0 &&
                      loopOf(l.stage) == loopOf(writer[l.buffer]) && loopOf(l.stage) >= 0,
                  what + ": a block of steps, outside its loop's blocks");
  }
  std::set<int> ports{p_.lossBuffer};
  for (const auto *list : {&p_.inputs, &p_.outputs, &p_.states, &p_.seeds, &p_.inputGrads, &p_.stateGrads, &p_.stateSeeds})
    for (const PortIR &port : *list) ports.insert(port.buffer);
  std::map<int, std::vector<int>> memory, cudaMemory; // owner -> the buffers that use its memory
  for (size_t b = 0; b < buffers; ++b) {
    const Buffer &buf = p_.buffers[b];
    RNNC_ASSERT(!(buf.stepLocal || buf.ring) || (writer[b] >= 0 && p_.stages[writer[b]].scan.plan == LoopPlan::Sequential),
                buf.name + ": fewer than T steps, not written by a loop that runs step by step");
    const bool stateRing = buf.ring && std::any_of(p_.states.begin(), p_.states.end(), [&](const PortIR &s) {
      return s.buffer == static_cast<int>(b);
    });
    RNNC_ASSERT(!ports.count(static_cast<int>(b)) || (buf.rowsPerStep() == 1 && buf.shares < 0) || buf.fixed ||
                    buf.lastSteps || stateRing,
                buf.name + ": a port's buffer must keep every step, in memory of its own");
    const int owner = memoryOwner(p_, static_cast<int>(b), false);
    const Buffer &o = p_.buffers[owner];
    RNNC_ASSERT(o.width == buf.width && o.rowsPerStep() == buf.rowsPerStep() && o.fixedRows() == buf.fixedRows() &&
                    (!o.block || buf.block),
                buf.name + ": shares memory of another shape");
    if (last[b] >= 0) memory[owner].push_back(static_cast<int>(b));
    const int cudaOwner = memoryOwner(p_, static_cast<int>(b), true);
    const Buffer &c = p_.buffers[cudaOwner];
    RNNC_ASSERT(!ports.count(static_cast<int>(b)) || p_.cudaShares[b] < 0, buf.name + ": a port's buffer shares on CUDA");
    RNNC_ASSERT(c.width == buf.width && c.rowsPerStep() == buf.rowsPerStep() && c.fixedRows() == buf.fixedRows(),
                buf.name + ": shares memory of another shape on CUDA");
    if (cudaLast[b] >= 0) cudaMemory[cudaOwner].push_back(static_cast<int>(b));
  }
  auto apart = [&](std::map<int, std::vector<int>> &owners, const std::vector<int> &from, const std::vector<int> &to,
                   const char *target) {
    for (auto &[owner, users] : owners) {
      std::sort(users.begin(), users.end(), [&](int x, int y) { return from[x] < from[y]; });
      for (size_t i = 1; i < users.size(); ++i)
        RNNC_ASSERT(to[users[i - 1]] < from[users[i]], p_.buffers[users[i]].name + " and " + p_.buffers[users[i - 1]].name +
                                                           " share memory while both live (" + target + ")");
    }
  };
  apart(memory, first, last, "the CPU");
  apart(cudaMemory, cudaFirst, cudaLast, "CUDA");
}

bool ProgramBuilder::build(std::string &error) {
  RNNC_ASSERT(m_.planned && m_.sweepOf.size() == g_.nodes.size(), "the kernel IR needs plan-memory's plan");
  p_.name = g_.name;
  users_ = g_.users();
  depths_ = stateDepths(g_);
  layoutParams();
  p_.buffers = m_.buffers;
  // The CPU's sharing is the program's; CUDA's waits in cudaShares (keepEveryStep).
  for (Buffer &b : p_.buffers) {
    p_.cudaShares.push_back(b.shares);
    b.shares = b.cpuShares;
  }
  p_.onesWidth = m_.onesWidth;
  p_.panelElements = m_.panelElements;
  p_.zeroRowElements = m_.zeroRowElements;
  p_.roundedPerRow = m_.roundedPerRow;
  p_.gridBarrierWords = m_.gridBarrierWords;

  int launch = 0;
  for (const Stage &stage : c_.schedule.stages) {
    StageIR s;
    s.loop = stage.loop;
    s.direction = stage.direction;
    s.backward = stage.backward;
    s.stream = stage.stream;
    s.waits = stage.waits;
    s.blockLoop = m_.blockLoop.empty() ? -1 : m_.blockLoop[p_.stages.size()];
    for (const Kernel &launchK : stage.kernels) {
      KernelIR k;
      k.perStep = stage.loop;
      k.nodes = launchK.nodes;
      NodeId first = launchK.nodes.front();
      OpKind kind = opKind(g_.node(first).op);
      if (launchK.nodes.size() == 1 && (kind == OpKind::Gemm || kind == OpKind::Accumulate)) {
        if (!emitLibraryCall(k, first, error)) return false;
        k.panelOffset = m_.panelOffsetOf[first];
        k.name = fmt::format("{}_{}", k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT ? "gemm" : "grad",
                             launch);
      } else {
        emitSweeps(k, launchK);
        const bool empty = std::all_of(k.sweeps.begin(), k.sweeps.end(), [](const Sweep &sw) { return sw.body.empty(); });
        if (empty) { // only views (-O0's slices, read where their source is): nothing to launch
          ++launch;
          continue;
        }
        k.name = fmt::format("fused_{}", launch);
      }
      addEquations(k);
      s.kernels.push_back(static_cast<int>(p_.kernels.size()));
      p_.kernels.push_back(std::move(k));
      ++launch;
    }
    p_.stages.push_back(std::move(s));
    // The plan says which loops run in parallel over time and gave them scratch.
    int index = static_cast<int>(p_.stages.size()) - 1;
    const ScanScratch &scratch = m_.scans[static_cast<size_t>(index)];
    if (scratch.aggregates < 0) continue;
    std::string why;
    bool built = buildScanIR(p_, index, c_.loopPlans[stage.loopIndex], c_.timeParallel.mode == TimeParallelMode::Auto,
                             c_.timeParallel.newtonIterations, scratch, why);
    RNNC_ASSERT(built, fmt::format("stage {}: plan-memory planned a scan the kernel IR cannot build: {}", index, why));
  }

  for (const GraphPort &in : g_.inputs) p_.inputs.push_back(port(in.name, in.value));
  for (const GraphPort &out : g_.outputs) {
    p_.outputs.push_back(port(out.name, out.value));
    if (p_.outputs.back().buffer < 0) {
      error = fmt::format("output {} is a {}, the same at every step: the compiled engines cannot yet return it "
                          "(--engine interp can)", out.name, opMnemonic(g_.node(out.value.src).op));
      return false;
    }
  }
  for (const auto &[name, id] : g_.states()) {
    PortIR s = port(name, Edge(id));
    s.depth = static_cast<int>(depths_.at(name));
    p_.states.push_back(s);
  }
  p_.hasBackward = !g_.grads.seeds.empty();
  p_.hasMasks = m_.maskKeyBytes > 0;
  p_.droppedGrads = m_.droppedGradElements > 0;
  p_.hasLengths = m_.lengths;
  p_.packWidth = m_.packWidth;
  p_.dtype = c_.dtype;
  for (const GraphPort &seed : g_.grads.seeds) {
    if (seed.name == "loss") {
      p_.lossSeeded = true;
      continue;
    }
    if (seed.name.rfind("final.", 0) != 0) {
      p_.seeds.push_back(port(seed.name, seed.value));
      continue;
    }
    // A state's final value: named as the state, its depth as the state's.
    PortIR s = port(seed.name.substr(6), seed.value);
    auto depth = depths_.find(s.name);
    if (depth == depths_.end()) {
      error = fmt::format("the compiled engines cannot yet seed the final value of {}: the passes removed every read of "
                          "it at an earlier step (--engine interp can)", s.name);
      return false;
    }
    s.depth = static_cast<int>(depth->second);
    p_.stateSeeds.push_back(s);
  }
  for (const GraphPort &in : g_.grads.inputs) p_.inputGrads.push_back(port(in.name, in.value));
  if (g_.loss) {
    p_.hasLoss = true;
    p_.lossBuffer = m_.bufferOf[*g_.loss];
  }
  for (const auto &[name, id] : g_.grads.states) {
    int buffer = -1;
    for (const auto &[state, b] : m_.initialStateGradients)
      if (state == name) buffer = b;
    if (!emitEpilogue(name, id, buffer, error)) return false;
  }
  checkMemory();
  return true;
}

/// Marks the products whose one result is an input's gradient that no other
/// launch reads (KernelIR::inputGrad): the only writer of the port's buffer,
/// which nothing loads (the host copies it out).
void markInputGradientProducts(Program &p) {
  std::vector<int> writes(p.buffers.size()), reads(p.buffers.size());
  auto count = [](std::vector<int> &n, int b) {
    if (b >= 0) ++n[static_cast<size_t>(b)];
  };
  for (const KernelIR &k : p.kernels) {
    forEachSweep(k, [&](const Sweep &sw) {
      for (const Instr &in : sw.body) {
        count(writes, in.store);
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) count(reads, o.buffer);
      }
    });
    count(writes, k.out);
    count(reads, k.a);
    count(reads, k.b);
  }
  for (const StageIR &s : p.stages)
    for (int b : s.scan.states) count(reads, b), count(writes, b);
  for (size_t g = 0; g < p.inputGrads.size(); ++g) {
    const int b = p.inputGrads[g].buffer;
    if (b < 0 || writes[static_cast<size_t>(b)] != 1 || reads[static_cast<size_t>(b)] != 0) continue;
    for (KernelIR &k : p.kernels)
      if ((k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT) && k.out == b)
        k.inputGrad = static_cast<int>(g);
  }
}

} // namespace

void keepEveryStep(Program &p) {
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    p.buffers[b].block = p.buffers[b].caller = false;
    p.buffers[b].shares = p.cudaShares[b];
  }
  for (StageIR &s : p.stages) s.blockLoop = -1;
  p.zeroRowElements = 0;
}

bool buildProgram(const Compilation &c, Program &out, std::string &error) {
  out = Program();
  if (!ProgramBuilder(c, out).build(error)) return false;
  if (c.optimize) storeConcatPiecesInPlace(out);
  markInputGradientProducts(out);
  for (size_t g = 0; g < out.inputGrads.size(); ++g) { // written in input_grads[g] itself: only when it is there
    const int b = out.inputGrads[g].buffer;
    if (b < 0 || !out.buffers[static_cast<size_t>(b)].caller) continue;
    for (const KernelIR &k : out.kernels)
      RNNC_ASSERT(k.out != b || k.inputGrad == static_cast<int>(g),
                  out.buffers[static_cast<size_t>(b)].name + ": the caller's array, written when the caller does not want it");
  }
  return true;
}

} // namespace rnnc::codegen
