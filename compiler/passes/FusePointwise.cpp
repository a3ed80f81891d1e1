// 1. Stages: a loop per recurrent component; time-parallel nodes by level.
//    Leaves (inputs, params, constants) belong to no stage: kernels read them.
// 2. Phases, in dataflow order: a node's phase is the highest of its inputs'
//    in the same stage, plus one after a GEMM; in a time-parallel stage also
//    plus one after a delayed read (a kernel over all steps cannot read what
//    another thread of the same kernel writes).
//    Then, back to front, a pointwise node moves as late as its readers allow,
//    so work no GEMM waits for joins the last kernel instead of opening one.
// 3. Launches per stage, by phase: the fused kernel of phase k, then the GEMMs
//    of phase k.
// Before 1 (optimizing): time-parallel elementwise work whose every reader is
// in one loop, at the same step, sinks into that loop (consumers first, so
// chains sink whole): it fuses into the loop's kernel instead of taking a
// pass over all steps and a buffer for all of them (the bias sum beside a
// hoisted GEMM, the 1 - s factors of BPTT). Its inputs are all time-parallel,
// so they are ready before the loop starts. Nothing sinks into a loop that
// runs as a scan: its step then holds only what depends on its state.
// Then the mirror image: elementwise work whose every input comes from one
// loop at the same step (leaves and, for backward work, forward values
// aside) rises into that loop (producers first), so what the loop writes
// for it stays a local instead of a buffer of every step (a GRU's gate
// gradients padded to 3H and summed for W_ih's products).
#include "passes/FusePointwise.h"

#include "ir/Order.h"

#include <map>
#include <tuple>

namespace rnnc {

bool isGemm(Op op) { return opKind(op) == OpKind::Gemm || op == Op::GradMatrix; }

std::vector<NodeId> dataflowOrder(const Graph &g, const TimeClasses &time) {
  return postOrder(g, [&](NodeId user, const Edge &e) {
    return e.delay == 0 || time.loopOf[user] < 0 || time.loopOf[e.src] != time.loopOf[user];
  });
}

namespace {

/// The loop each node runs in: its own, or the loop it sinks into (-1: none).
std::vector<int> loopsAfterSinking(const Graph &g, const TimeClasses &time, const std::vector<NodeId> &order,
                                   bool optimize, const std::vector<LoopPlan> &plans) {
  std::vector<int> loop(g.nodes.size(), -1);
  for (NodeId id = 0; id < g.nodes.size(); ++id) loop[id] = g.node(id).dead ? -1 : time.loopOf[id];
  if (!optimize) return loop;
  auto users = g.users();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    NodeId id = *it;
    const Node &n = g.node(id);
    OpKind kind = opKind(n.op);
    bool elementwise = kind == OpKind::Pointwise || (kind == OpKind::Layout && n.op != Op::SoftmaxMinusOneHot);
    if (loop[id] >= 0 || !elementwise || users[id].empty()) continue;
    int target = -2;
    for (auto [user, slot] : users[id]) {
      int l = loop[user];
      bool sequential = l >= 0 && (static_cast<size_t>(l) >= plans.size() || plans[l] == LoopPlan::Sequential);
      bool ok = sequential && g.node(user).inputs[slot].delay == 0 && g.node(user).backward == n.backward &&
                (target == -2 || target == l);
      target = ok ? l : -1;
      if (!ok) break;
    }
    if (target >= 0) loop[id] = target;
  }
  // Rising, producers first: elementwise work after a loop whose every input
  // is that loop's at the same step (or a leaf, or, for backward work, a
  // forward value: all ready before the loop) joins it. Its inputs then need
  // not be kept for every step (a GRU's gate gradients, padded and summed).
  for (NodeId id : order) {
    const Node &n = g.node(id);
    OpKind kind = opKind(n.op);
    bool elementwise = kind == OpKind::Pointwise || (kind == OpKind::Layout && n.op != Op::SoftmaxMinusOneHot);
    if (loop[id] >= 0 || n.dead || !elementwise) continue;
    int target = -2;
    for (const Edge &e : n.inputs) {
      const Node &in = g.node(e.src);
      if (opKind(in.op) == OpKind::Leaf || (n.backward && !in.backward)) continue;
      int l = loop[e.src];
      bool sequential = l >= 0 && (static_cast<size_t>(l) >= plans.size() || plans[l] == LoopPlan::Sequential);
      bool ok = sequential && e.delay == 0 && in.backward == n.backward && opKind(in.op) != OpKind::Gemm &&
                opKind(in.op) != OpKind::Accumulate && (target == -2 || target == l);
      target = ok ? l : -1;
      if (!ok) break;
    }
    if (target >= 0) loop[id] = target;
  }
  return loop;
}

} // namespace

