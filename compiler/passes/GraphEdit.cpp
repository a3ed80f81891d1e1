#include "passes/GraphEdit.h"

#include "ir/Order.h"
#include "support/Crash.h"

namespace rnnc {

Edge UseRewriter::resolve(Edge e) const {
  for (auto it = to_.find(e.src); it != to_.end(); it = to_.find(e.src)) {
    e.src = it->second.src;
    e.delay += it->second.delay;
  }
  return e;
}

void UseRewriter::apply(Graph &g) const {
  if (to_.empty()) return;
  for (Node &n : g.nodes) {
    if (n.dead) continue;
    for (Edge &e : n.inputs) e = resolve(e);
  }
  for (GraphPort &o : g.outputs) o.value = resolve(o.value);
  for (GraphPort &p : g.grads.inputs) p.value = resolve(p.value);
  for (auto &[name, id] : g.grads.states) {
    Edge e = resolve(Edge(id));
    RNNC_ASSERT(e.delay == 0, "a state's gradient replaced by a delayed value");
    id = e.src;
  }
  for (auto &[name, id] : g.grads.params) RNNC_ASSERT(!to_.count(id), "a param's gradient replaced");
  if (g.loss) {
    Edge e = resolve(Edge(*g.loss));
    RNNC_ASSERT(e.delay == 0, "the loss replaced by a delayed value");
    g.loss = e.src;
  }
}

void replaceAllUses(Graph &g, NodeId from, Edge to) {
  UseRewriter r;
  r.redirect(from, to);
  r.apply(g);
}

std::vector<NodeId> topologicalOrder(const Graph &g) {
  return postOrder(g, [](NodeId, const Edge &e) { return e.delay == 0; });
}

} // namespace rnnc
