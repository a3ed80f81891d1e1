// assemble(): what the parses found, put together into an Inspection: each
// launch tied to its kernel by name, the library calls kept with the equations
// of their enclosing function, and the problems named (docs/inspect.md,
// "Problems"). It sees only the collected facts, never the AST.
#pragma once

#include "Collect.h"
#include "Inspection.h"

#include <string>
#include <vector>

namespace rnnc::inspect {

/// The Inspection of `path`: `kernels` (the host part's, then a kernel
/// string's), `sites` (the calls of both), `kernelString` the variable of a
/// --jit kernel string or "". Problems are sorted by line.
Inspection assemble(const std::string &path, const std::string &language, const std::vector<Site> &sites,
                    std::vector<Kernel> kernels, const std::string &kernelString);

} // namespace rnnc::inspect
