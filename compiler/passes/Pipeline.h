// The pipeline: the one ordered list of passes between the lowered graph and
// code generation (Pipeline.cpp, a line per pass with its reason).
#pragma once

#include "passes/Compilation.h"

#include <functional>
#include <string>
#include <vector>

namespace rnnc {

/// Called after each pass with its name and whether it changed the graph.
using PassObserver = std::function<void(const std::string &pass, const Compilation &c, bool changed)>;

/// The names `rnnc show --after` accepts, in pipeline order ("lower" first).
const std::vector<std::string> &passNames();

/// Runs the passes on c.graph (c.optimize false: the -O0 subset). Returns false
/// after reporting a user error.
bool runPipeline(Compilation &c, DiagnosticEngine &diags, const PassObserver &observe = {});

} // namespace rnnc
