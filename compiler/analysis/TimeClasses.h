// Time classes: which nodes must run step by step and which can run for all
// steps at once. Strongly connected components over all edges (delayed ones
// included): a node on a cycle through a delayed edge is recurrent, every other
// node is time-parallel. Each recurrent component is one sequential loop whose
// direction is the sign of its delays.
#pragma once

#include "ir/Graph.h"

#include <vector>

namespace rnnc {

struct RecurrentLoop {
  std::vector<NodeId> nodes; // in id order
  int level = 1;
  int direction = +1;        // +1: forward in time (reads t-k), -1: backward (t+k)
  bool mixed = false;        // reads both t-k and t+k: a user error
};

struct TimeClasses {
  /// Per node: the index of its loop in `loops`, or -1 when time-parallel.
  std::vector<int> loopOf;
  std::vector<RecurrentLoop> loops;
  /// Per node, its stage level in the condensation DAG: a loop's level is one
  /// more than the highest level it reads from; a time-parallel node's is the
  /// highest level it reads from (0 when it reads no loop). Stages run in the
  /// order: parallel 0, loops 1, parallel 1, loops 2, ...
  std::vector<int> level;
  bool recurrent(NodeId id) const { return loopOf[id] >= 0; }
};

TimeClasses classifyTime(const Graph &g);

/// Strongly connected components of the live nodes over the edges that
/// `follow` accepts (walking from a node to its inputs), each in id order;
/// components come out producers first (a component after those it reads).
template <typename Follow> std::vector<std::vector<NodeId>> stronglyConnected(const Graph &g, Follow follow);

} // namespace rnnc

#include "analysis/TimeClasses.inc"
