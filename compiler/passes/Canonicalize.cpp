// The algorithm, repeated until nothing changes (each round shrinks the graph
// or removes a Sub, so it ends):
// 1. a - b  ->  a + (-b);  -(-a)  ->  a.
// 2. An Add (Mul) input that is a delay-0 Add (Mul) used only there is
//    replaced by its operands.
// 3. Constants: an op whose inputs are all constants becomes a constant;
//    several constants in one Add/Mul become one; + 0 and * 1 are dropped; an
//    Add/Mul left with one operand is replaced by it.
// 4. CSE: nodes with the same op, inputs (and delays) and attributes merge.
// 5. A sum of pads that tile their width (the adjoint of a split) becomes the
//    concat of what they pad: no zeros are added.
// 6. DCE: what no output, loss or state reaches (over any edge) is removed.
#include "passes/Canonicalize.h"

#include "ir/Builder.h"
#include "ir/Pointwise.h"
#include "passes/GraphEdit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace rnnc {

namespace {

bool isConst(const Graph &g, Edge e) { return e.delay == 0 && g.node(e.src).op == Op::Const; }

/// Whether the uses of `id` may read `to` instead: the loss must stay a value
/// of the current step.
bool canReplace(const Graph &g, NodeId id, Edge to) {
  const Op leaf = g.node(to.src).op;
  if (leaf == Op::Keep || leaf == Op::Active) return false; // a mask is made where it is read, never stored
  if (to.delay == 0) return true;
  if (g.loss == id) return false;
  for (const auto &[name, state] : g.grads.states)
    if (state == id) return false;
  return true;
}

/// Whether something outside the graph's nodes reads `id`: an output, the
/// loss, or a gradient the backward pass returns.
bool readOutside(const Graph &g, NodeId id) {
  if (g.loss == id) return true;
  for (const GraphPort &o : g.outputs)
    if (o.value.src == id) return true;
  for (const GraphPort &i : g.grads.inputs)
    if (i.value.src == id) return true;
  for (const auto &[name, state] : g.grads.states)
    if (state == id) return true;
  return false;
}

/// The value of `op` over constants; NAN where the op is not folded.
double fold(Op op, const std::vector<double> &x) {
  switch (op) {
  case Op::Add: { double s = 0; for (double v : x) s += v; return s; }
  case Op::Mul: { double p = 1; for (double v : x) p *= v; return p; }
  case Op::Div: return x[0] / x[1];
  case Op::Neg: return -x[0];
#include "ir/TableOpCases.def"
    return pointwiseRule(op)->value(x.data());
  case Op::Input: case Op::Param: case Op::Const: case Op::Keep: case Op::Active: case Op::Sub: // Sub is rewritten first
  case Op::Sum: case Op::Mean: case Op::CrossEntropy: case Op::Mse: case Op::MatMul: case Op::Slice:
  case Op::Concat: case Op::Embed: case Op::SoftmaxMinusOneHot: case Op::Pad: case Op::Broadcast:
  case Op::MatMulT: case Op::GradMatrix: case Op::GradVector: case Op::GradEmbed: return NAN;
  }
  return NAN;
}

bool rewriteSubAndNeg(Graph &g) {
  bool changed = false;
  GraphBuilder b(g);
  UseRewriter uses;
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    if (g.node(id).dead) continue;
    if (g.node(id).op == Op::Sub) {
      Edge rhs = g.node(id).inputs[1];
      NodeId neg = b.op(Op::Neg, {rhs}, g.node(id).locs.front());
      Node &n = g.node(id); // b.op may have moved the node storage
      g.node(neg).backward = n.backward;
      n.op = Op::Add;
      n.inputs[1] = {neg, 0};
      changed = true;
    } else if (g.node(id).op == Op::Neg) {
      Edge in = g.node(id).inputs[0];
      if (in.delay == 0 && g.node(in.src).op == Op::Neg && g.node(id).width == g.node(g.node(in.src).inputs[0].src).width &&
          canReplace(g, id, g.node(in.src).inputs[0])) {
        uses.redirect(id, g.node(in.src).inputs[0]);
        g.node(id).dead = true;
        changed = true;
      }
    }
  }
  uses.apply(g);
  return changed;
}

