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

// What both printers of a loop run in parallel over time (CppScan, CudaScan) spell alike.

/// The name of stage `stage`'s parallel loop, "scan_2" or "newton_3": the
/// C++ function; CUDA's kernels append their pass ("scan_2_chunks").
std::string scanName(const StageIR &s, int stage);
/// The step at loop position `j` of a loop in `direction`: "j", or
/// "T - 1 - j" ("T - 1 - (run.end - 1)") backward.
std::string stepAt(int direction, const std::string &j);
/// Stage `stage`'s number among forward's or backward's ("// Stage N").
int stageOrdinal(const Program &p, int stage);
/// The equations of the loop's kernels, in order, as one KernelIR's (for
/// the comment that names them).
KernelIR loopEquations(const Program &p, const StageIR &s);

} // namespace rnnc::codegen
