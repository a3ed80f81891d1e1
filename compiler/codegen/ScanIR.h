// Builds the ScanIR of a loop stage that plan-time-parallel lets run in
// parallel over time: finds its states and joins its kernels into the step of
// one element. It checks what the printers rely on and leaves the stage
// sequential, with the reason, where the kernel IR breaks it.
#pragma once

#include "codegen/KernelIR.h"

#include <string>

namespace rnnc::codegen {

/// Fills p.stages[stage].scan for `plan`, over the scratch buffers
/// plan-memory gave the loop. False, with the stage left sequential and `why`
/// set, when the loop's kernels are not one elementwise step over states read
/// one step back, or not the k states of width n the scratch was sized for.
bool buildScanIR(Program &p, int stage, LoopPlan plan, bool guarded, int iterations, const ScanScratch &scratch,
                 std::string &why);

} // namespace rnnc::codegen
