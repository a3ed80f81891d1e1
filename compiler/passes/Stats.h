// The figures `rnnc show --stats` reports for a scheduled compilation: loops,
// launches and GEMMs per step inside loops, hoisted GEMMs, flops per step and
// sequence, streams and bytes saved per step (DESIGN.md §5).
#pragma once

#include "passes/Compilation.h"

#include <nlohmann/json.hpp>
#include <string>

namespace rnnc {

struct DirectionStats {
  int loops = 0;
  int stepLaunches = 0; // launches per step inside loops, summed over loops
  int stepGemms = 0;
  int hoistedGemms = 0;
  int64_t flopsInLoops = 0; // per step and sequence
  int64_t flopsHoisted = 0;
  int scanLoops = 0;   // loops that run as parallel scans (passes/PlanTimeParallel.h)
  int newtonLoops = 0; // loops that run as Newton iterations of scans
};

struct Stats {
  DirectionStats forward, backward; // backward: zero until BPTT lands
  int streams = 1;
  int64_t savedBytesPerStep = 0;
  int64_t bufferBytesPerStep = 0;
  int kernels = 0;
};

/// Floating-point operations of one node per step and sequence.
int64_t nodeFlops(const Graph &g, NodeId id);
Stats computeStats(const Compilation &c);
nlohmann::json statsJson(const Stats &s);
std::string statsText(const Stats &s);

} // namespace rnnc
