// plan-memory: the one memory plan of a scheduled compilation, which the kernel
// IR and both targets allocate exactly: which values leave their sweep and get
// a workspace buffer, each buffer's padding and rows (all T steps, one step, a
// ring, or padding only), what shares memory by liveness, the scratch of loops
// run in parallel over time, and what backward keeps per step.
// Runs on any scheduled graph, the backward graph included (c.memory).
#pragma once

#include "passes/Compilation.h"

namespace rnnc {

void planMemory(Compilation &c);

/// "T", "one", "ring of 3" or "none": the steps a buffer keeps (as the manifest says).
std::string bufferSteps(const WorkspaceBuffer &b);
/// Its rows per sequence: "T + 1", "T", "1" (one step), "3" (a ring, or padding only).
std::string bufferRows(const WorkspaceBuffer &b);

} // namespace rnnc
