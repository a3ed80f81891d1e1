#include "ir/Builder.h"

#include "ir/Pointwise.h"
#include "support/Crash.h"

#include <fmt/format.h>

namespace rnnc {

int64_t resultWidth(const Graph &g, Op op, const std::vector<Edge> &inputs) {
  switch (opKind(op)) {
  case OpKind::Reduce: return 1;
  case OpKind::Pointwise: {
    int64_t w = 1;
    for (const Edge &e : inputs) w = std::max(w, g.node(e.src).width);
    return w;
  }
  case OpKind::Leaf:
  case OpKind::Gemm:
  case OpKind::Layout:
  case OpKind::Accumulate: break;
  }
  if (op == Op::Concat) {
    int64_t w = 0;
    for (const Edge &e : inputs) w += g.node(e.src).width;
    return w;
  }
  return 0;
}

std::string checkNode(const Graph &g, const Node &n) {
  for (const Edge &e : n.inputs) {
    if (e.src >= g.nodes.size()) return fmt::format("input %{} does not exist", e.src);
    if (g.node(e.src).dead) return fmt::format("input %{} is dead", e.src);
  }
  auto arity = [&](size_t lo, size_t hi) -> std::string {
    if (n.inputs.size() < lo || n.inputs.size() > hi)
      return fmt::format("{} takes {}..{} inputs, has {}", opMnemonic(n.op), lo, hi, n.inputs.size());
    return "";
  };
  auto in = [&](size_t i) -> const Node & { return g.node(n.inputs[i].src); };
  std::string bad;
  switch (opKind(n.op)) {
  case OpKind::Leaf:
    if (!n.inputs.empty()) return "a leaf has inputs";
    if (n.op == Op::Param) {
      const GraphParam *p = g.param(n.params.size() == 1 ? n.params[0] : "");
      if (!p || p->shape.size() != 1 || p->shape[0] != n.width) return "param read is not a vector param of its width";
    }
    if (n.op == Op::Const && n.width != 1) return "a constant is a scalar";
    if (n.op == Op::Keep && !(n.value > 0 && n.value <= 1)) return "keep's probability is not in (0, 1]";
    if (n.op == Op::Keep && (n.offset < 0 || n.offset > 0xffffffffll)) return "keep's site is not a 32-bit word";
    if (n.op == Op::Active && n.width != 1) return "active is a scalar";
    return "";
  case OpKind::Pointwise: {
    bool nary = n.op == Op::Add || n.op == Op::Mul;
    const PointwiseRule *rule = pointwiseRule(n.op); // the table's functions: their arity
    bool binary = rule ? rule->arity == 2 : n.op == Op::Sub || n.op == Op::Div;
    if (!(bad = arity(nary || binary ? 2 : 1, nary ? SIZE_MAX : binary ? 2 : 1)).empty()) return bad;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (in(i).isIndex) return "an index is used as a vector";
      if (in(i).width != 1 && in(i).width != n.width) return fmt::format("input {} is {} wide, the node {}", i, in(i).width, n.width);
    }
    if (n.width != resultWidth(g, n.op, n.inputs)) return "width is not the broadcast of its inputs";
    return "";
  }
  case OpKind::Reduce:
    if (n.width != 1) return "a reduction gives a scalar";
    if (n.op == Op::Sum || n.op == Op::Mean) return arity(1, 1);
    if (!(bad = arity(2, 2)).empty()) return bad;
    if (n.op == Op::CrossEntropy && (!in(1).isIndex || in(1).width != in(0).width))
      return "cross_entropy needs logits as wide as its index range";
    if (n.op == Op::Mse && in(0).width != in(1).width) return "mse compares values of one width";
    return "";
  case OpKind::Gemm: {
    if (!(bad = arity(1, 1)).empty()) return bad;
    if (n.params.empty()) return "matmul without a param";
    if (n.op == Op::MatMulT) {
      const GraphParam *p = g.param(n.params[0]);
      if (n.params.size() != 1 || !p || p->shape.size() != 2) return "matmul_t needs one matrix param";
      if (p->shape[0] != in(0).width || p->shape[1] != n.width) return "matmul_t: W^T @ v needs v as wide as W's rows";
      return "";
    }
    int64_t rows = 0;
    for (const std::string &name : n.params) {
      const GraphParam *p = g.param(name);
      if (!p || p->shape.size() != 2) return fmt::format("'{}' is not a matrix param", name);
      if (p->shape[1] != in(0).width) return fmt::format("'{}' has {} columns, its vector is {} wide", name, p->shape[1], in(0).width);
      rows += p->shape[0];
    }
    if (rows != n.width) return "matmul width is not the rows of its params";
    return "";
  }
  case OpKind::Layout:
    if (n.op == Op::Slice) {
      if (!(bad = arity(1, 1)).empty()) return bad;
      if (n.offset < 0 || n.width < 1 || n.offset + n.width > in(0).width) return "slice out of range";
      return "";
    }
    if (n.op == Op::Concat) {
      if (n.inputs.empty()) return "concat of nothing";
      return n.width == resultWidth(g, n.op, n.inputs) ? "" : "concat width is not the sum of its inputs";
    }
    if (n.op == Op::Pad) {
      if (!(bad = arity(1, 1)).empty()) return bad;
      if (n.offset < 0 || n.offset + in(0).width > n.width) return "pad out of range";
      return "";
    }
    if (n.op == Op::Broadcast) {
      if (!(bad = arity(1, 1)).empty()) return bad;
      return in(0).width == 1 ? "" : "broadcast takes a scalar";
    }
    if (n.op == Op::SoftmaxMinusOneHot) {
      if (!(bad = arity(2, 2)).empty()) return bad;
      if (!in(1).isIndex || in(1).width != in(0).width || n.width != in(0).width) return "needs logits as wide as the index range";
      return "";
    }
    if (n.op == Op::Embed) {
      if (!(bad = arity(1, 1)).empty()) return bad;
      const GraphParam *p = g.param(n.params.size() == 1 ? n.params[0] : "");
      if (!p || p->shape.size() != 2 || !in(0).isIndex || in(0).width != p->shape[0] || n.width != p->shape[1])
        return "embed needs a table [V, E] and an index[V]";
      return "";
    }
    return "unknown layout op";
  case OpKind::Accumulate: {
    const GraphParam *p = g.param(n.params.size() == 1 ? n.params[0] : "");
    if (!p) return "a gradient names no param";
    int64_t numel = 1;
    for (int64_t d : p->shape) numel *= d;
    if (n.width != numel) return "a gradient is as large as its param";
    if (n.op == Op::GradMatrix) {
      if (!(bad = arity(2, 2)).empty()) return bad;
      if (p->shape.size() != 2 || in(0).width != p->shape[0] || in(1).width != p->shape[1]) return "grad_matrix needs delta [rows] and x [cols]";
      return "";
    }
    if (n.op == Op::GradVector) {
      if (!(bad = arity(1, 1)).empty()) return bad;
      if (p->shape.size() != 1 || (in(0).width != n.width && n.width != 1)) return "grad_vector needs a delta as wide as the param";
      return "";
    }
    if (!(bad = arity(2, 2)).empty()) return bad;
    if (p->shape.size() != 2 || in(0).width != p->shape[1] || !in(1).isIndex || in(1).width != p->shape[0]) return "grad_embed needs delta [E] and an index[V]";
    return "";
  }
  }
  return "unknown op";
}