bool flatten(Graph &g) {
  bool changed = false;
  auto users = g.users();
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    Node &n = g.node(id);
    if (n.dead || (n.op != Op::Add && n.op != Op::Mul)) continue;
    std::vector<Edge> flat;
    bool any = false;
    for (Edge e : n.inputs) {
      const Node &in = g.node(e.src);
      const bool single = users[e.src].size() == 1 && !readOutside(g, e.src);
      if (e.delay == 0 && in.op == n.op && single && e.src != id) {
        flat.insert(flat.end(), in.inputs.begin(), in.inputs.end());
        for (auto loc : in.locs) n.locs.push_back(loc);
        g.node(e.src).dead = true;
        any = true;
      } else {
        flat.push_back(e);
      }
    }
    if (any) {
      // Use counts stay right: each operand moved from the inner node to this one.
      g.node(id).inputs = std::move(flat);
      changed = true;
    }
  }
  return changed;
}

bool foldConstants(Graph &g) {
  bool changed = false;
  GraphBuilder b(g);
  UseRewriter uses;
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    Node &n = g.node(id);
    if (n.dead || opKind(n.op) != OpKind::Pointwise) continue;
    bool allConst = true;
    std::vector<double> values;
    for (Edge e : n.inputs) {
      allConst &= isConst(g, e);
      if (isConst(g, e)) values.push_back(g.node(e.src).value);
    }
    if (allConst && n.width == 1) {
      double v = fold(n.op, values);
      if (std::isfinite(v)) {
        n.op = Op::Const;
        n.value = v;
        n.inputs.clear();
        changed = true;
      }
      continue;
    }
    if (n.op != Op::Add && n.op != Op::Mul) continue;
    double identity = n.op == Op::Add ? 0 : 1;
    std::vector<Edge> rest;
    std::vector<double> consts;
    SourceRange constLoc;
    for (Edge e : n.inputs) {
      if (isConst(g, e)) {
        consts.push_back(g.node(e.src).value);
        constLoc = g.node(e.src).locs.front();
      } else {
        rest.push_back(e);
      }
    }
    if (consts.empty()) continue;
    double c = fold(n.op, consts);
    if (consts.size() == 1 && c != identity) continue;
    if (c == identity && rest.size() == 1 && !canReplace(g, id, rest[0])) continue;
    bool keepWidth = false; // dropping a scalar must not narrow the result
    if (c == identity) {
      int64_t w = 1;
      for (Edge e : rest) w = std::max(w, g.node(e.src).width);
      keepWidth = w != n.width;
    }
    if (c != identity || keepWidth) rest.push_back({b.constant(c, constLoc), 0});
    Node &m = g.node(id);
    m.inputs = rest;
    changed = true;
    if (m.inputs.size() == 1) {
      uses.redirect(id, m.inputs[0]);
      g.node(id).dead = true;
    }
  }
  uses.apply(g);
  return changed;
}

