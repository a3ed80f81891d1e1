// 1. Saved: with a backward graph, the forward values it reads. Without one,
//    for each node, the values its adjoint will read: products and
//    quotients their operands; sigmoid, tanh, exp and sqrt their result; other
//    nonlinear functions, min/max and mse their operands; a GEMM its vector (for
//    dW = sum_t delta_t x_t^T); cross_entropy its logits; embed its index.
//    Inputs and params are kept anyway and are not counted.
// 2. Buffers: a value needs memory when it leaves its launch (read by another
//    launch, another stage, a later step, or an output). It is live from its
//    launch to its last reader in issue order (to the end if saved or read
//    across steps). Buffers are reused first-fit among those free on the same
//    stream, growing to the largest value they hold; a value a stage on another
//    stream reads keeps its buffer.
#include "passes/PlanMemory.h"

#include <algorithm>
#include <map>
#include <queue>
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
  std::vector<bool> readElsewhere(g.nodes.size(), false); // by a stage on another stream
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
      if (stageOf[id] >= 0 && c.schedule.stages[stageOf[id]].stream != c.schedule.stages[stageOf[e.src]].stream)
        readElsewhere[e.src] = true;
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
  // A buffer is reused only on the stream that used it, where launches run in
  // issue order; one a stage on another stream read stays with its value
  // (stages on different streams may run at the same time). Per stream, the
  // buffers free before a value is written are kept in index order: first fit.
  const auto &stages = c.schedule.stages;
  std::vector<int> stageOfLaunch(position + 1, 0);
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (launchOf[id] >= 0) stageOfLaunch[launchOf[id]] = stageOf[id];
  struct Interval { int from, to; int64_t bytes; bool readElsewhere; };
  std::vector<Interval> live;
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (escapes[id] && launchOf[id] >= 0)
      live.push_back({launchOf[id], std::max(lastUse[id], launchOf[id]), 4 * g.node(id).width, readElsewhere[id]});
  std::sort(live.begin(), live.end(), [](const Interval &a, const Interval &b) { return a.from < b.from; });
  using Release = std::pair<int, int>; // (free after launch, buffer)
  std::map<int, std::priority_queue<Release, std::vector<Release>, std::greater<Release>>> busy; // per stream
  std::map<int, std::set<int>> idle;                                                           // per stream
  std::vector<int64_t> buffers; // bytes of each
  for (const Interval &v : live) {
    plan.unsharedBytesPerStep += v.bytes;
    int stream = stages[stageOfLaunch[v.from]].stream;
    auto &pending = busy[stream];
    while (!pending.empty() && pending.top().first < v.from) {
      idle[stream].insert(pending.top().second);
      pending.pop();
    }
    int chosen;
    if (!idle[stream].empty()) {
      chosen = *idle[stream].begin();
      idle[stream].erase(idle[stream].begin());
      buffers[chosen] = std::max(buffers[chosen], v.bytes);
    } else {
      chosen = static_cast<int>(buffers.size());
      buffers.push_back(v.bytes);
    }
    if (v.to < end && !v.readElsewhere) pending.push({v.to, chosen});
  }
  plan.buffers = static_cast<int>(buffers.size());
  for (int64_t b : buffers) plan.bufferBytesPerStep += b;
  c.memory = std::move(plan);
}

} // namespace rnnc
