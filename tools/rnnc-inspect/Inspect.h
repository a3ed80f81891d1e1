// inspect(): one emitted source (a .cu, a CPU .cpp, or a --jit host .cpp with
// its kernel string) parsed by clang and read back into an Inspection. The
// facts come from the AST only, never from the bundle's manifest.
#pragma once

#include "Inspection.h"

#include <optional>
#include <string>

namespace rnnc::inspect {

struct Options {
  std::string language;       // "cuda" or "c++"
  std::string runtimeInclude; // where rnnc/cuda.h and friends are
};

/// Parses `path` and collects its kernels, launches, library calls and
/// problems. Nothing, with `error` set (clang's diagnostics already printed
/// to stderr), when the file cannot be read or does not parse.
std::optional<Inspection> inspect(const std::string &path, const Options &options, std::string &error);

} // namespace rnnc::inspect
