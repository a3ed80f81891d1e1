// The graph as text: one node per line, `%id = op inputs : width`, delayed
// inputs as `%3[t-1]`, the user's name and file:line after `#`. Stable, so lit
// tests can match it with FileCheck, and complete, so ir/Reader.h reads it back
// (the grammar: docs/rnnc-opt.md).
#pragma once

#include "ir/Graph.h"

#include <string>

namespace rnnc {

std::string printGraph(const Graph &g, const SourceManager &sm);
/// `%3`, `%3[t-1]`, `%3[t+2]`.
std::string edgeText(Edge e);
/// `lstm.rnn:9` for the first location of a node (file name without its folders).
std::string locText(const SourceManager &sm, SourceRange r);
/// A file name as a node's note spells it: as it is when it holds only letters,
/// digits and `_.+-`, otherwise in double quotes with `"`, `\` and other bytes
/// escaped (`"my cell.rnn"`).
std::string noteFileName(const std::string &file);

} // namespace rnnc
