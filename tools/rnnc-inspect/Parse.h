// parse(): clang run on one piece of emitted code (a .cu as CUDA host code, a
// .cpp as C++17 with OpenMP, a --jit kernel string as NVRTC sees it), with the
// embedded stand-in headers as virtual files. What its AST holds comes back
// from collect() (Collect.h); any clang error means the code does not parse.
#pragma once

#include "Collect.h"
#include "Inspect.h"

#include <optional>
#include <string>

namespace rnnc::inspect {

/// Parses `code`, named `path`, as `language` ("cuda", "c++", or "nvrtc": a
/// kernel string) and collects it, lines shifted by `lineOffset`. Nothing, with
/// `error` set, when clang cannot be run or reports an error.
std::optional<Parsed> parse(const std::string &code, const std::string &path, const std::string &language,
                            unsigned lineOffset, const Options &options, std::string &error);

} // namespace rnnc::inspect
