// 1. Params: one flat array in declaration order, a stacked group laid out
//    side by side (by rows) where its first member is declared.
// 2. Sweeps: the nodes of a fused launch in order; a node joins the current
//    sweep when it maps element i to element i of the sweep's width and reads
//    what the sweep computed at the same element; reductions and softmax are
//    sweeps of their own.
// 3. Buffers: a value is stored when anything reads it outside its sweep (a
//    later sweep, another launch, a later step, a port, the initial-state
//    gradients) or a library call computes it; a buffer is padded by the
//    largest delay it is read with before the first step and after the last.
//    A value a loop writes and reads only within the same step (and nothing
//    else reads) keeps one step's rows, reused every step; one the loop reads
//    back k steps keeps a ring of k + 1 steps' rows. A buffer whose
//    stages (forward, then backward, then the initial-state gradients) all come
//    after another's last reuses its memory, when both have the same width
//    and padding; ports never share (they are read after the calls). A loop
//    run in parallel over time keeps every step's rows (its chunks run at
//    once) and gets its ScanIR (ScanIR.cpp).
// 4. Operands: a value of the same sweep is a local, a stored one a load at
//    t - delay, a param an element of the flat array, a constant a literal.
#include "codegen/KernelIR.h"

#include "codegen/ScanIR.h"

#include "interp/Interpreter.h"
#include "passes/FusePointwise.h"
#include "support/Crash.h"

#include <algorithm>
#include <climits>
#include <fmt/format.h>
#include <map>
#include <queue>
#include <set>
#include <tuple>

namespace rnnc::codegen {

namespace {

bool isMap(Op op) {
  OpKind k = opKind(op);
  return k == OpKind::Pointwise || (k == OpKind::Layout && op != Op::SoftmaxMinusOneHot);
}

/// C identifier from a value's name ("h1.c" -> "h1_c").
std::string identifier(const std::string &name, NodeId id) {
  std::string s;
  for (char ch : name) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v" + s;
  return fmt::format("{}_{}", s, id);
}

class ProgramBuilder {
public:
  ProgramBuilder(const Compilation &c, Program &p) : c_(c), g_(c.graph), p_(p) {}
  bool build(std::string &error);

private:
  void layoutParams();
  void formSweeps();
  void markStored();
  int bufferOf(NodeId id);
  Operand operand(const Edge &e, int sweepOf, const std::map<NodeId, int> &locals, bool scalarWanted);
  /// The op of node id at element i, its operands read from `sweep`'s locals.
  Instr instr(NodeId id, int sweep, Sweep::Kind kind, const std::map<NodeId, int> &locals);
  void emitSweeps(KernelIR &k, const Kernel &launch);
  bool emitLibraryCall(KernelIR &k, NodeId id, std::string &error);
  bool emitEpilogue(const std::string &state, NodeId id, std::string &error);
  void addEquations(KernelIR &k);
  void markStepLocal();
  void shareBuffers();
  PortIR port(const std::string &name, const Edge &e);
  void padFor(NodeId src, int32_t delay, int64_t extraBefore = 0);

