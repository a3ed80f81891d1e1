#include "analysis/TimeClasses.h"

namespace rnnc {

TimeClasses classifyTime(const Graph &g) {
  TimeClasses tc;
  tc.loopOf.assign(g.nodes.size(), -1);
  auto sccs = stronglyConnected(g, [](Edge) { return true; });
  // Components come producers first, so loops are numbered in dataflow order.
  for (auto &scc : sccs) {
    bool cyclic = scc.size() > 1;
    if (!cyclic)
      for (const Edge &e : g.node(scc[0]).inputs) cyclic |= e.src == scc[0];
    if (!cyclic) continue;
    RecurrentLoop loop;
    loop.nodes = scc;
    int index = static_cast<int>(tc.loops.size());
    for (NodeId id : scc) tc.loopOf[id] = index;
    bool past = false, future = false;
    for (NodeId id : scc)
      for (const Edge &e : g.node(id).inputs) {
        if (tc.loopOf[e.src] != index) continue;
        past |= e.delay > 0;
        future |= e.delay < 0;
      }
    loop.direction = future && !past ? -1 : +1;
    loop.mixed = past && future;
    tc.loops.push_back(std::move(loop));
  }
  // Levels, components producers first.
  tc.level.assign(g.nodes.size(), 0);
  for (const auto &scc : sccs) {
    int loop = tc.loopOf[scc[0]];
    int level = 0;
    for (NodeId id : scc)
      for (const Edge &e : g.node(id).inputs)
        if (loop < 0 || tc.loopOf[e.src] != loop) level = std::max(level, tc.level[e.src]);
    if (loop >= 0) {
      ++level;
      tc.loops[loop].level = level;
    }
    for (NodeId id : scc) tc.level[id] = level;
  }
  return tc;
}

} // namespace rnnc
