// stack-gemms: matrix products that share their vector operand (same node,
// same delay) and their stage become one GEMM over the params stacked by rows;
// each old product is a slice of it. The params of a stack are recorded as one
// block (GraphParam::stackedWith) so the runtime lays them out side by side and
// no copy is ever made. Needs fresh time classes.
#pragma once

#include "passes/Compilation.h"

namespace rnnc {

/// Returns whether anything changed.
bool stackGemms(Graph &g, const TimeClasses &time);

} // namespace rnnc