  const Compilation &c_;
  const Graph &g_;
  Program &p_;
  std::map<std::string, int64_t> paramOffset_;
  std::vector<int> sweepOf_;     // node -> sweep id (unique over the program), -1 outside fused launches
  std::vector<Sweep::Kind> sweepKind_;
  std::vector<bool> stored_;
  std::vector<int> buffer_;      // node -> buffer
  std::map<std::string, int64_t> depths_;
  std::vector<bool> view_; // slices read in place of a buffer of their own
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
  // Slots in declaration order for the table; offsets already fixed.
  std::map<std::string, size_t> order;
  for (size_t i = 0; i < g_.params.size(); ++i) order[g_.params[i].name] = i;
  std::sort(p_.params.begin(), p_.params.end(),
            [&](const ParamSlot &a, const ParamSlot &b) { return order[a.name] < order[b.name]; });
}

void ProgramBuilder::formSweeps() {
  sweepOf_.assign(g_.nodes.size(), -1);
  for (const Stage &stage : c_.schedule.stages)
    for (const Kernel &k : stage.kernels) {
      int current = -1;
      int64_t width = -1;
      for (NodeId id : k.nodes) {
        const Node &n = g_.node(id);
        if (k.gemm || opKind(n.op) == OpKind::Accumulate || opKind(n.op) == OpKind::Gemm) continue;
        bool joins = current >= 0 && isMap(n.op) && sweepKind_[current] == Sweep::Kind::Map && n.width == width;
        for (const Edge &e : n.inputs) {
          if (!joins) break;
          if (sweepOf_[e.src] != current) continue;
          bool sameIndex = opKind(n.op) == OpKind::Pointwise && g_.node(e.src).width == n.width && e.delay == 0;
          joins = sameIndex;
        }
        if (!joins) {
          current = static_cast<int>(sweepKind_.size());
          sweepKind_.push_back(isMap(n.op) ? Sweep::Kind::Map
                                           : n.op == Op::SoftmaxMinusOneHot ? Sweep::Kind::Softmax : Sweep::Kind::Reduce);
          width = isMap(n.op) ? n.width : -1;
        }
        sweepOf_[id] = current;
      }
    }
}

void ProgramBuilder::markStored() {
  stored_.assign(g_.nodes.size(), false);
  const auto &users = users_;
  for (NodeId id = 0; id < g_.nodes.size(); ++id) {
    const Node &n = g_.node(id);
    if (n.dead || n.op == Op::Const || n.op == Op::Param) continue;
    if (n.op == Op::Input) {
      stored_[id] = !(n.backward && n.name == "grad.loss");
      continue;
    }
    if (sweepOf_[id] < 0 || sweepKind_[sweepOf_[id]] != Sweep::Kind::Map) {
      stored_[id] = opKind(n.op) != OpKind::Accumulate;
      continue;
    }
    for (auto [user, slot] : users[id]) {
      const Edge &e = g_.node(user).inputs[slot];
      if (sweepOf_[user] != sweepOf_[id] || e.delay != 0) stored_[id] = true;
    }
  }
  auto mark = [&](const Edge &e) {
    const Node &n = g_.node(e.src);
    if (n.op != Op::Const && n.op != Op::Param && !(n.backward && n.op == Op::Input && n.name == "grad.loss"))
      stored_[e.src] = true;
  };
  for (const GraphPort &o : g_.outputs) mark(o.value);
  if (g_.loss) mark(Edge(*g_.loss));
  for (const auto &[name, id] : g_.states()) mark(Edge(id));
  for (const GraphPort &p : g_.grads.inputs) mark(p.value);
  std::vector<bool> pinned(g_.nodes.size(), false); // ports and what the initial-state gradients read
  for (const auto &[name, id] : g_.grads.states)
    for (const Edge &e : g_.node(id).inputs) {
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
  std::vector<int> stageOf(g_.nodes.size(), -1);
  for (size_t st = 0; st < c_.schedule.stages.size(); ++st)
    for (NodeId id : c_.schedule.stages[st].nodes) stageOf[id] = static_cast<int>(st);
  view_.assign(g_.nodes.size(), false);
  for (NodeId id : dataflowOrder(g_, c_.time)) {
    const Node &n = g_.node(id);
    if (n.dead || n.op != Op::Slice || !stored_[id] || pinned[id] || sweepOf_[id] < 0) continue;
    const Node &src = g_.node(n.inputs[0].src);
    if (src.op == Op::Const || (src.op == Op::Input && src.backward && src.name == "grad.loss")) continue;
    bool fused = src.op == Op::Param || src.op == Op::Input || stageOf[n.inputs[0].src] == stageOf[id];
    for (auto [user, slot] : users[id]) fused &= sweepOf_[user] >= 0 && stageOf[user] == stageOf[id];
    if (!fused) continue;
    view_[id] = true;
    stored_[id] = false;
    if (src.op != Op::Param && !view_[n.inputs[0].src]) stored_[n.inputs[0].src] = true;
  }
}

int ProgramBuilder::bufferOf(NodeId id) {
  if (buffer_[id] >= 0) return buffer_[id];
  const Node &n = g_.node(id);
  Buffer b;
  b.node = id;
  b.name = identifier(n.name.empty() ? opMnemonic(n.op) : n.name, id);
  b.width = n.isIndex ? 1 : n.width;
  b.index = n.isIndex;
  b.backward = n.backward;
  buffer_[id] = static_cast<int>(p_.buffers.size());
  p_.buffers.push_back(b);
  return buffer_[id];
}

void ProgramBuilder::padFor(NodeId src, int32_t delay, int64_t extraBefore) {
  if (buffer_[src] < 0) return;
  Buffer &b = p_.buffers[buffer_[src]];
  b.padBefore = std::max<int64_t>(b.padBefore, delay + extraBefore);
  b.padAfter = std::max<int64_t>(b.padAfter, -delay);
}

Operand ProgramBuilder::operand(const Edge &e, int sweep, const std::map<NodeId, int> &locals, bool scalar) {
  const Node &n = g_.node(e.src);
  Operand o;
  o.scalar = scalar;
  if (n.op == Op::Const) {
    o.kind = Operand::Kind::Const;
    o.value = n.value;
  } else if (n.op == Op::Param) {
    o.kind = Operand::Kind::Param;
    o.paramOffset = paramOffset_.at(n.params[0]);
  } else if (n.op == Op::Input && n.backward && n.name == "grad.loss") {
    o.kind = Operand::Kind::LossSeed;
  } else if (sweep >= 0 && e.delay == 0 && sweepOf_[e.src] == sweep && locals.count(e.src)) {
    o.kind = Operand::Kind::Local;
    o.local = locals.at(e.src);
  } else if (view_[e.src]) { // the slice's source, at the slice's offset
    const Edge &in = n.inputs[0];
    o = operand(Edge(in.src, in.delay + e.delay), -1, {}, scalar);
    RNNC_ASSERT(o.kind == Operand::Kind::Load || o.kind == Operand::Kind::Param, "a slice view of a local");
    if (o.kind == Operand::Kind::Param) o.paramOffset += n.offset;
    else o.shift += n.offset;
    padFor(in.src, in.delay + e.delay);
  } else {
    o.kind = Operand::Kind::Load;
    o.buffer = buffer_[e.src];
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
    int s = sweepOf_[id];
    if (s != current) {
      current = s;
      locals.clear();
      Sweep sw;
      sw.kind = sweepKind_[s];
      sw.width = sw.kind == Sweep::Kind::Map ? n.width : g_.node(n.inputs[0].src).width;
      k.sweeps.push_back(sw);
    }
    Sweep &sw = k.sweeps.back();
    if (view_[id]) { // read in place by the later sweeps; a local only if this one reads it
      bool readHere = false;
      for (auto [user, slot] : users_[id]) readHere |= sweepOf_[user] == s && g_.node(user).inputs[slot].delay == 0;
      if (!readHere) continue;
    }
    Instr in = instr(id, s, sw.kind, locals);
    in.store = stored_[id] ? bufferOf(id) : -1;
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
    if (buffer_[e.src] < 0) {
      error = fmt::format("the compiled engines cannot yet apply {} to a {} (a value that is the same at every step); "
                          "--engine interp can", opMnemonic(n.op), opMnemonic(src.op));
      return false;
    }
    buffer = buffer_[e.src];
    delay = e.delay;
    return true;
  };
  k.out = n.op == Op::MatMul || n.op == Op::MatMulT ? buffer_[id] : -1;
  if (!operandBuffer(n.inputs[0], k.a, k.aDelay)) return false;
  if (n.inputs.size() > 1 && !operandBuffer(n.inputs[1], k.b, k.bDelay)) return false;
  k.paramOffset = paramOffset_.at(n.params[0]);
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
  default: RNNC_UNREACHABLE("not a library call");
  }
  return true;
}

void ProgramBuilder::addEquations(KernelIR &k) {
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (NodeId id : k.nodes)
    for (const SourceRange &r : g_.node(id).locs)
      if (r.valid() && seen.insert({r.begin.file, r.begin.offset}).second) k.equations.push_back(r);
}

bool ProgramBuilder::emitEpilogue(const std::string &state, NodeId id, std::string &error) {
  const Node &n = g_.node(id);
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
  Buffer b;
  b.node = id;
  b.name = identifier("initial_" + state, id);
  b.width = n.width;
  b.backward = true;
  b.padBefore = k;
  b.fixed = true;
  port.buffer = static_cast<int>(p_.buffers.size());
  p_.buffers.push_back(b);
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
    in.store = port.buffer;
    sw.body.push_back(in);
    kernel.sweeps.push_back(sw);
  } else {
    error = fmt::format("the compiled engines cannot yet compute the initial-state gradient of {} (a {})", state,
                        opMnemonic(n.op));
    return false;
  }
  for (const Edge &e : n.inputs) padFor(e.src, e.delay, k);
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
    port.buffer = buffer_[e.src];
    padFor(e.src, e.delay);
  }
  return port;
}

