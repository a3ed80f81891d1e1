// 1. Seeds: an input node dL/dy per output named (read back with the output's
//    own delay reversed), and dL/dloss for the loss.
// 2. The nodes the objective depends on, over any edge, get an adjoint: a sum
//    node made now with its inputs left empty (its contributions may depend on
//    it, through a delay).
// 3. For each such node n and each input edge (m, d): the contribution to m's
//    adjoint, computed at n's step from n's adjoint and n's inputs (the local
//    derivative: a pointwise function's is its row of ir/Pointwise.cpp), read
//    by m's adjoint with delay -d. A scalar broadcast in the
//    forward sum is summed back. Params read through a matrix product or an
//    embedding get their gradient as an accumulation over all steps.
// 4. Each adjoint sum gets its contributions; a vector param read as a value
//    accumulates its adjoint; inputs and states publish theirs.
#include "passes/Autodiff.h"

#include "ir/Builder.h"
#include "ir/Pointwise.h"
#include "ir/Verifier.h"
#include "support/Crash.h"

#include <fmt/format.h>
#include <map>

namespace rnnc {

namespace {

class Differentiator {
public:
  explicit Differentiator(Graph &g) : g_(g), b_(g) {}

  bool run(const Objective &objective, DiagnosticEngine &diags);

private:
  NodeId make(Op op, std::vector<Edge> in) {
    NodeId id = b_.op(op, std::move(in), loc_);
    g_.node(id).backward = true;
    return id;
  }
  NodeId constant(double v) {
    NodeId id = b_.constant(v, loc_);
    g_.node(id).backward = true;
    return id;
  }
  NodeId add(Node n) {
    n.backward = true;
    if (n.locs.empty()) n.locs.push_back(loc_);
    return b_.add(std::move(n));
  }
  NodeId oneMinus(Edge x) { return make(Op::Add, {constant(1), make(Op::Neg, {x})}); }
  void contribute(NodeId m, int32_t delay, NodeId c, int64_t forwardWidth);
  /// Backward's copy of forward mask m (made once).
  NodeId redrawn(NodeId m) {
    auto [it, fresh] = redrawn_.emplace(m, kNoNode);
    if (fresh) {
      Node copy = g_.node(m);
      copy.backward = true;
      copy.name.clear();
      it->second = b_.add(std::move(copy));
    }
    return it->second;
  }
  void localDerivatives(NodeId n);

