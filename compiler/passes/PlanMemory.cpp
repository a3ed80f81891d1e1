// 1. Saved: with a backward graph, the forward values it reads. Without one,
//    for each node, the values its adjoint will read: products and
//    quotients their operands; sigmoid, tanh, exp and sqrt their result; other
//    nonlinear functions, min/max and mse their operands; a GEMM its vector (for
//    dW = sum_t delta_t x_t^T); cross_entropy its logits; embed its index.
//    Inputs and params are kept anyway and are not counted.
// 2. Buffers: a value needs memory when it leaves its launch (read by another
//    launch, another stage, a later step, or an output). It is live from its
//    launch to its last reader in issue order (to the end if saved or read
//    across steps). Buffers are reused first-fit among those free, growing to
//    the largest value they hold.
#include "passes/PlanMemory.h"

#include <algorithm>
#include <set>

namespace rnnc {

namespace {

enum class Keep { None, Inputs, Result };

Keep adjointNeeds(Op op) {
  switch (op) {
  case Op::Mul: case Op::Div: case Op::Relu: case Op::Log: case Op::Softplus: case Op::Abs:
  case Op::HardSigmoid: case Op::Silu: case Op::Min: case Op::Max: case Op::Mse:
  case Op::MatMul: case Op::CrossEntropy: case Op::Embed:
    return Keep::Inputs;
  case Op::Sigmoid: case Op::Tanh: case Op::Exp: case Op::Sqrt:
    return Keep::Result;
  default:
    return Keep::None;
  }
}

} // namespace

void planMemory(Compilation &c) {
  const Graph &g = c.graph;
  MemoryPlan plan;
  std::set<NodeId> saved;
  auto keep = [&](NodeId id) {
    Op op = g.node(id).op;
    if (op != Op::Input && op != Op::Param && op != Op::Const) saved.insert(id);
  };
  // With a backward graph, what it reads of the forward values is exactly what
  // must be kept; without one, the adjoint rules tell what it will read.
  bool hasBackward = false;
  for (const Node &n : g.nodes) hasBackward |= !n.dead && n.backward;
  for (NodeId id = 0; id < g.nodes.size() && hasBackward; ++id)
    if (!g.node(id).dead && g.node(id).backward)
      for (Edge e : g.node(id).inputs)
        if (!g.node(e.src).backward) keep(e.src);
  for (NodeId id = 0; id < g.nodes.size() && !hasBackward; ++id) {
    if (g.node(id).dead) continue;
    Keep k = adjointNeeds(g.node(id).op);
    if (k == Keep::Result) keep(id);
    if (k == Keep::Inputs)
      for (Edge e : g.node(id).inputs) keep(e.src);
  }
  plan.saved.assign(saved.begin(), saved.end());
  for (NodeId id : plan.saved) plan.savedBytesPerStep += 4 * g.node(id).width;

  // Launch positions in issue order.
  std::vector<int> launchOf(g.nodes.size(), -1), stageOf(g.nodes.size(), -1);
  int position = 0;
  for (size_t s = 0; s < c.schedule.stages.size(); ++s)
    for (const Kernel &k : c.schedule.stages[s].kernels) {
      for (NodeId id : k.nodes) {
        launchOf[id] = position;
        stageOf[id] = static_cast<int>(s);
      }
      ++position;
    }
  const int end = position + 1;
  std::vector<int> lastUse(g.nodes.size(), -1);
  std::vector<bool> escapes(g.nodes.size(), false);
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    if (g.node(id).dead) continue;
    for (Edge e : g.node(id).inputs) {
      if (launchOf[e.src] < 0) continue;
      bool other = launchOf[id] != launchOf[e.src] || e.delay != 0;
      if (!other) continue;
      escapes[e.src] = true;
      // Read by a later step of a loop: live across the whole loop.
      int until = e.delay != 0 ? end : launchOf[id];
      lastUse[e.src] = std::max(lastUse[e.src], until);
    }
  }
  for (const GraphPort &o : g.outputs)
    if (launchOf[o.value.src] >= 0) {
      escapes[o.value.src] = true;
      lastUse[o.value.src] = end;
    }
  for (NodeId id : plan.saved)
    if (launchOf[id] >= 0) {
      escapes[id] = true;
      lastUse[id] = end;
    }
  // A buffer freed by one stage may be reused by another only if that stage is
  // ordered after it: the same stage, or one that needs it, directly or not
  // (stages on different streams run at the same time otherwise).
  const auto &stages = c.schedule.stages;
  std::vector<std::vector<bool>> ordered(stages.size(), std::vector<bool>(stages.size(), false));
  for (size_t s = 0; s < stages.size(); ++s) {
    ordered[s][s] = true;
    for (int a : stages[s].after)
      for (size_t k = 0; k < stages.size(); ++k)
        if (ordered[a][k]) ordered[s][k] = true; // `after` points to earlier stages, already complete
  }
  std::vector<int> stageOfLaunch(position + 1, 0);
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (launchOf[id] >= 0) stageOfLaunch[launchOf[id]] = stageOf[id];
  struct Interval { int from, to; int64_t bytes; };
  std::vector<Interval> live;
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (escapes[id] && launchOf[id] >= 0) live.push_back({launchOf[id], std::max(lastUse[id], launchOf[id]), 4 * g.node(id).width});
  std::sort(live.begin(), live.end(), [](const Interval &a, const Interval &b) { return a.from < b.from; });
  struct Buffer { int freeAfter; int64_t bytes; std::set<int> users; }; // users: stages that touched it
  std::vector<Buffer> buffers;
  for (const Interval &v : live) {
    plan.unsharedBytesPerStep += v.bytes;
    int writer = stageOfLaunch[v.from];
    int lastReader = v.to >= end ? -1 : stageOfLaunch[v.to];
    int chosen = -1;
    for (size_t b = 0; b < buffers.size() && chosen < 0; ++b) {
      if (buffers[b].freeAfter >= v.from) continue;
      bool safe = true;
      for (int u : buffers[b].users) safe &= ordered[writer][u];
      if (safe) chosen = static_cast<int>(b);
    }
    if (chosen < 0) {
      chosen = static_cast<int>(buffers.size());
      buffers.push_back({v.to, v.bytes, {}});
    }
    Buffer &buf = buffers[chosen];
    buf.freeAfter = v.to;
    buf.bytes = std::max(buf.bytes, v.bytes);
    buf.users.insert(writer);
    if (lastReader >= 0) buf.users.insert(lastReader);
  }
  plan.buffers = static_cast<int>(buffers.size());
  for (auto &b : buffers) plan.bufferBytesPerStep += b.bytes;
  c.memory = std::move(plan);
}

} // namespace rnnc
