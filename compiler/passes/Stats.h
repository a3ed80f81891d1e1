// The figures `rnnc show --stats` reports for a scheduled compilation: loops,
// launches and GEMMs per step inside loops, hoisted GEMMs, flops per step and
// sequence, streams, bytes saved per step (DESIGN.md §5), and the memory plan's
// workspace, which is what the bundles allocate (passes/PlanMemory.h).
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
  DType dtype = DType::F32; // --dtype: a 16-bit buffer's elements are 2 bytes
  // Memory, per sequence, float32 (c.memory):
  int64_t savedBytesPerStep = 0;  // forward values backward reads
  int64_t bufferBytesPerStep = 0; // the workspace's buffers, per step of T (CUDA's sharing)
  int64_t bufferFixedBytes = 0;   // and what does not grow with T
  int64_t cpuBytesPerStep = 0;    // the same with the CPU's sharing, every buffer counted for all T
  int64_t cpuFixedBytes = 0;
  int64_t blockBytesPerStep = 0;  // of cpuBytesPerStep, what the CPU keeps a block of steps of (CUDA: all T)
  int64_t callerBytesPerStep = 0; // of cpuBytesPerStep, what the CPU reads or writes in the caller's arrays
  int64_t zeroRowBytes = 0;       // CPU: the row of zeros a caller's seed reads when there is none (float32)
  int64_t cudaBytesPerStep = 0;   // what the CUDA bundle adds (its ones)
  int64_t maskKeyBytes = 0;       // the masks' key and mode (dropout, zoneout)
  int64_t droppedParamBytes = 0;  // dropped params (DropConnect), float32, not per sequence
  int64_t packedBytesPerRow = 0;  // --lengths, CPU: the running rows packed, float32, up to kPackedRows rows
  int64_t panelBytes = 0;         // CPU: the products' weights packed once per call (float32)
  int64_t lossScaleBytes = 0;     // forward's loss scale, kept for backward (float32)
  int64_t gradSumBytes = 0;       // --dtype bf16|f16: the params' gradients summed in float32
  int64_t roundedBytesPerRow = 0; // CUDA, --dtype bf16|f16: a product's float operands rounded to 16 bits
  int64_t gridBarrierBytes = 0;   // CUDA: the persistent loops' grid barriers, not per sequence
  int64_t droppedGradBytes = 0;   // and their gradients
  std::vector<WorkspaceBuffer> buffers;
  int kernels = 0;
};

/// The bytes `workspace_bytes(T, B)` of a bundle returns for this plan (the
/// CUDA bundle's when `cuda`): each buffer with memory of its own on that
/// target (the CPU's blocks of block_steps(T, B) steps, not the caller's
/// arrays it reads in place) and each scratch area, rounded up to 64 bytes;
/// 64 in all at least.
int64_t workspaceBytes(const MemoryPlan &m, int64_t T, int64_t B, bool cuda);

/// Floating-point operations of one node per step and sequence.
int64_t nodeFlops(const Graph &g, NodeId id);
Stats computeStats(const Compilation &c);
nlohmann::json statsJson(const Stats &s);
std::string statsText(const Stats &s);

} // namespace rnnc
