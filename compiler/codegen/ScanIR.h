// Builds the ScanIR of a loop stage that plan-time-parallel lets run in
// parallel over time: finds its states and joins its kernels into the step of
// one element. It checks what the printers rely on and leaves the stage
// sequential, with the reason, where the kernel IR breaks it.
#pragma once

#include "codegen/KernelIR.h"

#include <string>

namespace rnnc::codegen {

/// Fills p.stages[stage].scan for `plan` (adding its scratch buffers to p).
/// False, with the stage left sequential and `why` set, when the loop's
/// kernels are not one elementwise step over states read one step back.
bool buildScanIR(Program &p, int stage, LoopPlan plan, bool guarded, int iterations, std::string &why);

} // namespace rnnc::codegen