void ProgramBuilder::markStepLocal() {
  // The stage each kernel runs in; who writes each buffer and where it is read.
  std::vector<int> stageOfKernel(p_.kernels.size(), -1);
  for (size_t s = 0; s < p_.stages.size(); ++s)
    for (int k : p_.stages[s].kernels) stageOfKernel[k] = static_cast<int>(s);
  std::vector<int> writer(p_.buffers.size(), -1);
  std::vector<int32_t> farthest(p_.buffers.size(), 0); // the largest |delay| it is read with
  std::vector<std::set<int>> readerStages(p_.buffers.size()); // -1: the initial-state gradients
  for (size_t k = 0; k < p_.kernels.size(); ++k) {
    const KernelIR &kernel = p_.kernels[k];
    int stage = stageOfKernel[k];
    auto reads = [&](int b, int32_t delay) {
      if (b < 0) return;
      farthest[b] = std::max(farthest[b], std::abs(delay));
      readerStages[b].insert(stage);
    };
    for (const Sweep &sw : kernel.sweeps)
      for (const Instr &in : sw.body) {
        if (in.store >= 0) writer[in.store] = stage;
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) reads(o.buffer, o.delay);
      }
    if (kernel.out >= 0) writer[kernel.out] = stage;
    reads(kernel.a, kernel.aDelay);
    reads(kernel.b, kernel.bDelay);
  }
  std::set<int> ports;
  for (const auto *list : {&p_.inputs, &p_.outputs, &p_.states, &p_.seeds, &p_.inputGrads, &p_.stateGrads})
    for (const PortIR &port : *list) ports.insert(port.buffer);
  ports.insert(p_.lossBuffer);
  for (size_t b = 0; b < p_.buffers.size(); ++b) {
    Buffer &buf = p_.buffers[b];
    int stage = writer[b];
    if (buf.fixed || buf.input >= 0 || buf.index || ports.count(static_cast<int>(b)) || stage < 0 ||
        !p_.stages[stage].loop || p_.stages[stage].scan.plan != LoopPlan::Sequential) // chunks run at once
      continue;
    bool sameStage = true;
    for (int s : readerStages[b]) sameStage &= s == stage;
    if (!sameStage) continue;
    // Read only by its own loop: one step's rows, or a ring of the steps the
    // loop reads back (its padding is zeros, which the ring starts with).
    if (farthest[b] == 0 && !buf.padBefore && !buf.padAfter) buf.stepLocal = true;
    else buf.ring = farthest[b] + 1;
  }
}

