#include "ir/Verifier.h"

#include "ir/Builder.h"
#include "ir/Order.h"
#include "support/Crash.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>

namespace rnnc {

GraphProblem findGraphProblem(const Graph &g) {
  std::set<std::string> names;
  for (const GraphParam &p : g.params) {
    if (!names.insert(p.name).second) return {fmt::format("param '{}' listed twice", p.name)};
    if (p.shape.empty() || p.shape.size() > 2) return {fmt::format("param '{}' has rank {}", p.name, p.shape.size())};
  }
  for (const DroppedParam &d : g.dropped) {
    if (!names.insert(d.name).second) return {fmt::format("param '{}' listed twice", d.name)};
    const GraphParam *of = g.param(d.of);
    if (!of || g.droppedParam(d.of) || of->shape.size() != 2 || of->shape != d.shape)
      return {fmt::format("dropped param '{}' is not of a caller's matrix param of its shape", d.name)};
    if (!(d.keep > 0 && d.keep <= 1)) return {fmt::format("dropped param '{}' keeps with probability {}", d.name, d.keep)};
  }
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node &n = g.node(id);
    if (n.dead) continue;
    // Passes point diagnostics and rewritten nodes at a node's first location.
    if (n.locs.empty()) return {fmt::format("%{} ({}) has no source location", id, opMnemonic(n.op)), id};
    std::string why = checkNode(g, n);
    // A product of several params reads the one block stack-gemms laid out.
    if (why.empty() && opKind(n.op) == OpKind::Gemm && n.params.size() > 1) {
      const GraphParam *first = g.param(n.params[0]);
      if (!first || first->stackedWith != n.params)
        why = fmt::format("its params {} are not one stacked block", fmt::join(n.params, ", "));
    }
    if (!why.empty()) return {fmt::format("%{} ({}): {}", id, opMnemonic(n.op), why), id};
    // Forward values never depend on backward ones: a rewrite of a backward
    // node keeps its flag, or the forward pass would compute part of BPTT.
    for (const Edge &e : n.inputs)
      if (!n.backward && e.src < g.nodes.size() && g.node(e.src).backward)
        return {fmt::format("%{} ({}) is forward but reads the backward value %{}", id, opMnemonic(n.op), e.src), id};
  }
  auto live = [&](Edge e) { return e.src < g.nodes.size() && !g.node(e.src).dead; };
  for (const GraphPort &p : g.inputs)
    if (!live(p.value) || g.node(p.value.src).op != Op::Input) return {fmt::format("input '{}' is not a live input node", p.name)};
  std::set<NodeId> ports;
  for (const GraphPort &p : g.inputs) ports.insert(p.value.src);
  for (const GraphPort &p : g.grads.seeds) ports.insert(p.value.src);
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead && g.node(id).op == Op::Input && !ports.count(id))
      return {fmt::format("%{} is an input node that is no input port", id), id};
  for (const GraphPort &p : g.outputs)
    if (!live(p.value)) return {fmt::format("output '{}' is not a live node", p.name)};
  if (g.loss && !live({*g.loss, 0})) return {"the loss is not a live node"};
  for (const auto &[name, id] : g.grads.params)
    if (!live({id, 0}) || opKind(g.node(id).op) != OpKind::Accumulate) return {fmt::format("the gradient of '{}' is not a live accumulation", name)};
  for (const GraphPort &p : g.grads.inputs)
    if (!live(p.value)) return {fmt::format("the gradient of input '{}' is not live", p.name)};
  for (const auto &[name, id] : g.grads.states)
    if (!live({id, 0})) return {fmt::format("the gradient of state '{}' is not live", name)};

  // Delay-0 edges form a DAG (a cycle would be an algebraic loop, which the
  // front end reports as a user error before any graph is built).
  NodeId cycle = kNoNode;
  postOrder(g, [](NodeId, const Edge &e) { return e.delay == 0; }, &cycle);
  if (cycle != kNoNode) return {fmt::format("a cycle of delay-0 edges through %{}", cycle), cycle};
  return {};
}

std::string verifyGraph(const Graph &g) { return findGraphProblem(g).message; }

void verifyOrDie(const Graph &g, const char *after) {
  std::string why = verifyGraph(g);
  RNNC_ASSERT(why.empty(), fmt::format("the graph is malformed after {}: {}", after, why));
}

} // namespace rnnc
