// The table of pointwise functions: for each op whose Rule in ir/Ops.def is
// Table, one row giving its arity, value, cost, printed spelling, reverse-mode
// derivative and forward-mode tangent. The interpreter, the passes and the
// code printers read an op's row instead of keeping a case of their own, so a
// new function is one row (docs/adding-an-op.md).
#pragma once

#include "ir/Graph.h"

#include <functional>
#include <string>
#include <vector>

namespace rnnc {

/// What a derivative rule builds backward nodes with, for y = op(x...) and
/// the upstream gradient d = dL/dy.
struct AdjointContext {
  Edge d, y;
  std::vector<Edge> x;
  std::function<NodeId(Op, std::vector<Edge>)> make; // a backward node
  std::function<NodeId(double)> constant;            // a backward constant
  std::function<void(size_t, NodeId)> to;            // adds a contribution to x[k]'s adjoint
  NodeId oneMinus(Edge e) const { return make(Op::Add, {constant(1), make(Op::Neg, {e})}); }
};

/// The target's name of a math function ("tanh" -> "std::tanh", "math::tanh").
using MathName = std::function<std::string(const char *)>;

/// What a tangent rule prints with: the operands' texts, their tangents (""
/// where zero, never all of them), the value's name and the target's math.
struct TangentContext {
  const std::vector<std::string> &x, &dx;
  const std::string &y;
  const MathName &math;
  /// `(dx0 * factor)`, a `real(1)` tangent folded away.
  std::string unary(const std::string &factor) const;
};

struct PointwiseRule {
  int arity;
  bool builtin;  // a function of the language, named by the op's mnemonic; else autodiff makes it
  int64_t flops; // per element, for --stats
  double (*value)(const double *x);
  std::string (*spell)(const std::vector<std::string> &x, const MathName &math);
  void (*derivative)(const AdjointContext &c); // null: only in backward graphs (never differentiated)
  std::string (*tangent)(const TangentContext &t); // "": piecewise constant
};

/// The row of `op`, whose Rule in ir/Ops.def is Table; null for the others.
const PointwiseRule *pointwiseRule(Op op);

} // namespace rnnc
