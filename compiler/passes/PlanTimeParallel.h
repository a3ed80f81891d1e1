// plan-time-parallel: how each loop runs under `--time-parallel`. A loop the
// recurrence classes make a scan (or Newton) candidate runs that way when the
// mode allows it and its step is one the scan printers handle: pointwise ops
// of one width over states read one step back; any other loop runs step by
// step, with the reason kept for `show --schedule`.
#pragma once

#include "passes/Compilation.h"

#include <string>
#include <vector>

namespace rnnc {

/// The plan of each loop of c.time under c.timeParallel; `reasons`
/// (optional) gets, per loop, why a candidate runs step by step ("" where it
/// does not, or is no candidate).
std::vector<LoopPlan> chooseLoopPlans(const Compilation &c, std::vector<std::string> *reasons = nullptr);

/// c.loopPlans = chooseLoopPlans(c).
void planTimeParallel(Compilation &c);

const char *loopPlanName(LoopPlan plan); // "sequential", "scan", "newton"

} // namespace rnnc
