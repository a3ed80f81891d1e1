// readComment(): the `//` block right above a definition, read by the rule of
// docs/inspect.md (a `FILE.rnn:LINE` line names an equation, a first line
// "rnnc helper:" marks a helper). Kernels and the launchers of library calls
// are read alike, and the rule ignores everything else, so formatting does not
// change what it finds.
#pragma once

#include <clang/Basic/SourceLocation.h>
#include <clang/Basic/SourceManager.h>

#include <string>
#include <vector>

namespace rnnc::inspect {

/// What the comment above a definition says.
struct Comment {
  std::vector<std::string> equations; // "lstm.rnn:9", in order, as written
  bool helper = false;                // the block's first line starts "rnnc helper:"
};

/// The comment above the definition that begins at `at`: the contiguous `//`
/// lines ending on the line before it (a blank line ends the block).
Comment readComment(const clang::SourceManager &sm, clang::SourceLocation at);

} // namespace rnnc::inspect
