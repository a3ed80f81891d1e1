// classify-time: strongly connected components over all edges decide what is
// recurrent (one sequential loop per component, its direction from the sign of
// its delays) and what is time-parallel; each node gets its stage level.
// A component that reads both t-k and t+k is a user error, reported with the
// places of its delays.
#pragma once

#include "passes/Compilation.h"

namespace rnnc {

/// Fills c.time. Returns false after reporting a user error.
bool classifyTimePass(Compilation &c, DiagnosticEngine &diags);

} // namespace rnnc
