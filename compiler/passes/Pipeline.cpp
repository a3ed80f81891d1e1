#include "passes/Pipeline.h"

#include "ir/Verifier.h"
#include "passes/Canonicalize.h"
#include "passes/ClassifyTime.h"
#include "passes/FusePointwise.h"
#include "passes/HoistTimeParallel.h"
#include "passes/PlanMemory.h"
#include "passes/PlanTimeParallel.h"
#include "passes/Schedule.h"
#include "passes/StackGemms.h"

namespace rnnc {

const std::vector<std::string> &passNames() {
  static const std::vector<std::string> names = {"lower",      "canonicalize",   "classify-time", "hoist-time-parallel",
                                                 "stack-gemms", "fuse-pointwise", "schedule",      "plan-memory"};
  return names;
}

bool runPipeline(Compilation &c, DiagnosticEngine &diags, const PassObserver &observe) {
  auto done = [&](const char *pass, bool changed) {
#ifndef NDEBUG
    verifyOrDie(c.graph, pass);
#endif
    if (observe) observe(pass, c, changed);
  };
  bool opt = c.optimize;
  // One form for what follows: n-ary sums, constants folded, duplicates merged, dead code gone.
  if (opt) done("canonicalize", canonicalize(c.graph));
  // SCCs over all edges: what must run step by step, and in which direction.
  if (!classifyTimePass(c, diags)) return false;
  done("classify-time", false);
  // Time-parallel terms of recurrent sums (the input GEMM, the biases) leave the loop.
  if (opt) {
    bool changed = hoistTimeParallel(c.graph, c.time);
    if (changed) c.time = classifyTime(c.graph);
    done("hoist-time-parallel", changed);
  }
  // Products of one vector in one stage become one GEMM over params laid out side by side.
  if (opt) {
    bool changed = stackGemms(c.graph, c.time);
    if (changed) c.time = classifyTime(c.graph);
    done("stack-gemms", changed);
  }
  // Loops affine (or nonlinear) in a state with a diagonal step Jacobian run as parallel scans (or
  // Newton iterations of scans), as --time-parallel allows; nothing sinks into them.
  planTimeParallel(c);
  // Pointwise work between GEMMs fuses into one kernel per stage (-O0: a launch per op).
  fusePointwise(c);
  done("fuse-pointwise", c.optimize);
  // Stages in issue order; independent stages on their own streams, events between.
  schedule(c);
  done("schedule", true);
  // What backward keeps per step; buffers shared by liveness.
  planMemory(c);
  done("plan-memory", true);
  verifyOrDie(c.graph, "the pipeline"); // before code generation
  return true;
}

} // namespace rnnc
