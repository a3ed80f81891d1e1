// hoist-time-parallel: in a sum inside a loop, the terms that do not depend on
// the loop (an input GEMM, biases) are summed in a new time-parallel node, so
// they are computed for all steps at once and the loop adds one term
// (W_ih@x + b_ih + W_hh@h[t-1] + b_hh -> pre = W_ih@x + b_ih + b_hh, hoisted;
// pre + W_hh@h[t-1] in the loop). Needs canonical sums and fresh time classes.
#pragma once

#include "passes/Compilation.h"

namespace rnnc {

/// Returns whether anything changed (time classes must then be recomputed).
bool hoistTimeParallel(Graph &g, const TimeClasses &time);

} // namespace rnnc
