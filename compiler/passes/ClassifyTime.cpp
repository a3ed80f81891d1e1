#include "passes/ClassifyTime.h"

#include <fmt/format.h>

namespace rnnc {

bool classifyTimePass(Compilation &c, DiagnosticEngine &diags) {
  c.time = classifyTime(c.graph);
  bool ok = true;
  for (size_t l = 0; l < c.time.loops.size(); ++l) {
    const RecurrentLoop &loop = c.time.loops[l];
    if (!loop.mixed) continue;
    // Name one read of each direction.
    SourceRange past, future;
    for (NodeId id : loop.nodes)
      for (const Edge &e : c.graph.node(id).inputs) {
        if (c.time.loopOf[e.src] != static_cast<int>(l)) continue;
        SourceRange where = e.loc.valid() ? e.loc : c.graph.node(id).locs.empty() ? SourceRange() : c.graph.node(id).locs.front();
        if (e.delay > 0 && !past.valid()) past = where;
        if (e.delay < 0 && !future.valid()) future = where;
      }
    diags.error(future, "this recurrence reads both earlier steps (t-k) and later steps (t+k): it cannot run in "
                        "either direction; split it into a forward and a backward part",
                {{past, "it reads an earlier step here"}});
    ok = false;
  }
  return ok;
}

} // namespace rnnc