NodeId GraphBuilder::add(Node node) {
  std::string why = checkNode(g_, node);
  RNNC_ASSERT(why.empty(), fmt::format("bad {} node: {}", opMnemonic(node.op), why));
  g_.nodes.push_back(std::move(node));
  return static_cast<NodeId>(g_.nodes.size() - 1);
}

void GraphBuilder::addParam(const std::string &name, std::vector<int64_t> shape, SourceRange decl) {
  RNNC_ASSERT(!g_.param(name), "param '" + name + "' added twice");
  g_.params.push_back({name, std::move(shape), decl, {}});
}

NodeId GraphBuilder::input(const std::string &name, int64_t width, bool isIndex, SourceRange loc) {
  Node n{Op::Input, width, isIndex, {}, {}, 0, 0, name, {loc}, false};
  NodeId id = add(std::move(n));
  g_.inputs.push_back({name, {id, 0}, loc});
  return id;
}

NodeId GraphBuilder::param(const std::string &name, SourceRange loc) {
  const GraphParam *p = g_.param(name);
  RNNC_ASSERT(p && p->shape.size() == 1, "no vector param '" + name + "'");
  return add({Op::Param, p->shape[0], false, {}, {name}, 0, 0, name, {loc}, false});
}

NodeId GraphBuilder::keep(int64_t width, double probability, int64_t site, bool inverted, bool perSequence,
                          SourceRange loc) {
  Node n{Op::Keep, width, false, {}, {}, probability, site, "", {loc}, false};
  n.inverted = inverted;
  n.perSequence = perSequence;
  return add(std::move(n));
}

NodeId GraphBuilder::active(bool weighted, SourceRange loc) {
  Node n{Op::Active, 1, false, {}, {}, 0, 0, "", {loc}, false};
  n.weighted = weighted;
  return add(std::move(n));
}

NodeId GraphBuilder::constant(double value, SourceRange loc) {
  return add({Op::Const, 1, false, {}, {}, value, 0, "", {loc}, false});
}

NodeId GraphBuilder::op(Op op, std::vector<Edge> inputs, SourceRange loc) {
  int64_t w = resultWidth(g_, op, inputs);
  return add({op, w, false, std::move(inputs), {}, 0, 0, "", {loc}, false});
}

NodeId GraphBuilder::matmul(std::vector<std::string> params, Edge x, SourceRange loc) {
  int64_t rows = 0;
  for (const auto &p : params) rows += g_.param(p) ? g_.param(p)->shape[0] : 0;
  return add({Op::MatMul, rows, false, {x}, std::move(params), 0, 0, "", {loc}, false});
}

NodeId GraphBuilder::slice(Edge x, int64_t offset, int64_t width, SourceRange loc) {
  return add({Op::Slice, width, false, {x}, {}, 0, offset, "", {loc}, false});
}

NodeId GraphBuilder::embed(const std::string &table, Edge index, SourceRange loc) {
  const GraphParam *p = g_.param(table);
  return add({Op::Embed, p ? p->shape[1] : 0, false, {index}, {table}, 0, 0, "", {loc}, false});
}

} // namespace rnnc
