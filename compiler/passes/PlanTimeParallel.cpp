// A candidate from the recurrence classes (analysis/Recurrence) becomes a plan
// when the mode admits it: Scan for scan candidates unless `off`; Newton for
// Newton candidates under `newton` and `auto`. The printers then need the
// loop's step to be elementwise: every node of the loop pointwise and of the
// same width n, every delayed read inside the loop one step back. Element i
// of the k states then depends only on element i of the k states one step
// back, a k×k block per element, which the scan composes.
#include "passes/PlanTimeParallel.h"

#include "analysis/Recurrence.h"

#include <cstdlib>
#include <fmt/format.h>

namespace rnnc {

const char *loopPlanName(LoopPlan plan) {
  switch (plan) {
  case LoopPlan::Sequential: return "sequential";
  case LoopPlan::Scan: return "scan";
  case LoopPlan::Newton: return "newton";
  }
  return "sequential";
}

namespace {

constexpr size_t kMaxScanStates = 4; // k×k blocks per element: 16 coefficients at most

/// Why the printers cannot run `loop` in parallel over time ("" when they can).
std::string unsupported(const Graph &g, const RecurrentLoop &loop, const TimeClasses &time, int index,
                        const RecurrenceClass &r) {
  int64_t width = -1;
  for (NodeId id : loop.nodes) {
    const Node &n = g.node(id);
    if (opKind(n.op) != OpKind::Pointwise)
      return fmt::format("its step has a {} (only elementwise steps run as scans)", opMnemonic(n.op));
    if (width < 0) width = n.width;
    if (n.width != width) return "its values have different widths (only elementwise steps run as scans)";
    for (const Edge &e : n.inputs)
      if (e.delay != 0 && time.loopOf[e.src] == index && std::abs(e.delay) != 1)
        return fmt::format("it reads its state {} steps back (scans read one)", std::abs(e.delay));
  }
  if (width <= 1) return "its values are one number per sequence (scans run over the elements of a vector)";
  if (r.states.size() > kMaxScanStates)
    return fmt::format("{} states couple per element (scans take {} at most)", r.states.size(), kMaxScanStates);
  return "";
}

} // namespace

void planTimeParallel(Compilation &c) { c.loopPlans = chooseLoopPlans(c); }

std::vector<LoopPlan> chooseLoopPlans(const Compilation &c, std::vector<std::string> *reasons) {
  std::vector<LoopPlan> plans(c.time.loops.size(), LoopPlan::Sequential);
  if (reasons) reasons->assign(c.time.loops.size(), "");
  if (!c.optimize) return plans;
  std::vector<RecurrenceClass> classes = classifyRecurrences(c.graph, c.time);
  for (size_t l = 0; l < classes.size(); ++l) {
    TimeParallelPlan candidate = classes[l].plan();
    LoopPlan plan = LoopPlan::Sequential;
    if (candidate == TimeParallelPlan::Scan) plan = LoopPlan::Scan;
    if (candidate == TimeParallelPlan::Newton) plan = LoopPlan::Newton;
    if (plan == LoopPlan::Sequential) continue;
    if (c.timeParallel.mode == TimeParallelMode::Off) {
      if (reasons) (*reasons)[l] = "--time-parallel off";
      continue;
    }
    if (plan == LoopPlan::Newton && c.timeParallel.mode == TimeParallelMode::Scan) {
      if (reasons) (*reasons)[l] = "--time-parallel scan (Newton needs newton or auto)";
      continue;
    }
    std::string why = unsupported(c.graph, c.time.loops[l], c.time, static_cast<int>(l), classes[l]);
    if (!why.empty()) {
      if (reasons) (*reasons)[l] = why;
      continue;
    }
    plans[l] = plan;
  }
  return plans;
}

} // namespace rnnc
