// The verifier: checks a whole graph's invariants (every node's, edges to live
// nodes, ports and params consistent, no cycle of delay-0 edges). Run after
// lowering, after every pass in debug builds, and before code generation; a
// failure is an internal compiler error naming what broke and after which step
// (in a graph read from text, ir/Reader.h, a user error at the node it names).
#pragma once

#include "ir/Graph.h"

#include <string>

namespace rnnc {

/// The first problem the verifier finds, and the node it is about (kNoNode
/// when it is about a port, a param or the graph as a whole).
struct GraphProblem {
  std::string message; // empty: the graph is well formed
  NodeId node = kNoNode;
};
GraphProblem findGraphProblem(const Graph &g);

/// Empty when the graph is well formed; otherwise the first problem found.
std::string verifyGraph(const Graph &g);

/// verifyGraph, stopping with an internal compiler error on a problem.
void verifyOrDie(const Graph &g, const char *after);

} // namespace rnnc
