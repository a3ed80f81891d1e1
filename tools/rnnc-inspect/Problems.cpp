// The rules that flag what the emitter must never produce: unchecked statuses,
// launches of unknown kernels or under another name, kernels never launched,
// and kernels or library-call launchers whose comment names no equation. Each
// rule is a function of the collected sites and kernels; rnnc helpers are
// exempt from the equation and never-launched rules.
#include "Problems.h"

#include <algorithm>
#include <map>
#include <set>

namespace rnnc::inspect {
namespace {

/// "the launch of 'fused_2'", or "a kernel" when it cannot be told.
std::string launchOf(const Site &s) { return s.kernel.empty() ? "a kernel" : "'" + s.kernel + "'"; }

/// A library call kept; its status flagged when dropped.
void libraryCall(const Site &s, Inspection &out, std::vector<Problem> &problems) {
  bool checked = s.status.empty() || !s.dropped;
  out.libraryCalls.push_back({s.callee, s.function, s.status, checked, s.functionComment.equations, s.line});
  if (!checked)
    problems.push_back(
        {"unchecked-status", "the " + s.status + " that " + s.callee + "() returns is not checked", s.line});
}

/// A launch tied to its kernel (by name), or flagged.
void launch(const Site &s, const std::map<std::string, size_t> &byName, Inspection &out,
            std::vector<Problem> &problems) {
  if (!s.status.empty() && s.dropped)
    problems.push_back(
        {"unchecked-status", "the " + s.status + " of the launch of " + launchOf(s) + " is not checked", s.line});
  auto k = byName.find(s.kernel);
  if (s.kernel.empty() || k == byName.end()) {
    problems.push_back({"unknown-kernel",
                        s.kernel.empty() ? "cannot tell which kernel this launch runs"
                                         : "the launched '" + s.kernel + "' is no kernel of this file",
                        s.line});
    return;
  }
  if (!s.what.empty() && s.what != s.kernel)
    problems.push_back({"launch-name-mismatch",
                        "the launch of '" + s.kernel + "' calls it \"" + s.what + "\" in its error message", s.line});
  out.kernels[k->second].launches.push_back({s.function, s.grid, s.block, s.stream, s.sharedMemory, s.line, s.cooperative});
}

/// Kernels (not helpers) never launched, or whose comment names no equation.
void kernelRules(const std::vector<Kernel> &kernels, std::vector<Problem> &problems) {
  for (const Kernel &k : kernels) {
    if (k.helper) continue; // rnnc's helpers: no equation, and a model may not need them
    if (k.launches.empty()) problems.push_back({"never-launched", "kernel '" + k.name + "' is never launched", k.line});
    if (k.equations.empty())
      problems.push_back(
          {"no-equation", "the comment above kernel '" + k.name + "' names no equation (FILE.rnn:LINE)", k.line});
  }
}

/// Launchers (functions named launch_*, not helpers) of a library call whose
/// comment names no equation; one problem per launcher, at its definition.
void launcherRules(const std::vector<Site> &sites, std::vector<Problem> &problems) {
  std::set<std::pair<unsigned, std::string>> seen;
  for (const Site &s : sites) {
    if (s.kind != Site::Kind::Library || s.function.rfind("launch_", 0) != 0) continue;
    if (s.functionComment.helper || !s.functionComment.equations.empty()) continue;
    if (!seen.insert({s.functionLine, s.function}).second) continue;
    problems.push_back({"no-equation",
                        "the comment above launcher '" + s.function + "' (it calls " + s.callee +
                            "()) names no equation (FILE.rnn:LINE)",
                        s.functionLine});
  }
}

} // namespace

Inspection assemble(const std::string &path, const std::string &language, const std::vector<Site> &sites,
                    std::vector<Kernel> kernels, const std::string &kernelString) {
  Inspection out;
  out.file = path;
  out.language = language;
  out.kernelString = kernelString;
  out.kernels = std::move(kernels);
  std::map<std::string, size_t> byName;
  for (size_t i = 0; i < out.kernels.size(); ++i) byName[out.kernels[i].name] = i;
  for (const Site &s : sites) {
    if (s.kind == Site::Kind::Library)
      libraryCall(s, out, out.problems);
    else
      launch(s, byName, out, out.problems);
  }
  kernelRules(out.kernels, out.problems);
  launcherRules(sites, out.problems);
  std::stable_sort(out.problems.begin(), out.problems.end(),
                   [](const Problem &a, const Problem &b) { return a.line < b.line; });
  return out;
}

} // namespace rnnc::inspect