void fusePointwise(Compilation &c) {
  const Graph &g = c.graph;
  const TimeClasses &time = c.time;
  std::map<std::tuple<int, int, bool>, size_t> stageOf; // (loop or -1, level, backward) -> index
  std::vector<Stage> stages;
  std::vector<int> phase(g.nodes.size(), 0);
  std::vector<int> stageIndex(g.nodes.size(), -1);
  std::vector<NodeId> order = dataflowOrder(g, time);
  std::vector<int> loopOf = loopsAfterSinking(g, time, order, c.optimize, c.loopPlans);
  for (NodeId id : order) {
    const Node &n = g.node(id);
    if (opKind(n.op) == OpKind::Leaf) continue;
    int loop = loopOf[id];
    auto key = std::make_tuple(loop, loop < 0 ? time.level[id] : 0, n.backward);
    auto it = stageOf.find(key);
    if (it == stageOf.end()) {
      Stage s;
      s.loop = loop >= 0;
      s.loopIndex = loop;
      s.direction = loop >= 0 ? time.loops[loop].direction : +1;
      s.level = loop >= 0 ? time.loops[loop].level : time.level[id];
      s.backward = n.backward;
      it = stageOf.emplace(key, stages.size()).first;
      stages.push_back(std::move(s));
    }
    Stage &stage = stages[it->second];
    stage.nodes.push_back(id);
    stageIndex[id] = static_cast<int>(it->second);
    int p = 0;
    for (Edge e : n.inputs) {
      if (stageIndex[e.src] != stageIndex[id]) continue;
      if (stage.loop && e.delay != 0) continue; // the previous (next) step
      OpKind kind = opKind(g.node(e.src).op);
      bool boundary = kind == OpKind::Gemm || kind == OpKind::Accumulate || (!stage.loop && e.delay != 0);
      p = std::max(p, phase[e.src] + (boundary ? 1 : 0));
    }
    phase[id] = p;
  }
  // As late as possible: readers come after their inputs in `order`.
  std::vector<int> lastPhase(stages.size(), 0);
  for (NodeId id : order)
    if (stageIndex[id] >= 0) lastPhase[stageIndex[id]] = std::max(lastPhase[stageIndex[id]], phase[id]);
  auto users = g.users();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    NodeId id = *it;
    if (stageIndex[id] < 0 || opKind(g.node(id).op) == OpKind::Gemm || opKind(g.node(id).op) == OpKind::Accumulate) continue;
    const Stage &stage = stages[stageIndex[id]];
    int late = lastPhase[stageIndex[id]];
    for (auto [user, slot] : users[id]) {
      if (stageIndex[user] != stageIndex[id]) continue;
      int32_t delay = g.node(user).inputs[slot].delay;
      if (stage.loop && delay != 0) continue;
      late = std::min(late, phase[user] - (!stage.loop && delay != 0 ? 1 : 0));
    }
    phase[id] = std::max(phase[id], late);
  }
  for (Stage &stage : stages) {
    int last = 0;
    for (NodeId id : stage.nodes) last = std::max(last, phase[id]);
    for (int k = 0; k <= last; ++k) {
      if (!c.optimize) break;
      Kernel fused;
      std::vector<Kernel> gemms;
      for (NodeId id : stage.nodes) {
        if (phase[id] != k) continue;
        OpKind kind = opKind(g.node(id).op);
        if (kind == OpKind::Gemm || kind == OpKind::Accumulate) gemms.push_back({isGemm(g.node(id).op), {id}});
        else fused.nodes.push_back(id);
      }
      if (!fused.nodes.empty()) stage.kernels.push_back(std::move(fused));
      for (auto &gk : gemms) stage.kernels.push_back(std::move(gk));
    }
    if (!c.optimize)
      for (NodeId id : stage.nodes) stage.kernels.push_back({isGemm(g.node(id).op), {id}});
  }
  c.schedule.stages = std::move(stages);
}

} // namespace rnnc
