// What the pipeline works on and produces: the graph, its time classes, the
// schedule (stages of kernels on streams) and the memory plan. Passes read and
// write a Compilation; `rnnc show` prints its parts.
#pragma once

#include "analysis/TimeClasses.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rnnc {

/// One launch: a GEMM (cuBLAS / CBLAS) or a fused pointwise kernel.
struct Kernel {
  bool gemm = false;
  std::vector<NodeId> nodes; // in dependency order
};

/// Work that runs together: all steps at once (time-parallel: index space
/// T·B·n) or a sequential loop over time (B·n per step).
struct Stage {
  bool loop = false;
  int direction = +1;  // loops: +1 runs t = 0..T-1, -1 runs t = T-1..0
  int level = 0;       // TimeClasses level
  int loopIndex = -1;  // TimeClasses loop, for loops
  bool backward = false; // holds backward (autodiff) nodes
  std::vector<NodeId> nodes;
  std::vector<Kernel> kernels;
  int stream = 0;
  std::vector<int> after; // stages it needs (its inputs come from them)
  std::vector<int> waits; // of those, the ones on another stream: an event each
};

struct Schedule {
  std::vector<Stage> stages; // in the order they are issued
  int streams = 1;
};

struct MemoryPlan {
  std::vector<NodeId> saved;        // values backward needs, kept for every step
  int64_t savedBytesPerStep = 0;    // per sequence, float32
  int64_t bufferBytesPerStep = 0;   // kernel outputs in memory, after sharing
  int64_t unsharedBytesPerStep = 0; // the same without sharing
  int buffers = 0;
};

/// `--time-parallel`: which loops may run in parallel over time.
enum class TimeParallelMode : uint8_t {
  Off,    // every loop step by step
  Scan,   // affine loops with a (block-)diagonal Jacobian as parallel scans
  Newton, // those, and nonlinear ones with such a Jacobian as Newton iterations of scans
  Auto    // both, each chosen at run time by the cost model over T, B·n and the iterations
};

struct TimeParallelOptions {
  TimeParallelMode mode = TimeParallelMode::Auto;
  int newtonIterations = 3;
};

/// How one loop runs (per TimeClasses loop).
enum class LoopPlan : uint8_t { Sequential, Scan, Newton };

struct Compilation {
  Graph graph;
  bool optimize = true; // false: -O0
  TimeParallelOptions timeParallel;
  std::vector<LoopPlan> loopPlans; // per TimeClasses loop (plan-time-parallel; all Sequential at -O0 or Off)
  TimeClasses time;
  Schedule schedule;
  MemoryPlan memory;
};

} // namespace rnnc
