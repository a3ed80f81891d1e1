// The graph as text: one node per line, `%id = op inputs : width`, delayed
// inputs as `%3[t-1]`, the user's name and file:line after `#`. Stable, so lit
// tests can match it with FileCheck.
#pragma once

#include "ir/Graph.h"

#include <string>

namespace rnnc {

std::string printGraph(const Graph &g, const SourceManager &sm);
/// `%3`, `%3[t-1]`, `%3[t+2]`.
std::string edgeText(Edge e);
/// `lstm.rnn:9` for the first location of a node (file name without its folders).
std::string locText(const SourceManager &sm, SourceRange r);

} // namespace rnnc
