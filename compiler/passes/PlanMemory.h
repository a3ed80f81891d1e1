// plan-memory: what backward will need kept for every step (the operands and
// results the adjoints read), and buffers for the values that cross launches,
// shared by liveness in issue order. Sizes per step and sequence, float32.
// Runs on any scheduled graph, the backward graph included.
#pragma once

#include "passes/Compilation.h"

namespace rnnc {

void planMemory(Compilation &c);

} // namespace rnnc
