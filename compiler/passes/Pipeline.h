// The pass registry: every pass between the lowered graph and code generation,
// in pipeline order, with its contract, the facts it needs and provides, and
// whether it runs at -O0. runPipeline runs them from this table, and the
// command line (`show --after`, `--all`, rnnc-opt --pass) lists them from it.
#pragma once

#include "passes/Compilation.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rnnc {

/// What `show --after PASS` prints of a compilation after the pass.
enum class PassDump : uint8_t {
  Graph,            // the graph
  GraphTimeClasses, // the graph, then the time classes
  LoopPlans,        // how each loop runs, and why not in parallel over time
  Schedule,         // the stages and their launches
  Memory            // the memory plan
};

struct PassInfo {
  const char *name;     // as `--after` spells it
  const char *contract; // what it does, in a sentence or two (rnnc-opt --list, docs/passes.md)
  std::vector<const char *> needs;    // facts of the Compilation it reads ("graph", "time-classes", ...)
  std::vector<const char *> provides; // facts it makes fresh
  bool atO0;      // runs at -O0 too
  PassDump dump;  // what --after prints
  /// Runs the pass; sets `changed` when the graph changed. False after
  /// reporting a user error to `diags`. Null for "lower" (the frontend's).
  bool (*run)(Compilation &c, DiagnosticEngine &diags, bool &changed);
};

/// Every pass in pipeline order, "lower" first.
const std::vector<PassInfo> &passRegistry();

/// The pass named `name`, or null.
const PassInfo *findPass(std::string_view name);

/// The names, comma-separated, in pipeline order (for messages).
std::string passNameList();

/// Called after each pass with its name and whether it changed the graph.
using PassObserver = std::function<void(const std::string &pass, const Compilation &c, bool changed)>;

/// Runs the registry's passes on c.graph in order (c.optimize false: those
/// that run at -O0). Returns false after reporting a user error.
bool runPipeline(Compilation &c, DiagnosticEngine &diags, const PassObserver &observe = {});

/// Runs one pass on c, first making fresh what it needs that c lacks (time
/// classes, a schedule) by the passes that provide them: rnnc-opt's `--pass`.
bool runPass(const PassInfo &pass, Compilation &c, DiagnosticEngine &diags, bool &changed);

} // namespace rnnc
