// fuse-pointwise: groups the nodes of each stage into launches. Every GEMM is a
// launch of its own; the pointwise, layout and reduction nodes between two
// GEMMs of a stage fuse into one kernel (inside a loop: one kernel per step
// where the cell allows it). Fills c.schedule.stages, not yet in issue order.
// At -O0 every op is a launch of its own. Needs fresh time classes.
#pragma once

#include "passes/Compilation.h"

namespace rnnc {

void fusePointwise(Compilation &c);

/// Whether an op runs as a GEMM (cuBLAS / CBLAS): products, and dW = sum delta x^T.
bool isGemm(Op op);

/// Live nodes in an order that respects every edge except those inside a loop
/// (which cross to the previous or next step).
std::vector<NodeId> dataflowOrder(const Graph &g, const TimeClasses &time);

} // namespace rnnc
