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

#include <algorithm>

namespace rnnc {

namespace {

bool runCanonicalize(Compilation &c, DiagnosticEngine &, bool &changed) {
  changed = canonicalize(c.graph);
  return true;
}

bool runClassifyTime(Compilation &c, DiagnosticEngine &diags, bool &changed) {
  changed = false;
  return classifyTimePass(c, diags);
}

bool runHoistTimeParallel(Compilation &c, DiagnosticEngine &, bool &changed) {
  changed = hoistTimeParallel(c.graph, c.time);
  if (changed) c.time = classifyTime(c.graph);
  return true;
}

bool runStackGemms(Compilation &c, DiagnosticEngine &, bool &changed) {
  changed = stackGemms(c.graph, c.time);
  if (changed) c.time = classifyTime(c.graph);
  return true;
}

bool runPlanTimeParallel(Compilation &c, DiagnosticEngine &, bool &changed) {
  planTimeParallel(c);
  changed = false;
  return true;
}

bool runFusePointwise(Compilation &c, DiagnosticEngine &, bool &changed) {
  fusePointwise(c);
  changed = c.optimize; // -O0's one launch per op changes nothing worth printing again
  return true;
}

bool runSchedule(Compilation &c, DiagnosticEngine &, bool &changed) {
  schedule(c);
  changed = true;
  return true;
}

bool runPlanMemory(Compilation &c, DiagnosticEngine &, bool &changed) {
  planMemory(c);
  changed = true;
  return true;
}

} // namespace

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> passes = {
      {"lower", "The checked program of one cell or model becomes a graph (the frontend's last step; -O0 too).",
       {}, {"graph"}, true, PassDump::Graph, nullptr},
      {"canonicalize",
       "One form for what follows: n-ary sums and products, constants folded, duplicates merged, dead code gone.",
       {"graph"}, {"graph"}, false, PassDump::Graph, runCanonicalize},
      {"classify-time",
       "SCCs over all edges: what must run step by step (one loop per component, its direction from its delays) "
       "and what runs for all steps at once.",
       {"graph"}, {"time-classes"}, true, PassDump::GraphTimeClasses, runClassifyTime},
      {"hoist-time-parallel",
       "Terms of a recurrent sum that do not depend on the loop (the input GEMM, the biases) leave it.",
       {"graph", "time-classes"}, {"graph", "time-classes"}, false, PassDump::Graph, runHoistTimeParallel},
      {"stack-gemms",
       "Products of one vector in one stage become one GEMM over params laid out side by side.",
       {"graph", "time-classes"}, {"graph", "time-classes"}, false, PassDump::Graph, runStackGemms},
      {"plan-time-parallel",
       "Loops affine (or nonlinear) in a state with a diagonal step Jacobian run as parallel scans (or Newton "
       "iterations of scans), as --time-parallel allows; any other loop runs step by step, with the reason.",
       {"graph", "time-classes"}, {"loop-plans"}, true, PassDump::LoopPlans, runPlanTimeParallel},
      {"fuse-pointwise",
       "Pointwise work between GEMMs fuses into one kernel per stage (-O0: a launch per op).",
       {"graph", "time-classes", "loop-plans"}, {"stages"}, true, PassDump::Schedule, runFusePointwise},
      {"schedule",
       "Stages in issue order; independent stages on their own streams, with events between.",
       {"graph", "time-classes", "stages"}, {"schedule"}, true, PassDump::Schedule, runSchedule},
      {"plan-memory",
       "What backward keeps per step, and buffers for the values that cross launches, shared by liveness.",
       {"graph", "schedule"}, {"memory-plan"}, true, PassDump::Memory, runPlanMemory},
  };
  return passes;
}

const PassInfo *findPass(std::string_view name) {
  for (const PassInfo &p : passRegistry())
    if (name == p.name) return &p;
  return nullptr;
}

std::string passNameList() {
  std::string list;
  for (const PassInfo &p : passRegistry()) list += (list.empty() ? "" : ", ") + std::string(p.name);
  return list;
}

bool runPipeline(Compilation &c, DiagnosticEngine &diags, const PassObserver &observe) {
  for (const PassInfo &p : passRegistry()) {
    if (!p.run || (!c.optimize && !p.atO0)) continue;
    bool changed = false;
    if (!p.run(c, diags, changed)) return false;
#ifndef NDEBUG
    verifyOrDie(c.graph, p.name);
#endif
    if (observe) observe(p.name, c, changed);
  }
  verifyOrDie(c.graph, "the pipeline"); // before code generation
  return true;
}

bool runPass(const PassInfo &pass, Compilation &c, DiagnosticEngine &diags, bool &changed) {
  // What each fact's provider is: the first pass in the registry that provides it.
  auto has = [&](const std::string &fact) {
    if (fact == "graph") return true;
    if (fact == "time-classes") return !c.time.level.empty() || c.graph.nodes.empty();
    if (fact == "loop-plans") return c.loopPlans.size() == c.time.loops.size();
    if (fact == "stages" || fact == "schedule") return !c.schedule.stages.empty();
    return false;
  };
  for (const char *need : pass.needs) {
    if (has(need)) continue;
    for (const PassInfo &p : passRegistry()) {
      if (&p == &pass || !p.run) continue;
      if (std::find_if(p.provides.begin(), p.provides.end(), [&](const char *f) { return std::string(f) == need; }) ==
          p.provides.end())
        continue;
      bool ignored = false;
      if (!runPass(p, c, diags, ignored)) return false;
      break;
    }
  }
  if (!pass.run) return true;
  if (!pass.run(c, diags, changed)) return false;
  verifyOrDie(c.graph, pass.name);
  return true;
}

} // namespace rnnc
