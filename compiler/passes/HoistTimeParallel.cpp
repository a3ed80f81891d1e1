// For each Add node in a loop: its operands whose source is not in the same
// loop (any delay) are time-parallel. With two or more of them, they move into
// one new Add node (time-parallel, since none of its inputs is in the loop),
// and the loop's Add reads that node instead. A state's adjoint keeps its
// sum whole: evaluated at the steps before the first it is the initial
// state's gradient, and a hoisted part would read as zero there.
#include "passes/HoistTimeParallel.h"

#include "ir/Builder.h"

namespace rnnc {

bool hoistTimeParallel(Graph &g, const TimeClasses &time) {
  bool changed = false;
  GraphBuilder b(g);
  size_t count = g.nodes.size();
  std::vector<bool> stateAdjoint(count, false);
  for (const auto &[name, id] : g.grads.states) stateAdjoint[id] = true;
  for (NodeId id = 0; id < count; ++id) {
    if (g.node(id).dead || g.node(id).op != Op::Add || !time.recurrent(id) || stateAdjoint[id]) continue;
    int loop = time.loopOf[id];
    std::vector<Edge> hoisted, kept;
    for (Edge e : g.node(id).inputs) (time.loopOf[e.src] == loop ? kept : hoisted).push_back(e);
    if (hoisted.size() < 2 || kept.empty()) continue;
    std::vector<SourceRange> locs = g.node(id).locs;
    NodeId pre = b.op(Op::Add, hoisted, locs.front());
    g.node(pre).locs = locs;
    g.node(pre).backward = g.node(id).backward;
    kept.push_back({pre, 0});
    g.node(id).inputs = std::move(kept);
    changed = true;
  }
  return changed;
}

} // namespace rnnc
