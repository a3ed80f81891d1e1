#include "passes/Stats.h"

#include "rnnc/workspace.h"

#include "analysis/Recurrence.h"
#include "ir/Pointwise.h"
#include "passes/PlanMemory.h"

#include <algorithm>
#include <fmt/format.h>

namespace rnnc {

int64_t nodeFlops(const Graph &g, NodeId id) {
  const Node &n = g.node(id);
  switch (opKind(n.op)) {
  case OpKind::Gemm: return 2 * n.width * g.node(n.inputs[0].src).width;
  case OpKind::Pointwise: {
    if (const PointwiseRule *rule = pointwiseRule(n.op)) return rule->flops * n.width;
    int64_t ops = (n.op == Op::Add || n.op == Op::Mul) ? static_cast<int64_t>(n.inputs.size()) - 1 : 1;
    return ops * n.width;
  }
  case OpKind::Reduce: return g.node(n.inputs[0].src).width * (n.op == Op::CrossEntropy || n.op == Op::Mse ? 3 : 1);
  case OpKind::Accumulate: return 2 * n.width; // per step: one multiply-add per element
  case OpKind::Leaf:
  case OpKind::Layout: return 0;
  }
  return 0;
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
  s.bufferBytesPerStep = c.memory.bytesPerStep;
  s.bufferFixedBytes = c.memory.fixedBytes;
  s.cpuBytesPerStep = c.memory.cpuBytesPerStep;
  s.cpuFixedBytes = c.memory.cpuFixedBytes;
  s.blockBytesPerStep = c.memory.blockBytesPerStep;
  s.callerBytesPerStep = c.memory.callerBytesPerStep;
  s.zeroRowBytes = 4 * c.memory.zeroRowElements;
  s.cudaBytesPerStep = 4 * c.memory.onesWidth;
  s.maskKeyBytes = c.memory.maskKeyBytes;
  s.droppedParamBytes = (c.memory.half ? 2 : 4) * c.memory.droppedElements;
  s.roundedBytesPerRow = 2 * c.memory.roundedPerRow;
  s.gridBarrierBytes = 4 * c.memory.gridBarrierWords;
  s.droppedGradBytes = 4 * c.memory.droppedGradElements;
  s.packedBytesPerRow = 4 * c.memory.packWidth;
  s.panelBytes = 4 * c.memory.panelElements;
  s.dtype = c.dtype;
  s.lossScaleBytes = c.memory.lossScale ? 4 : 0;
  s.gradSumBytes = 4 * c.memory.gradSumElements;
  s.buffers = c.memory.buffers;
  return s;
}

int64_t workspaceBytes(const MemoryPlan &m, int64_t T, int64_t B, bool cuda) {
  auto aligned = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  int64_t total = 0;
  // The CPU's blocks of steps, as the bundle's layout() takes them.
  static_assert(MemoryPlan::kBlockRows == RNNC_BLOCK_ROWS, "the plan's figures and rnnc/workspace.h agree");
  const int64_t blockSteps = host::block_steps(T, B);
  for (const WorkspaceBuffer &b : m.buffers)
    if ((cuda ? b.shares : b.cpuShares) >= 0 || (b.caller && !cuda)) continue; // the CPU uses the caller's array
    else if (b.block && !cuda) total += aligned(B * blockSteps * b.bytesPerStep());
    else total += aligned(B * (T * b.bytesPerStep() + b.fixedBytes()));
  if (!cuda && m.zeroRowElements) total += aligned(4 * m.zeroRowElements);
  if (cuda && m.onesWidth) total += aligned(B * T * 4 * m.onesWidth);
  if (cuda && m.gridBarrierWords) total += aligned(4 * m.gridBarrierWords);
  if (m.maskKeyBytes) total += aligned(m.maskKeyBytes);
  if (m.lengths) total += aligned(4 * B) + aligned(8);
  if (!cuda && m.panelElements) total += aligned(4 * m.panelElements);
  if (m.lossScale) total += aligned(4);
  if (m.gradSumElements) total += aligned(4 * m.gradSumElements);
  if (cuda && m.roundedPerRow)
    total += aligned(2 * m.roundedStreams * std::max(m.roundedPerRow, std::min(T * B * m.roundedPerRow, MemoryPlan::kRoundedElements)));
  if (!cuda && m.packWidth) total += aligned(4 * std::min(T * B, MemoryPlan::kPackedRows) * m.packWidth);
  if (m.droppedElements) total += aligned((m.half ? 2 : 4) * m.droppedElements);
  if (m.droppedGradElements) total += aligned(4 * m.droppedGradElements);
  return std::max<int64_t>(total, 64);
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
  nlohmann::json buffers = nlohmann::json::array();
  for (const WorkspaceBuffer &b : s.buffers) {
    nlohmann::json e = {{"name", b.name},
                        {"width", b.width},
                        {"dtype", b.index ? "int32" : b.half ? dtypeName(s.dtype) : "real"},
                        {"pad_before", b.padBefore},
                        {"pad_after", b.padAfter},
                        {"steps", bufferSteps(b)},
                        {"backward", b.backward},
                        {"saved", b.saved},
                        {"bytes_per_step", b.bytesPerStep()},
                        {"fixed_bytes", b.fixedBytes()}};
    if (b.shares >= 0) e["shares"] = s.buffers[b.shares].name;
    if (b.cpuShares != b.shares) // the CPU's sharing, where it differs (null: memory of its own)
      e["cpu_shares"] = b.cpuShares >= 0 ? nlohmann::json(s.buffers[b.cpuShares].name) : nlohmann::json(nullptr);
    if (b.block) e["cpu_block"] = true;
    if (b.caller) e["cpu_caller"] = true;
    buffers.push_back(e);
  }
  return {{"forward", directionJson(s.forward)},
          {"backward", directionJson(s.backward)},
          {"streams", s.streams},
          {"saved_bytes_per_step", s.savedBytesPerStep},
          {"buffer_bytes_per_step", s.bufferBytesPerStep},
          {"buffer_fixed_bytes", s.bufferFixedBytes},
          {"cpu_buffer_bytes_per_step", s.cpuBytesPerStep},
          {"cpu_buffer_fixed_bytes", s.cpuFixedBytes},
          {"block_bytes_per_step", s.blockBytesPerStep},
          {"block_rows", MemoryPlan::kBlockRows},
          {"caller_bytes_per_step", s.callerBytesPerStep},
          {"zero_row_bytes", s.zeroRowBytes},
          {"cuda_bytes_per_step", s.cudaBytesPerStep},
          {"mask_key_bytes", s.maskKeyBytes},
          {"dropped_param_bytes", s.droppedParamBytes},
          {"packed_bytes_per_row", s.packedBytesPerRow},
          {"packed_rows", MemoryPlan::kPackedRows},
          {"panel_bytes", s.panelBytes},
          {"loss_scale_bytes", s.lossScaleBytes},
          {"grad_sum_bytes", s.gradSumBytes},
          {"rounded_bytes_per_row", s.roundedBytesPerRow},
          {"grid_barrier_bytes", s.gridBarrierBytes},
          {"rounded_elements", MemoryPlan::kRoundedElements},
          {"dropped_grad_bytes", s.droppedGradBytes},
          {"workspace", {{"align_bytes", 64}, {"buffers", buffers}}},
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
  int sharing = 0, cpuSharing = 0;
  for (const WorkspaceBuffer &b : s.buffers) {
    sharing += b.shares >= 0;
    cpuSharing += b.cpuShares >= 0;
  }
  out += fmt::format("streams: {}\nsaved for backward: {} bytes per step and sequence\n", s.streams, s.savedBytesPerStep);
  out += fmt::format("workspace: {} bytes per step and sequence plus {} per sequence, {} buffers ({} sharing memory)",
                     s.bufferBytesPerStep, s.bufferFixedBytes, s.buffers.size(), sharing);
  if (s.cpuBytesPerStep != s.bufferBytesPerStep || s.cpuFixedBytes != s.bufferFixedBytes || cpuSharing != sharing)
    out += fmt::format("; the CPU's sharing: {} per step plus {} per sequence ({} sharing memory)", s.cpuBytesPerStep,
                       s.cpuFixedBytes, cpuSharing);
  if (s.blockBytesPerStep)
    out += fmt::format("; of those, the CPU keeps {} per step for a block of about {} rows, not all T",
                       s.blockBytesPerStep, MemoryPlan::kBlockRows);
  if (s.callerBytesPerStep)
    out += fmt::format("; the CPU reads or writes {} per step in the caller's arrays instead", s.callerBytesPerStep);
  if (s.cudaBytesPerStep) out += fmt::format("; CUDA adds {} per step", s.cudaBytesPerStep);
  if (s.roundedBytesPerRow)
    out += fmt::format("; CUDA rounds the products' float operands to {} in {} bytes per row and stream, up to {} "
                       "MiB",
                       dtypeName(s.dtype), s.roundedBytesPerRow, 2 * MemoryPlan::kRoundedElements >> 20);
  if (s.panelBytes) out += fmt::format("; the CPU packs the products' weights in {} bytes", s.panelBytes);
  if (s.packedBytesPerRow)
    out += fmt::format("; the CPU packs running rows in {} bytes per row, up to {} rows", s.packedBytesPerRow,
                       MemoryPlan::kPackedRows);
  if (s.droppedParamBytes)
    out += fmt::format("; dropped params {} bytes{}", s.droppedParamBytes,
                       s.droppedGradBytes ? fmt::format(" and {} for their gradients", s.droppedGradBytes) : "");
  return out + "\n";
}

} // namespace rnnc
