// Graphviz for `rnnc show --html`: the graph's dot text drawn as SVG by the
// `dot` program, run without a shell and bounded in time and output.
#pragma once

#include <string>

namespace rnnc {

/// Runs Graphviz on `dotText` (the program in $RNNC_DOT, else `dot` on $PATH;
/// no shell, bounded in time and output) and returns the <svg> element alone.
/// False with a one-line `error` when Graphviz is missing or fails.
bool graphSvg(const std::string &dotText, std::string &svg, std::string &error);

} // namespace rnnc
