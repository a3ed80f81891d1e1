// The textual IR read back: what printGraph writes, or a graph written by hand
// (docs/rnnc-opt.md), becomes a Graph that the verifier accepts. The text is
// untrusted: every problem is a user error at its line and column, never a
// crash, and what it may ask for is bounded (ReadLimits in ReaderSyntax.h).
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <optional>

namespace rnnc {

/// Reads the graph in `file`, a buffer of `sm`. Node ids are kept as written
/// (ids a pass removed stay free); each file named by a note's `@lstm.rnn:9`
/// becomes a buffer of `sm` with that name and blank lines, so that the
/// locations print again as they were written and the schedule's comments
/// name the same lines; edges point at where they are written in `file`.
/// Null after reporting errors to `diags` (which may throw TooManyErrors).
std::optional<Graph> readGraph(SourceManager &sm, uint32_t file, DiagnosticEngine &diags);

} // namespace rnnc
