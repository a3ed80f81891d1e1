#include "passes/Stats.h"

#include "analysis/Recurrence.h"

#include <fmt/format.h>

namespace rnnc {

int64_t nodeFlops(const Graph &g, NodeId id) {
  const Node &n = g.node(id);
  switch (opKind(n.op)) {
  case OpKind::Gemm: return 2 * n.width * g.node(n.inputs[0].src).width;
  case OpKind::Pointwise: {
    int64_t ops = (n.op == Op::Add || n.op == Op::Mul) ? static_cast<int64_t>(n.inputs.size()) - 1 : 1;
    return ops * n.width;
  }
  case OpKind::Reduce: return g.node(n.inputs[0].src).width * (n.op == Op::CrossEntropy || n.op == Op::Mse ? 3 : 1);
  case OpKind::Accumulate: return 2 * n.width; // per step: one multiply-add per element
  default: return 0;
  }
}

Stats computeStats(const Compilation &c) {
  Stats s;
  // Loops run as scans or Newton iterations (none at -O0 or --time-parallel off).
  for (const Stage &stage : c.schedule.stages) {
    int64_t flops = 0;
    for (NodeId id : stage.nodes) flops += nodeFlops(c.graph, id);
    int gemms = 0;
    for (const Kernel &k : stage.kernels) gemms += k.gemm;
    s.kernels += static_cast<int>(stage.kernels.size());
    DirectionStats &d = stage.backward ? s.backward : s.forward;
    if (stage.loop) {
      ++d.loops;
      d.stepLaunches += static_cast<int>(stage.kernels.size());
      d.stepGemms += gemms;
      d.flopsInLoops += flops;
      if (stage.loopIndex >= 0 && static_cast<size_t>(stage.loopIndex) < c.loopPlans.size()) {
        LoopPlan plan = c.loopPlans[stage.loopIndex];
        d.scanLoops += plan == LoopPlan::Scan;
        d.newtonLoops += plan == LoopPlan::Newton;
      }
    } else {
      d.hoistedGemms += gemms;
      d.flopsHoisted += flops;
    }
  }
  s.streams = c.schedule.streams;
  s.savedBytesPerStep = c.memory.savedBytesPerStep;
  s.bufferBytesPerStep = c.memory.bufferBytesPerStep;
  return s;
}

namespace {
nlohmann::json directionJson(const DirectionStats &d) {
  return {{"loops", d.loops},
          {"step_launches", d.stepLaunches},
          {"step_gemms", d.stepGemms},
          {"hoisted_gemms", d.hoistedGemms},
          {"flops_in_loops", d.flopsInLoops},
          {"flops_hoisted", d.flopsHoisted},
          {"scan_loops", d.scanLoops},
          {"newton_loops", d.newtonLoops}};
}
} // namespace

nlohmann::json statsJson(const Stats &s) {
  return {{"forward", directionJson(s.forward)},
          {"backward", directionJson(s.backward)},
          {"streams", s.streams},
          {"saved_bytes_per_step", s.savedBytesPerStep},
          {"buffer_bytes_per_step", s.bufferBytesPerStep},
          {"kernels", s.kernels}};
}

std::string statsText(const Stats &s) {
  std::string out;
  for (auto [name, d] : {std::pair<const char *, const DirectionStats *>{"forward", &s.forward}, {"backward", &s.backward}}) {
    auto plural = [](int n, const char *one, const char *many) { return fmt::format("{} {}", n, n == 1 ? one : many); };
    out += fmt::format("{}: {}, {} and {} per step in loops, {}; {} flops per step in loops, {} hoisted (per "
                       "sequence)\n",
                       name, plural(d->loops, "loop", "loops"), plural(d->stepLaunches, "launch", "launches"),
                       plural(d->stepGemms, "GEMM", "GEMMs"), plural(d->hoistedGemms, "hoisted GEMM", "hoisted GEMMs"),
                       d->flopsInLoops,
                       d->flopsHoisted);
  }
  out += fmt::format("streams: {}\nsaved for backward: {} bytes per step and sequence\nbuffers: {} bytes per step and "
                     "sequence\n", s.streams, s.savedBytesPerStep, s.bufferBytesPerStep);
  return out;
}

} // namespace rnnc
