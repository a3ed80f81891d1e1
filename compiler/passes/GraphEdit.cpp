#include "passes/GraphEdit.h"

#include "support/Crash.h"

namespace rnnc {

void replaceAllUses(Graph &g, NodeId from, Edge to) {
  for (Node &n : g.nodes) {
    if (n.dead) continue;
    for (Edge &e : n.inputs)
      if (e.src == from) {
        e.src = to.src;
        e.delay += to.delay;
      }
  }
  for (GraphPort &o : g.outputs)
    if (o.value.src == from) {
      o.value.src = to.src;
      o.value.delay += to.delay;
    }
  if (g.loss && *g.loss == from) {
    RNNC_ASSERT(to.delay == 0, "the loss replaced by a delayed value");
    g.loss = to.src;
  }
}

std::vector<NodeId> topologicalOrder(const Graph &g) {
  std::vector<int> state(g.nodes.size(), 0);
  std::vector<NodeId> order;
  order.reserve(g.nodes.size());
  for (NodeId root = 0; root < g.nodes.size(); ++root) {
    if (g.node(root).dead || state[root]) continue;
    std::vector<std::pair<NodeId, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto &[id, next] = stack.back();
      const auto &ins = g.node(id).inputs;
      if (next < ins.size()) {
        Edge e = ins[next++];
        if (e.delay == 0 && !state[e.src]) {
          state[e.src] = 1;
          stack.push_back({e.src, 0});
        }
        continue;
      }
      order.push_back(id);
      stack.pop_back();
    }
  }
  return order;
}

} // namespace rnnc
