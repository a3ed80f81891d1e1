// SourceManager: owns the text of every file rnnc reads and maps byte offsets to
// line and column. Locations are (file, offset) pairs, cheap to copy and to store
// on every AST and graph node; line/column are computed on demand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rnnc {

/// A position in a loaded file: the file's id and a byte offset into its text.
struct SourceLoc {
  uint32_t file = UINT32_MAX;
  uint32_t offset = 0;

  bool valid() const { return file != UINT32_MAX; }
  friend bool operator==(SourceLoc a, SourceLoc b) {
    return a.file == b.file && a.offset == b.offset;
  }
  friend bool operator!=(SourceLoc a, SourceLoc b) { return !(a == b); }
};

/// A half-open byte range [begin, end) within one file.
struct SourceRange {
  SourceLoc begin;
  SourceLoc end;

  SourceRange() = default;
  SourceRange(SourceLoc b) : begin(b), end(b) {}
  SourceRange(SourceLoc b, SourceLoc e) : begin(b), end(e) {}
  bool valid() const { return begin.valid(); }
  friend bool operator==(SourceRange a, SourceRange b) { return a.begin == b.begin && a.end == b.end; }
  friend bool operator!=(SourceRange a, SourceRange b) { return !(a == b); }
  /// The smallest range covering both (they must be in one file).
  static SourceRange cover(SourceRange a, SourceRange b);
};

/// 1-based line and byte column.
struct LineCol {
  uint32_t line = 0;
  uint32_t col = 0;
};

class SourceManager {
public:
  /// Largest file rnnc reads; a bigger one is refused before it is read.
  static constexpr uint64_t kMaxFileBytes = 64ull << 20;

  /// Adds a file whose text is already in memory (tests, stdin). Returns its id.
  uint32_t addBuffer(std::string name, std::string text);

  /// Reads a file from disk. On failure returns nullopt and sets `error` to a
  /// one-line reason ("no such file", "is a directory", ...).
  std::optional<uint32_t> loadFile(const std::string &path, std::string &error);

  const std::string &name(uint32_t file) const { return files_[file].name; }
  std::string_view text(uint32_t file) const { return files_[file].text; }
  size_t fileCount() const { return files_.size(); }

  LineCol lineCol(SourceLoc loc) const;
  /// The text of the line holding `loc`, without its line terminator.
  std::string_view lineText(SourceLoc loc) const;
  /// Byte offset of the start of the line holding `loc`.
  uint32_t lineStart(SourceLoc loc) const;

private:
  struct File {
    std::string name;
    std::string text;
    mutable std::vector<uint32_t> lineStarts; // built on first query
  };
  const std::vector<uint32_t> &lineStarts(uint32_t file) const;

  std::vector<File> files_;
};

} // namespace rnnc