bool mergeDuplicates(Graph &g) {
  using Key = std::tuple<Op, std::vector<std::pair<NodeId, int32_t>>, std::vector<std::string>, double, int64_t, int64_t, int>;
  std::map<Key, NodeId> seen;
  bool changed = false;
  UseRewriter uses; // merged nodes, redirected at the end; keys read through it
  for (NodeId id : topologicalOrder(g)) {
    const Node &n = g.node(id);
    if (n.op == Op::Input || opKind(n.op) == OpKind::Accumulate) continue; // ports; each gradient counts
    std::vector<std::pair<NodeId, int32_t>> ins;
    for (Edge e : n.inputs) {
      e = uses.resolve(e);
      ins.push_back({e.src, e.delay});
    }
    if (n.op == Op::Add || n.op == Op::Mul) std::sort(ins.begin(), ins.end());
    // A mask drawn again in backward stays backward's own: merged into the
    // forward mask, backward would read it from memory instead of drawing it.
    int mask = n.op == Op::Keep ? 1 + n.perSequence + 2 * n.inverted + 4 * n.backward
               : n.op == Op::Active ? 8 + n.weighted
                                    : 0;
    Key key{n.op, ins, n.params, n.value, n.offset, n.width, mask};
    auto [it, fresh] = seen.emplace(key, id);
    if (fresh) continue;
    if (g.loss == id) { // keep the loss's own node; merge the other into it
      std::swap(it->second, id);
    }
    Node &keep = g.node(it->second);
    for (auto loc : g.node(id).locs) keep.locs.push_back(loc);
    if (keep.name.empty()) keep.name = g.node(id).name;
    uses.redirect(id, {it->second, 0});
    g.node(id).dead = true;
    changed = true;
  }
  uses.apply(g);
  return changed;
}

bool padsToConcat(Graph &g) {
  bool changed = false;
  auto users = g.users();
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    Node &n = g.node(id);
    if (n.dead || n.op != Op::Add || n.inputs.size() < 2) continue;
    std::vector<std::pair<int64_t, Edge>> pieces; // (offset, what is padded)
    bool tiles = true;
    for (Edge e : n.inputs) {
      const Node &pad = g.node(e.src);
      tiles &= e.delay == 0 && pad.op == Op::Pad && pad.width == n.width && users[e.src].size() == 1;
      if (!tiles) break;
      pieces.push_back({pad.offset, pad.inputs[0]});
    }
    if (!tiles) continue;
    std::sort(pieces.begin(), pieces.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    int64_t at = 0;
    for (const auto &[offset, e] : pieces) {
      tiles &= offset == at;
      at += g.node(e.src).width;
    }
    if (!tiles || at != n.width) continue;
    n.op = Op::Concat;
    n.inputs.clear();
    for (const auto &[offset, e] : pieces) n.inputs.push_back(e);
    changed = true;
  }
  return changed;
}

bool removeDead(Graph &g) {
  std::vector<bool> needed(g.nodes.size(), false);
  std::vector<NodeId> work;
  for (const GraphPort &o : g.outputs) work.push_back(o.value.src);
  for (const GraphPort &i : g.inputs) work.push_back(i.value.src);
  if (g.loss) work.push_back(*g.loss);
  for (const GraphPort &s : g.grads.seeds) work.push_back(s.value.src);
  for (const GraphPort &i : g.grads.inputs) work.push_back(i.value.src);
  for (const auto &[name, id] : g.grads.params) work.push_back(id);
  for (const auto &[name, id] : g.grads.states) work.push_back(id);
  // Final states are results too: a state stays with what reads it (the read
  // is what makes it a state), even when no output depends on it.
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    for (const Edge &e : g.node(id).inputs)
      if (!g.node(id).dead && !g.node(id).backward && e.delay > 0) work.push_back(id);
  while (!work.empty()) {
    NodeId id = work.back();
    work.pop_back();
    if (needed[id]) continue;
    needed[id] = true;
    for (Edge e : g.node(id).inputs) work.push_back(e.src);
  }
  bool changed = false;
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead && !needed[id]) {
      g.node(id).dead = true;
      changed = true;
    }
  return changed;
}

} // namespace

bool canonicalize(Graph &g) {
  bool any = false;
  for (int round = 0; round < 64; ++round) {
    bool changed = rewriteSubAndNeg(g);
    changed |= flatten(g);
    changed |= foldConstants(g);
    changed |= mergeDuplicates(g);
    changed |= padsToConcat(g);
    changed |= removeDead(g);
    any |= changed;
    if (!changed) break;
  }
  return any;
}

} // namespace rnnc
