#include "ir/Verifier.h"

#include "ir/Builder.h"
#include "support/Crash.h"

#include <fmt/format.h>
#include <set>

namespace rnnc {

std::string verifyGraph(const Graph &g) {
  std::set<std::string> names;
  for (const GraphParam &p : g.params) {
    if (!names.insert(p.name).second) return fmt::format("param '{}' listed twice", p.name);
    if (p.shape.empty() || p.shape.size() > 2) return fmt::format("param '{}' has rank {}", p.name, p.shape.size());
  }
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node &n = g.node(id);
    if (n.dead) continue;
    std::string why = checkNode(g, n);
    if (!why.empty()) return fmt::format("%{} ({}): {}", id, opMnemonic(n.op), why);
  }
  auto live = [&](Edge e) { return e.src < g.nodes.size() && !g.node(e.src).dead; };
  for (const GraphPort &p : g.inputs)
    if (!live(p.value) || g.node(p.value.src).op != Op::Input) return fmt::format("input '{}' is not a live input node", p.name);
  std::set<NodeId> ports;
  for (const GraphPort &p : g.inputs) ports.insert(p.value.src);
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead && g.node(id).op == Op::Input && !ports.count(id))
      return fmt::format("%{} is an input node that is no input port", id);
  for (const GraphPort &p : g.outputs)
    if (!live(p.value)) return fmt::format("output '{}' is not a live node", p.name);
  if (g.loss && !live({*g.loss, 0})) return "the loss is not a live node";

  // Delay-0 edges form a DAG (a cycle would be an algebraic loop, which the
  // front end reports as a user error before any graph is built).
  std::vector<int> state(g.nodes.size(), 0); // 0 new, 1 on stack, 2 done
  for (NodeId root = 0; root < g.nodes.size(); ++root) {
    if (g.node(root).dead || state[root]) continue;
    std::vector<std::pair<NodeId, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto &[id, next] = stack.back();
      const auto &ins = g.node(id).inputs;
      if (next == ins.size()) {
        state[id] = 2;
        stack.pop_back();
        continue;
      }
      Edge e = ins[next++];
      if (e.delay != 0) continue;
      if (state[e.src] == 1) return fmt::format("a cycle of delay-0 edges through %{}", e.src);
      if (state[e.src] == 0) {
        state[e.src] = 1;
        stack.push_back({e.src, 0});
      }
    }
  }
  return "";
}

void verifyOrDie(const Graph &g, const char *after) {
  std::string why = verifyGraph(g);
  RNNC_ASSERT(why.empty(), fmt::format("the graph is malformed after {}: {}", after, why));
}

} // namespace rnnc
