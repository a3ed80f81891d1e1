// Small edits the graph passes share: redirect the uses of a node, and a
// topological order of live nodes over delay-0 edges.
#pragma once

#include "ir/Graph.h"

#include <unordered_map>
#include <vector>

namespace rnnc {

/// Redirections of uses gathered while a pass walks the graph, applied in one
/// sweep (one sweep per redirection would make a pass quadratic). A node
/// redirected to one that is redirected in turn follows the chain.
class UseRewriter {
public:
  void redirect(NodeId from, Edge to) { to_[from] = to; }
  bool empty() const { return to_.empty(); }
  /// `e` with every redirection followed; delays add up, the read's place stays.
  Edge resolve(Edge e) const;
  /// Every use (node inputs, outputs, the loss, gradient ports) now reads its target.
  void apply(Graph &g) const;

private:
  std::unordered_map<NodeId, Edge> to_;
};

/// Every use of `from` now reads `to`; delays add up.
void replaceAllUses(Graph &g, NodeId from, Edge to);

/// Live nodes in an order where every delay-0 input comes before its user.
std::vector<NodeId> topologicalOrder(const Graph &g);

} // namespace rnnc
