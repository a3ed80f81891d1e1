// 1. Group live single-param MatMul nodes by (operand, delay, stage), where the
//    stage is the loop, or the level for time-parallel nodes. Products of a
//    dropped param stay alone: forward makes each in the workspace on its own.
// 2. A group of two or more whose params are distinct and in no other block
//    becomes one MatMul over the params in node order, and each member a Slice
//    of it at its rows.
#include "passes/StackGemms.h"

#include "ir/Builder.h"
#include "passes/GraphEdit.h"

#include <map>
#include <set>
#include <tuple>

namespace rnnc {

bool stackGemms(Graph &g, const TimeClasses &time) {
  std::map<std::tuple<NodeId, int32_t, int, int>, std::vector<NodeId>> groups;
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node &n = g.node(id);
    if (n.dead || n.op != Op::MatMul || n.params.size() != 1 || g.droppedParam(n.params[0])) continue;
    int loop = time.loopOf[id];
    groups[{n.inputs[0].src, n.inputs[0].delay, loop, loop < 0 ? time.level[id] : 0}].push_back(id);
  }
  std::set<std::string> blocked;
  for (const GraphParam &p : g.params)
    for (const auto &s : p.stackedWith) blocked.insert(s);
  bool changed = false;
  GraphBuilder b(g);
  for (auto &[key, members] : groups) {
    if (members.size() < 2) continue;
    std::vector<std::string> params;
    std::set<std::string> distinct;
    bool ok = true;
    for (NodeId m : members) {
      const std::string &p = g.node(m).params[0];
      ok &= !blocked.count(p) && distinct.insert(p).second;
      params.push_back(p);
    }
    if (!ok) continue;
    Edge operand = g.node(members[0]).inputs[0];
    NodeId stacked = b.matmul(params, operand, g.node(members[0]).locs.front());
    g.node(stacked).backward = g.node(members[0]).backward;
    int64_t offset = 0;
    for (NodeId m : members) {
      for (auto loc : g.node(m).locs)
        if (loc != g.node(stacked).locs.front()) g.node(stacked).locs.push_back(loc);
      int64_t rows = g.node(m).width;
      NodeId slice = b.slice({stacked, 0}, offset, rows, g.node(m).locs.front());
      g.node(slice).name = g.node(m).name;
      g.node(slice).backward = g.node(m).backward;
      replaceAllUses(g, m, {slice, 0});
      g.node(m).dead = true;
      offset += rows;
    }
    for (GraphParam &p : g.params)
      if (p.name == params[0]) p.stackedWith = params;
    blocked.insert(params.begin(), params.end());
    changed = true;
  }
  return changed;
}

} // namespace rnnc
