// Small edits the graph passes share: redirect the uses of a node, and a
// topological order of live nodes over delay-0 edges.
#pragma once

#include "ir/Graph.h"

#include <vector>

namespace rnnc {

/// Every use of `from` (node inputs, outputs) now reads `to`; delays add up.
void replaceAllUses(Graph &g, NodeId from, Edge to);

/// Live nodes in an order where every delay-0 input comes before its user.
std::vector<NodeId> topologicalOrder(const Graph &g);

} // namespace rnnc
