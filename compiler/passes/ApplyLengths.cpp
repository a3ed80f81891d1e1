#include "passes/ApplyLengths.h"

#include "ir/Builder.h"

#include <fmt/format.h>
#include <map>

namespace rnnc {

namespace {

/// The loop direction of each computed value (or float input) read across steps (+1: read as
/// h[t-1], -1: as h[t+1]); false after an error.
bool readDirections(const Graph &g, DiagnosticEngine &diags, std::map<NodeId, int> &direction) {
  bool ok = true;
  auto note = [&](const Edge &e) {
    const Node &s = g.node(e.src);
    // An input read back needs a carry for its final state; read ahead (the
    // padding at len-1, where a sequence alone reads zeros) it is left as it is.
    const bool carriedInput = s.op == Op::Input && !s.isIndex && e.delay > 0;
    if (e.delay == 0 || (opKind(s.op) == OpKind::Leaf && !carriedInput)) return;
    const std::string name = s.name.empty() ? "a value" : "'" + s.name + "'";
    if (std::abs(e.delay) > 1) {
      diags.error(e.loc, fmt::format("--lengths needs every state read one step away; {} is read {} steps {}", name,
                                     std::abs(e.delay), e.delay > 0 ? "back" : "ahead"));
      ok = false;
      return;
    }
    auto [it, fresh] = direction.emplace(e.src, e.delay);
    if (!fresh && it->second != e.delay) {
      diags.error(e.loc, fmt::format("--lengths cannot end {} both before and after: it is read one step back and "
                                     "one step ahead",
                                     name));
      ok = false;
    }
  };
  for (const Node &n : g.nodes)
    if (!n.dead)
      for (const Edge &e : n.inputs) note(e);
  for (const GraphPort &o : g.outputs) note(o.value);
  return ok;
}

} // namespace

bool applyLengths(Graph &g, DiagnosticEngine &diags) {
  std::map<NodeId, int> direction;
  if (!readDirections(g, diags, direction)) return false;
  GraphBuilder b(g);
  const SourceRange here{};
  const NodeId active = b.active(false, here);
  const NodeId inactive = b.op(Op::Sub, {{b.constant(1, here), 0}, {active, 0}}, here);

  // s' = active·s + inactive·s'[t - d]: past the end the value stays what the
  // last valid step (or, for h[t+1], the initial state) left.
  std::map<NodeId, NodeId> carried;
  for (auto [s, d] : direction) {
    const SourceRange loc = g.node(s).locs.empty() ? here : g.node(s).locs.front();
    const NodeId fresh = b.op(Op::Mul, {{active, 0}, {s, 0}}, loc);
    const NodeId sum = b.op(Op::Add, {{fresh, 0}, {fresh, 0}}, loc); // its second term is set below
    const NodeId kept = b.op(Op::Mul, {{inactive, 0}, {sum, d}}, loc);
    g.node(sum).inputs[1] = {kept, 0};
    g.node(sum).name = g.node(s).name; // the state's name: its initial and final state
    if (g.node(s).op != Op::Input) g.node(s).name.clear(); // an input keeps its port's name
    carried[s] = sum;
  }
  for (Node &n : g.nodes) {
    if (n.dead) continue;
    for (Edge &e : n.inputs)
      if (e.delay != 0 && carried.count(e.src)) e.src = carried.at(e.src); // the carry reads sum, not s
  }
  for (GraphPort &o : g.outputs) {
    if (o.value.delay != 0 && carried.count(o.value.src)) o.value.src = carried.at(o.value.src);
    // Zero past the end.
    o.value = {b.op(Op::Mul, {{active, 0}, o.value}, o.decl), 0};
  }
  if (g.loss) g.loss = b.op(Op::Mul, {{b.active(true, here), 0}, {*g.loss, 0}}, here);
  return true;
}

} // namespace rnnc
