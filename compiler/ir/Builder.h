// GraphBuilder: the one way nodes are made. Each make function computes the
// node's width from its inputs and checks the op's invariants (checkNode);
// a violation is a bug in rnnc, not a user error, and stops with an internal
// compiler error.
#pragma once

#include "ir/Graph.h"

#include <string>

namespace rnnc {

/// Why `node` breaks its op's invariants in `g`, or "" if it does not. Shared
/// by the builder (on every node made) and the verifier (on the whole graph).
std::string checkNode(const Graph &g, const Node &node);

class GraphBuilder {
public:
  explicit GraphBuilder(Graph &g) : g_(g) {}

  void addParam(const std::string &name, std::vector<int64_t> shape, SourceRange decl);
  NodeId input(const std::string &name, int64_t width, bool isIndex, SourceRange loc);
  /// A vector param read as a value.
  NodeId param(const std::string &name, SourceRange loc);
  NodeId constant(double value, SourceRange loc);
  /// A random mask of `width` elements kept with `probability` (dropout:
  /// `inverted`, zoneout); `site` tells it from the model's other masks.
  NodeId keep(int64_t width, double probability, int64_t site, bool inverted, bool perSequence, SourceRange loc);
  /// 1 while the step is within its sequence's length, else 0; `weighted`:
  /// T·B / Σ lengths in place of 1 (a mean over the valid steps).
  NodeId active(bool weighted, SourceRange loc);
  /// Pointwise and reduction ops: the width follows from the inputs.
  NodeId op(Op op, std::vector<Edge> inputs, SourceRange loc);
  NodeId matmul(std::vector<std::string> params, Edge x, SourceRange loc);
  NodeId slice(Edge x, int64_t offset, int64_t width, SourceRange loc);
  NodeId embed(const std::string &table, Edge index, SourceRange loc);

  /// Adds a node made by hand (a pass's rewrite); checks it like the others.
  NodeId add(Node node);

private:
  Graph &g_;
};

/// The width an op gives for inputs of these widths (pointwise broadcast,
/// reductions give 1, concat adds up).
int64_t resultWidth(const Graph &g, Op op, const std::vector<Edge> &inputs);

} // namespace rnnc
