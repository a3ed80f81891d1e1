#include "driver/Entity.h"

#include <fmt/format.h>

namespace rnnc {

/// The cell or model a command compiles: --entry, else the file's only model,
/// else its only root cell. Null after printing why not.
const Elaboration *selectEntity(const FrontendResult &r, const std::string &file, const std::string &entry) {
  std::vector<const Elaboration *> models, all;
  std::string names;
  for (const auto &e : r.sema.entities) {
    all.push_back(&e);
    if (e.decl->isModel) models.push_back(&e);
    names += (names.empty() ? "" : ", ") + e.decl->name.name;
  }
  const Elaboration *chosen = nullptr;
  if (!entry.empty()) {
    for (const Elaboration *e : all)
      if (e->decl->name.name == entry) chosen = e;
    if (!chosen) {
      fmt::print(stderr, "rnnc: error: {} has no cell or model '{}' to compile (it has: {})\n", file, entry,
                 names.empty() ? "none" : names);
      return nullptr;
    }
  } else if (models.size() == 1) {
    chosen = models[0];
  } else if (models.empty() && all.size() == 1) {
    chosen = all[0];
  } else {
    fmt::print(stderr, "rnnc: error: {} has {}; choose one with --entry NAME\n", file,
               all.empty() ? std::string("no cell or model to compile") : "several to compile: " + names);
    return nullptr;
  }
  if (!chosen->complete) {
    std::string dims, flags;
    for (const auto &d : chosen->unboundDims) {
      dims += (dims.empty() ? "" : ", ") + d;
      flags += fmt::format(" -D {}=...", d);
    }
    fmt::print(stderr, "rnnc: error: {} {} has dims with no value ({}): declare them or pass{}\n",
               chosen->decl->keyword(), chosen->decl->name.name, dims, flags);
    return nullptr;
  }
  return chosen;
}

void printSummary(const DiagnosticEngine &d) {
  unsigned e = d.errorCount(), w = d.warningCount();
  if (!e && !w) return;
  std::string summary;
  if (w) summary = fmt::format("{} warning{}", w, w == 1 ? "" : "s");
  if (e) summary += fmt::format("{}{} error{}", w ? " and " : "", e, e == 1 ? "" : "s");
  fmt::print(stderr, "{} generated.\n", summary);
}

} // namespace rnnc
