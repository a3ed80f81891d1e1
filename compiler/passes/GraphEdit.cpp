#include "passes/GraphEdit.h"

#include "ir/Order.h"
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
  for (GraphPort &p : g.grads.inputs)
    if (p.value.src == from) {
      p.value.src = to.src;
      p.value.delay += to.delay;
    }
  for (auto &[name, id] : g.grads.states)
    if (id == from) {
      RNNC_ASSERT(to.delay == 0, "a state's gradient replaced by a delayed value");
      id = to.src;
    }
  for (auto &[name, id] : g.grads.params)
    if (id == from) RNNC_UNREACHABLE("a param's gradient replaced");
  if (g.loss && *g.loss == from) {
    RNNC_ASSERT(to.delay == 0, "the loss replaced by a delayed value");
    g.loss = to.src;
  }
}

std::vector<NodeId> topologicalOrder(const Graph &g) {
  return postOrder(g, [](NodeId, const Edge &e) { return e.delay == 0; });
}

} // namespace rnnc
