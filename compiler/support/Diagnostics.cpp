#include "support/Diagnostics.h"

#include <algorithm>
#include <fmt/format.h>

namespace rnnc {

namespace {

constexpr size_t kMaxSnippetColumns = 160; // longer lines are shown as a window

const char *severityName(Severity s) {
  switch (s) {
  case Severity::Error: return "error";
  case Severity::Warning: return "warning";
  case Severity::Note: return "note";
  }
  return "error";
}

const char *severityColor(Severity s) {
  switch (s) {
  case Severity::Error: return "\x1b[1;31m";
  case Severity::Warning: return "\x1b[1;35m";
  case Severity::Note: return "\x1b[1;30m";
  }
  return "";
}

/// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one.
size_t utf8Length(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (c >= 0xF5) n = 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

} // namespace

std::string describeByte(unsigned char c) {
  if (c >= 0x21 && c < 0x7F) return std::string(1, static_cast<char>(c));
  return fmt::format("\\x{:02X}", c);
}

DiagnosticEngine::DiagnosticEngine(const SourceManager &sm, std::FILE *out) : sm_(sm), out_(out) {}

void DiagnosticEngine::report(Diagnostic d) {
  auto key = std::make_tuple(static_cast<int>(d.severity), d.range.begin.file, d.range.begin.offset, d.message);
  if (!seen_.insert(key).second) return;
  if (d.severity == Severity::Error) ++errors_;
  if (d.severity == Severity::Warning) ++warnings_;
  if (capture_) {
    captured_.push_back(d);
  } else {
    print(d.severity, d.range, d.message);
    for (auto &[range, msg] : d.notes) print(Severity::Note, range, msg);
  }
  if (d.severity == Severity::Error && errors_ >= errorLimit_) {
    if (!capture_)
      print(Severity::Error, SourceRange(),
            fmt::format("too many errors emitted ({}), stopping now", errors_));
    throw TooManyErrors{};
  }
}

void DiagnosticEngine::print(Severity sev, SourceRange r, const std::string &msg) {
  std::string head;
  if (r.valid()) {
    LineCol lc = sm_.lineCol(r.begin);
    head = fmt::format("{}:{}:{}: ", sm_.name(r.begin.file), lc.line, lc.col);
  } else {
    head = "rnnc: ";
  }
  if (color_)
    fmt::print(out_, "\x1b[1m{}{}{}:\x1b[0m\x1b[1m {}\x1b[0m\n", head, severityColor(sev), severityName(sev), msg);
  else
    fmt::print(out_, "{}{}: {}\n", head, severityName(sev), msg);
  if (r.valid()) printSnippet(r);
}

// Prints the source line and a caret line under it. Tabs are kept so columns
// line up; control bytes and invalid UTF-8 print as \xNN and the caret line is
// padded to match; a long line is cut to a window around the caret.
void DiagnosticEngine::printSnippet(SourceRange r) {
  std::string_view line = sm_.lineText(r.begin);
  uint32_t start = sm_.lineStart(r.begin);
  size_t caret = r.begin.offset - start;
  size_t rangeEnd = r.end.file == r.begin.file && r.end.offset > r.begin.offset
                        ? std::min<size_t>(r.end.offset - start, line.size())
                        : caret + 1;
  if (caret > line.size()) caret = line.size();

  size_t from = 0, to = line.size();
  if (line.size() > kMaxSnippetColumns) {
    from = caret > kMaxSnippetColumns / 2 ? caret - kMaxSnippetColumns / 2 : 0;
    to = std::min(line.size(), from + kMaxSnippetColumns);
    // Do not start or end inside a UTF-8 sequence.
    while (from > 0 && (static_cast<unsigned char>(line[from]) & 0xC0) == 0x80) --from;
    while (to < line.size() && (static_cast<unsigned char>(line[to]) & 0xC0) == 0x80) ++to;
  }
  rangeEnd = std::min(rangeEnd, to);

  std::string text, marks;
  if (from > 0) {
    text += "...";
    marks += "   ";
  }
  for (size_t i = from; i < to;) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    std::string shown;
    size_t n = 1;
    if (c == '\t') {
      shown = "\t";
    } else if (c >= 0x20 && c < 0x7F) {
      shown = std::string(1, static_cast<char>(c));
    } else if (c >= 0x80 && (n = utf8Length(line, i)) != 0) {
      shown = std::string(line.substr(i, n));
    } else {
      n = 1;
      shown = fmt::format("\\x{:02X}", c);
    }
    size_t width = c >= 0x80 && shown.size() == n && n > 1 ? 1 : shown.size();
    char mark = i == caret ? '^' : (i > caret && i < rangeEnd) ? '~' : ' ';
    if (c == '\t' && mark == ' ') marks += '\t';
    else marks += std::string(1, mark) + std::string(width - 1, mark == '^' ? '~' : mark);
    text += shown;
    i += n;
  }
  if (to < line.size()) text += "...";
  if (caret >= to) marks += '^';
  while (!marks.empty() && (marks.back() == ' ' || marks.back() == '\t')) marks.pop_back();
  fmt::print(out_, "{}\n", text);
  if (color_) fmt::print(out_, "\x1b[1;32m{}\x1b[0m\n", marks);
  else fmt::print(out_, "{}\n", marks);
}

std::string closestName(const std::string &name, const std::vector<std::string> &candidates) {
  auto distance = [](const std::string &a, const std::string &b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  if (name.size() < 2 || name.size() > 64 || candidates.size() > kMaxSuggestionCandidates) return {};
  std::string best;
  size_t bestDistance = (name.size() + 2) / 3 + 1; // accept at most a third of the letters wrong
  for (const auto &c : candidates) {
    if (c == name || c.size() > 64) continue;
    size_t d = distance(name, c);
    if (d < bestDistance) {
      bestDistance = d;
      best = c;
    }
  }
  return best;
}

} // namespace rnnc