void ProgramBuilder::shareBuffers() {
  // Stages in the order they run: forward, backward, then the epilogue.
  std::vector<int> kernelOrder(p_.kernels.size(), 0);
  int next = 0;
  for (bool backward : {false, true})
    for (const StageIR &s : p_.stages) {
      if (s.backward != backward) continue;
      for (int k : s.kernels) kernelOrder[k] = next;
      ++next;
    }
  for (int k : p_.epilogue) kernelOrder[k] = next;
  std::vector<int> first(p_.buffers.size(), INT32_MAX), last(p_.buffers.size(), -1);
  auto touch = [&](int b, int at) {
    if (b < 0) return;
    first[b] = std::min(first[b], at);
    last[b] = std::max(last[b], at);
  };
  for (size_t k = 0; k < p_.kernels.size(); ++k) {
    const KernelIR &kernel = p_.kernels[k];
    int at = kernelOrder[k];
    for (const Sweep &sw : kernel.sweeps)
      for (const Instr &in : sw.body) {
        touch(in.store, at);
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) touch(o.buffer, at);
      }
    touch(kernel.out, at);
    touch(kernel.a, at);
    touch(kernel.b, at);
  }
  std::set<int> pinned;
  for (const auto *list : {&p_.inputs, &p_.outputs, &p_.states, &p_.seeds, &p_.inputGrads, &p_.stateGrads})
    for (const PortIR &port : *list) pinned.insert(port.buffer);
  pinned.insert(p_.lossBuffer);
  std::vector<int> candidates;
  for (size_t b = 0; b < p_.buffers.size(); ++b) {
    const Buffer &buf = p_.buffers[b];
    if (!pinned.count(static_cast<int>(b)) && !buf.fixed && !buf.stepLocal && !buf.ring && !buf.index && buf.input < 0 &&
        last[b] >= 0)
      candidates.push_back(static_cast<int>(b));
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return first[a] < first[b]; });
  // Slots of one shape (width and padding), in the order they were made. A
  // buffer takes the first free one of its shape; candidates come in order of
  // their first use, so a slot once free for one stays free for the next.
  struct Shape {
    std::set<int> free;  // slot numbers
    std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> busy; // (freeAfter, slot)
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, Shape> shapes;
  std::vector<int> owner; // per slot: the buffer that owns its memory
  for (int b : candidates) {
    Buffer &buf = p_.buffers[b];
    Shape &shape = shapes[{buf.width, buf.padBefore, buf.padAfter}];
    while (!shape.busy.empty() && shape.busy.top().first < first[b]) {
      shape.free.insert(shape.busy.top().second);
      shape.busy.pop();
    }
    int slot;
    if (!shape.free.empty()) {
      slot = *shape.free.begin();
      shape.free.erase(shape.free.begin());
      buf.shares = owner[static_cast<size_t>(slot)];
    } else {
      slot = static_cast<int>(owner.size());
      owner.push_back(b);
    }
    shape.busy.push({last[b], slot});
  }
}