  Graph &g_;
  GraphBuilder b_;
  SourceRange loc_;                               // of the node being differentiated
  std::vector<NodeId> adjoint_;                   // per forward node, or kNoNode
  std::vector<std::vector<Edge>> contributions_;  // per forward node
  std::map<NodeId, NodeId> redrawn_;              // forward mask -> backward's copy
};

// Adds c (computed at the reader's step) to m's adjoint, read `delay` steps
// later (the reverse of the forward edge's delay). A value broadcast forward
// (m is a scalar, the reader is wider) is summed back.
void Differentiator::contribute(NodeId m, int32_t delay, NodeId c, int64_t forwardWidth) {
  if (adjoint_[m] == kNoNode) return;
  if (g_.node(m).width == 1 && forwardWidth > 1) c = make(Op::Sum, {c});
  contributions_[m].push_back(Edge(c, -delay));
}

void Differentiator::localDerivatives(NodeId n) {
  const Node node = g_.node(n); // a copy: making nodes moves the storage
  loc_ = node.locs.empty() ? SourceRange() : node.locs.front();
  Edge d(adjoint_[n]);
  Edge y(n);
  // A mask the derivative reads is drawn again in backward (the same key, so
  // the same mask) instead of being kept from forward.
  std::vector<Edge> in = node.inputs;
  for (Edge &e : in)
    if (g_.node(e.src).op == Op::Keep && !g_.node(e.src).backward) e.src = redrawn(e.src);
  auto to = [&](size_t i, NodeId c) { contribute(node.inputs[i].src, node.inputs[i].delay, c, node.width); };
  switch (node.op) {
  case Op::Add:
    for (size_t i = 0; i < in.size(); ++i) to(i, d.src);
    break;
  case Op::Sub:
    to(0, d.src);
    to(1, make(Op::Neg, {d}));
    break;
  case Op::Mul:
    for (size_t i = 0; i < in.size(); ++i) {
      std::vector<Edge> factors{d};
      for (size_t j = 0; j < in.size(); ++j)
        if (j != i) factors.push_back(in[j]);
      to(i, make(Op::Mul, factors));
    }
    break;
  case Op::Div:
    to(0, make(Op::Div, {d, in[1]}));
    to(1, make(Op::Neg, {make(Op::Div, {make(Op::Mul, {d, y}), in[1]})}));
    break;
  case Op::Neg: to(0, make(Op::Neg, {d})); break;
#include "ir/TableOpCases.def"
  {
    const PointwiseRule &rule = *pointwiseRule(node.op);
    RNNC_ASSERT(rule.derivative, fmt::format("{} is only in backward graphs", opMnemonic(node.op)));
    AdjointContext c{d, y, in, [&](Op op, std::vector<Edge> e) { return make(op, std::move(e)); },
                     [&](double v) { return constant(v); }, to};
    rule.derivative(c);
    break;
  }
  case Op::Sum:
  case Op::Mean: {
    int64_t w = g_.node(in[0].src).width;
    Edge scaled = node.op == Op::Sum ? d : Edge(make(Op::Mul, {d, constant(1.0 / static_cast<double>(w))}));
    NodeId c = w == 1 ? scaled.src
                      : add({Op::Broadcast, w, false, {scaled}, {}, 0, 0, "", {loc_}, false, true});
    contribute(node.inputs[0].src, node.inputs[0].delay, c, w);
    break;
  }
  case Op::CrossEntropy:
    to(0, make(Op::Mul, {d, add({Op::SoftmaxMinusOneHot, g_.node(in[0].src).width, false, {in[0], in[1]}, {}, 0, 0, "",
                                 {loc_}, false, true})}));
    break;
  case Op::Mse: {
    double scale = 2.0 / static_cast<double>(g_.node(in[0].src).width);
    NodeId c = make(Op::Mul, {d, make(Op::Add, {in[0], make(Op::Neg, {in[1]})}), constant(scale)});
    to(0, c);
    to(1, make(Op::Neg, {c}));
    break;
  }
  case Op::MatMul: {
    RNNC_ASSERT(node.params.size() == 1, "autodiff runs before stack-gemms");
    const GraphParam &w = *g_.param(node.params[0]);
    to(0, add({Op::MatMulT, w.shape[1], false, {d}, {w.name}, 0, 0, "", {loc_}, false, true}));
    NodeId grad = add({Op::GradMatrix, w.shape[0] * w.shape[1], false, {d, in[0]}, {w.name}, 0, 0, "", {loc_}, false, true});
    g_.grads.params.push_back({w.name, grad});
    break;
  }
  case Op::Slice:
    to(0, add({Op::Pad, g_.node(in[0].src).width, false, {d}, {}, 0, node.offset, "", {loc_}, false, true}));
    break;
  case Op::Concat: {
    int64_t offset = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t w = g_.node(in[i].src).width;
      NodeId piece = b_.slice(d, offset, w, loc_);
      g_.node(piece).backward = true;
      contribute(node.inputs[i].src, node.inputs[i].delay, piece, w); // a piece, not a broadcast: no sum back
      offset += w;
    }
    break;
  }
  case Op::Embed: {
    const GraphParam &table = *g_.param(node.params[0]);
    NodeId grad = add({Op::GradEmbed, table.shape[0] * table.shape[1], false, {d, in[0]}, {table.name}, 0, 0, "",
                       {loc_}, false, true});
    g_.grads.params.push_back({table.name, grad});
    break;
  }
  case Op::Input: // leaves and masks have no inputs: run() does not ask
  case Op::Param:
  case Op::Const:
  case Op::Keep:
  case Op::Active: RNNC_UNREACHABLE("a leaf has no local derivatives");
  case Op::SoftmaxMinusOneHot:
  case Op::Pad:
  case Op::Broadcast:
  case Op::MatMulT:
  case Op::GradMatrix:
  case Op::GradVector:
  case Op::GradEmbed: RNNC_UNREACHABLE(fmt::format("{} is only in backward graphs", opMnemonic(node.op)));
  }
}

bool Differentiator::run(const Objective &objective, DiagnosticEngine &diags) {
  const size_t forwardNodes = g_.nodes.size();
  adjoint_.assign(forwardNodes, kNoNode);
  contributions_.assign(forwardNodes, {});
  // 1. Seeds, and the nodes they start from.
  std::vector<std::pair<Edge, NodeId>> seeds; // (what it seeds, seed node)
  for (const std::string &name : objective.outputs) {
    const GraphPort *out = nullptr;
    for (const GraphPort &o : g_.outputs)
      if (o.name == name) out = &o;
    if (!out) {
      diags.error(SourceRange(), fmt::format("--grad names '{}', which is not an output of {}", name, g_.name));
      return false;
    }
    const Node &y = g_.node(out->value.src);
    if (y.isIndex) {
      diags.error(out->decl, fmt::format("output '{}' is an index: it has no gradient", name));
      return false;
    }
    NodeId seed = b_.add({Op::Input, y.width, false, {}, {}, 0, 0, "grad." + name, {out->decl}, false, true});
    g_.grads.seeds.push_back({name, Edge(seed), out->decl});
    seeds.push_back({out->value, seed});
  }
  if (objective.loss) {
    if (!g_.loss) {
      diags.error(SourceRange(), fmt::format("{} has no 'loss' to differentiate", g_.name));
      return false;
    }
    NodeId seed = b_.add({Op::Input, 1, false, {}, {}, 0, 0, "grad.loss", {g_.node(*g_.loss).locs.front()}, false, true});
    g_.grads.seeds.push_back({"loss", Edge(seed), g_.node(*g_.loss).locs.front()});
    seeds.push_back({Edge(*g_.loss), seed});
  }
  // Each state's final value (its last `depth` steps): a seed read at every
  // step, which the caller fills at the last steps only.
  if (objective.stateSeeds)
    for (const auto &[name, id] : g_.states()) {
      if (g_.node(id).isIndex) continue;
      const int64_t width = g_.node(id).width;
      const std::vector<SourceRange> locs = g_.node(id).locs;
      NodeId seed = b_.add({Op::Input, width, false, {}, {}, 0, 0, kFinalSeedPrefix + name, locs, false, true});
      g_.grads.seeds.push_back({"final." + name, Edge(seed), locs.front()});
      seeds.push_back({Edge(id), seed});
    }
  // 2. What the objective depends on.
  std::vector<bool> needed(forwardNodes, false);
  std::vector<NodeId> work;
  for (auto &[target, seed] : seeds) work.push_back(target.src);
  while (!work.empty()) {
    NodeId id = work.back();
    work.pop_back();
    if (needed[id]) continue;
    needed[id] = true;
    for (const Edge &e : g_.node(id).inputs) work.push_back(e.src);
  }
  for (NodeId id = 0; id < forwardNodes; ++id) {
    const Node &n = g_.node(id);
    if (!needed[id] || n.dead || n.op == Op::Const || n.op == Op::Keep || n.op == Op::Active || n.isIndex) continue;
    if (n.op == Op::Input && !objective.inputGrads) continue;
    Node sum{Op::Add, n.width, false, {}, {}, 0, 0, n.name.empty() ? "" : "d" + n.name, n.locs, false, true};
    g_.nodes.push_back(std::move(sum)); // inputs come in step 4
    adjoint_[id] = static_cast<NodeId>(g_.nodes.size() - 1);
  }
  for (auto &[target, seed] : seeds) contributions_[target.src].push_back(Edge(seed, -target.delay));
  // 3. Local derivatives.
  for (NodeId id = 0; id < forwardNodes; ++id)
    if (adjoint_[id] != kNoNode && opKind(g_.node(id).op) != OpKind::Leaf) localDerivatives(id);
  // 4. Adjoint sums, and what they publish.
  std::map<NodeId, std::string> states;
  for (const auto &[name, id] : g_.states()) states[id] = name;
  for (NodeId id = 0; id < forwardNodes; ++id) {
    NodeId a = adjoint_[id];
    if (a == kNoNode) continue;
    std::vector<Edge> terms = contributions_[id];
    if (terms.empty()) terms.push_back(Edge(constant(0)));
    if (terms.size() == 1) terms.push_back(Edge(constant(0)));
    g_.node(a).inputs = std::move(terms);
    const Node &n = g_.node(id);
    if (n.op == Op::Param) {
      Node grad{Op::GradVector, n.width, false, {Edge(a)}, n.params, 0, 0, "", n.locs, false, true};
      g_.grads.params.push_back({n.params[0], b_.add(std::move(grad))});
    } else if (n.op == Op::Input && !n.backward) {
      g_.grads.inputs.push_back({n.name, Edge(a), n.locs.front()});
    }
    if (states.count(id) && objective.stateGrads) g_.grads.states.push_back({states.at(id), a});
  }
  verifyOrDie(g_, "autodiff");
  return true;
}

} // namespace

bool differentiate(Graph &g, const Objective &objective, DiagnosticEngine &diags) {
  return Differentiator(g).run(objective, diags);
}

Objective defaultObjective(const Graph &g) {
  Objective o;
  if (g.loss) {
    o.loss = true;
    return o;
  }
  for (const GraphPort &p : g.outputs)
    if (!g.node(p.value.src).isIndex) o.outputs.push_back(p.name);
  return o;
}

} // namespace rnnc
