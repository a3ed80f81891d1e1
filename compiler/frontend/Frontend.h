// Frontend: the one entry point the driver and the tests use to read a .rnn
// file: load it and its imports, parse, and run Sema. Owns everything that the
// results point into.
#pragma once

#include "frontend/Loader.h"
#include "frontend/Sema.h"
#include "support/Diagnostics.h"

#include <memory>
#include <string>
#include <vector>

namespace rnnc {

struct FrontendResult {
  SourceManager sm;
  std::unique_ptr<DiagnosticEngine> diags;
  Program program;
  SemaResult sema;
  bool loaded = false;
  bool ok() const { return loaded && !diags->hasErrors(); }
};

struct FrontendOptions {
  std::vector<DimOverride> dims; // -D NAME=VALUE
  bool color = false;
  bool capture = false; // keep diagnostics in memory (tests)
};

/// Reads `path` (or, when `text` is given, that text under the name `path`).
/// Errors past the error limit stop the work early; the result says so.
std::unique_ptr<FrontendResult> runFrontend(const std::string &path, const FrontendOptions &options,
                                            const std::string *text = nullptr);

} // namespace rnnc