bool ProgramBuilder::build(std::string &error) {
  p_.name = g_.name;
  users_ = g_.users();
  layoutParams();
  formSweeps();
  markStored();
  buffer_.assign(g_.nodes.size(), -1);
  // Inputs first, in port order, so buffer order reads like the signature.
  for (size_t i = 0; i < g_.inputs.size(); ++i) {
    int b = bufferOf(g_.inputs[i].value.src);
    p_.buffers[b].input = static_cast<int>(i);
  }
  for (NodeId id = 0; id < g_.nodes.size(); ++id)
    if (!g_.node(id).dead && stored_[id]) bufferOf(id);
  for (NodeId id = 0; id < g_.nodes.size(); ++id) {
    if (g_.node(id).dead) continue;
    for (const Edge &e : g_.node(id).inputs) padFor(e.src, e.delay);
  }
  depths_ = stateDepths(g_);

  int launch = 0;
  for (const Stage &stage : c_.schedule.stages) {
    StageIR s;
    s.loop = stage.loop;
    s.direction = stage.direction;
    s.backward = stage.backward;
    s.stream = stage.stream;
    s.waits = stage.waits;
    for (const Kernel &launchK : stage.kernels) {
      KernelIR k;
      k.perStep = stage.loop;
      k.nodes = launchK.nodes;
      NodeId first = launchK.nodes.front();
      OpKind kind = opKind(g_.node(first).op);
      if (launchK.nodes.size() == 1 && (kind == OpKind::Gemm || kind == OpKind::Accumulate)) {
        if (!emitLibraryCall(k, first, error)) return false;
        k.name = fmt::format("{}_{}", k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT ? "gemm" : "grad",
                             launch);
      } else {
        emitSweeps(k, launchK);
        k.name = fmt::format("fused_{}", launch);
      }
      addEquations(k);
      s.kernels.push_back(static_cast<int>(p_.kernels.size()));
      p_.kernels.push_back(std::move(k));
      ++launch;
    }
    p_.stages.push_back(std::move(s));
    LoopPlan plan = stage.loop && stage.loopIndex >= 0 && static_cast<size_t>(stage.loopIndex) < c_.loopPlans.size()
                        ? c_.loopPlans[stage.loopIndex]
                        : LoopPlan::Sequential;
    std::string why;
    if (plan != LoopPlan::Sequential)
      buildScanIR(p_, static_cast<int>(p_.stages.size()) - 1, plan, c_.timeParallel.mode == TimeParallelMode::Auto,
                  c_.timeParallel.newtonIterations, why);
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
  for (const GraphPort &seed : g_.grads.seeds) {
    if (seed.name == "loss") {
      p_.lossSeeded = true;
      continue;
    }
    PortIR s = port(seed.name, seed.value);
    p_.buffers[s.buffer].input = static_cast<int>(p_.seeds.size());
    p_.seeds.push_back(s);
  }
  for (const GraphPort &in : g_.grads.inputs) p_.inputGrads.push_back(port(in.name, in.value));
  if (g_.loss) {
    p_.hasLoss = true;
    p_.lossBuffer = buffer_[*g_.loss];
  }
  for (const auto &[name, id] : g_.grads.states)
    if (!emitEpilogue(name, id, error)) return false;
  markStepLocal();
  shareBuffers();
  for (Buffer &b : p_.buffers)
    if (b.input >= 0 && b.index) b.padAfter = std::max<int64_t>(b.padAfter, 0);
  return true;
}

} // namespace

bool buildProgram(const Compilation &c, Program &out, std::string &error) {
  out = Program();
  return ProgramBuilder(c, out).build(error);
}

} // namespace rnnc::codegen
