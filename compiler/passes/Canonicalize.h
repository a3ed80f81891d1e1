// canonicalize: one form for the other passes. Subtraction becomes addition of
// a negation and sums and products are flattened into n-ary nodes; constant
// operands are folded; identical nodes are merged (CSE); nodes that no output
// or loss needs are removed (DCE). Needs a verified graph; keeps it verified.
#pragma once

#include "ir/Graph.h"

namespace rnnc {

/// Returns whether anything changed.
bool canonicalize(Graph &g);

} // namespace rnnc
