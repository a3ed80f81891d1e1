// Diagnostics: every message rnnc shows a user goes through here, printed clang
// style (`file:line:col: error: message`, the source line, a caret with `~` under
// the range, then `note:` lines). User errors and compiler bugs are different
// things: `error()` is for the user's mistakes, RNNC_ASSERT (Crash.h) for ours.
#pragma once

#include "support/SourceManager.h"

#include <cstdio>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace rnnc {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  SourceRange range; // may be invalid: a message with no place in a file
  std::string message;
  std::vector<std::pair<SourceRange, std::string>> notes;
};

/// Thrown when the error limit is reached; the driver catches it and stops.
struct TooManyErrors {};

class DiagnosticEngine {
public:
  /// After this many errors, one more line is printed and processing stops.
  static constexpr unsigned kDefaultErrorLimit = 20;

  explicit DiagnosticEngine(const SourceManager &sm, std::FILE *out = stderr);

  /// Reports `d`. The same message at the same place is reported once, so a
  /// cell instantiated twice does not repeat its errors.
  void report(Diagnostic d);

  void error(SourceRange r, std::string msg, std::vector<std::pair<SourceRange, std::string>> notes = {}) {
    report({Severity::Error, r, std::move(msg), std::move(notes)});
  }
  void warning(SourceRange r, std::string msg, std::vector<std::pair<SourceRange, std::string>> notes = {}) {
    report({Severity::Warning, r, std::move(msg), std::move(notes)});
  }

  const SourceManager &sourceManager() const { return sm_; }
  unsigned errorCount() const { return errors_; }
  unsigned warningCount() const { return warnings_; }
  bool hasErrors() const { return errors_ != 0; }

  void setErrorLimit(unsigned n) { errorLimit_ = n; }
  void setColor(bool on) { color_ = on; }
  /// Keeps messages in memory instead of printing them (unit tests).
  void setCapture(bool on) { capture_ = on; }
  const std::vector<Diagnostic> &captured() const { return captured_; }

private:
  void print(Severity sev, SourceRange r, const std::string &msg);
  void printSnippet(SourceRange r);

  const SourceManager &sm_;
  std::FILE *out_;
  unsigned errors_ = 0, warnings_ = 0;
  unsigned errorLimit_ = kDefaultErrorLimit;
  bool color_ = false;
  bool capture_ = false;
  std::vector<Diagnostic> captured_;
  std::set<std::tuple<int, uint32_t, uint32_t, std::string>> seen_;
};

/// Most candidates a "did you mean" search looks at; past that it offers none,
/// so that the cost of an error does not grow with the size of a scope.
constexpr size_t kMaxSuggestionCandidates = 4096;

/// The closest of `candidates` to `name` by edit distance, if it is close enough
/// to be worth a "did you mean" (about a third of the name's letters wrong).
std::string closestName(const std::string &name, const std::vector<std::string> &candidates);

/// Formats a byte for a message: printable ASCII as itself, others as \xNN.
std::string describeByte(unsigned char c);

} // namespace rnnc
