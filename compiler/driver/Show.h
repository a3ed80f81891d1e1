// What `rnnc show` prints about a compilation: the schedule (stages, loops,
// streams, each launch with the equations it computes as file:line) and the
// graph for Graphviz (recurrent nodes and delayed edges marked).
#pragma once

#include "passes/Compilation.h"
#include "passes/Pipeline.h"
#include "support/SourceManager.h"

#include <functional>
#include <string>

namespace rnnc {

std::string scheduleText(const Compilation &c, const SourceManager &sm);
/// The loops classify-time found: direction, level and nodes of each.
std::string timeClassesText(const Compilation &c);
/// The memory plan: the totals, then each buffer with its rows and what it shares.
std::string memoryText(const Compilation &c);
/// "loop 0: scan" (or "sequential: <why>") per loop: what plan-time-parallel decided.
std::string loopPlansText(const Compilation &c);
/// What `show --after` prints after a pass of this kind (the registry's PassInfo::dump).
std::string passDumpText(PassDump dump, const Compilation &c, const SourceManager &sm);
/// `link`, when given, names a URL for a node (`URL=` in the dot text; the
/// SVG makes the node a link); an empty one adds nothing.
std::string graphDot(const Compilation &c, const SourceManager &sm,
                     const std::function<std::string(const Node &)> &link = {});
/// `lstm.rnn:9,10,12`: the distinct lines a set of nodes came from.
std::string equationLines(const Graph &g, const std::vector<NodeId> &nodes, const SourceManager &sm);

} // namespace rnnc
