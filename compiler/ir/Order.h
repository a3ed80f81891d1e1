// Depth-first orders of a graph's live nodes, iterative (graphs can be deep):
// the one traversal behind the verifier's cycle check, topological orders and
// the passes' dataflow orders.
#pragma once

#include "ir/Graph.h"

#include <utility>
#include <vector>

namespace rnnc {

/// Live nodes in post-order over the input edges `follow(user, edge)` accepts,
/// so a node comes after the inputs it follows. When those edges form a cycle
/// and `cycleAt` is given, it is set to a node on one (else to kNoNode).
template <typename Follow>
std::vector<NodeId> postOrder(const Graph &g, Follow follow, NodeId *cycleAt = nullptr) {
  std::vector<int> state(g.nodes.size(), 0); // 0 new, 1 on the stack, 2 done
  std::vector<NodeId> order;
  order.reserve(g.nodes.size());
  if (cycleAt) *cycleAt = kNoNode;
  for (NodeId root = 0; root < g.nodes.size(); ++root) {
    if (g.node(root).dead || state[root]) continue;
    std::vector<std::pair<NodeId, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      NodeId id = stack.back().first;
      const auto &ins = g.node(id).inputs;
      if (stack.back().second < ins.size()) {
        const Edge &e = ins[stack.back().second++];
        if (!follow(id, e)) continue;
        if (state[e.src] == 1 && cycleAt && *cycleAt == kNoNode) *cycleAt = e.src;
        if (state[e.src] == 0) {
          state[e.src] = 1;
          stack.push_back({e.src, 0});
        }
        continue;
      }
      state[id] = 2;
      order.push_back(id);
      stack.pop_back();
    }
  }
  return order;
}

} // namespace rnnc
