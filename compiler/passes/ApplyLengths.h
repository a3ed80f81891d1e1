// apply-lengths (`--lengths`): the graph of a model whose sequences end at
// lengths[b] <= T. A value read across steps carries through the steps past a
// sequence's end (s' = active·s + (1 - active)·s'[t∓1]), so a forward loop's
// final state is its state at step len-1 and a backward loop (h[t+1]) starts at
// step len-1 from its initial state; outputs are zero there and the loss is a
// mean over the valid steps. Runs before autodiff, which derives the rest.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"

namespace rnnc {

/// False after an error (a value read more than one step away: its final
/// state would need the steps before len-1, which the carry does not keep).
bool applyLengths(Graph &g, DiagnosticEngine &diags);

} // namespace rnnc
