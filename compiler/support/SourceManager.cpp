#include "support/SourceManager.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace rnnc {

SourceRange SourceRange::cover(SourceRange a, SourceRange b) {
  if (!a.valid()) return b;
  if (!b.valid()) return a;
  SourceRange r = a;
  if (b.begin.offset < r.begin.offset) r.begin = b.begin;
  if (b.end.offset > r.end.offset) r.end = b.end;
  return r;
}

uint32_t SourceManager::addBuffer(std::string name, std::string text) {
  files_.push_back(File{std::move(name), std::move(text), {}});
  return static_cast<uint32_t>(files_.size() - 1);
}

std::optional<uint32_t> SourceManager::loadFile(const std::string &path, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error = errno == ENOENT ? "no such file" : std::strerror(errno);
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    error = "is a directory, not a .rnn file";
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    error = "is not a regular file";
    return std::nullopt;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
    error = "file is too large (" + std::to_string(st.st_size) + " bytes; the limit is " +
            std::to_string(kMaxFileBytes) + ")";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) {
    error = "read failed";
    return std::nullopt;
  }
  if (text.size() > kMaxFileBytes - 1) { // grew while reading
    error = "file is too large";
    return std::nullopt;
  }
  return addBuffer(path, std::move(text));
}

const std::vector<uint32_t> &SourceManager::lineStarts(uint32_t file) const {
  const File &f = files_[file];
  if (f.lineStarts.empty()) {
    f.lineStarts.push_back(0);
    for (uint32_t i = 0; i < f.text.size(); ++i)
      if (f.text[i] == '\n') f.lineStarts.push_back(i + 1);
  }
  return f.lineStarts;
}

LineCol SourceManager::lineCol(SourceLoc loc) const {
  const auto &starts = lineStarts(loc.file);
  auto it = std::upper_bound(starts.begin(), starts.end(), loc.offset);
  uint32_t line = static_cast<uint32_t>(it - starts.begin());
  return {line, loc.offset - starts[line - 1] + 1};
}

uint32_t SourceManager::lineStart(SourceLoc loc) const {
  const auto &starts = lineStarts(loc.file);
  auto it = std::upper_bound(starts.begin(), starts.end(), loc.offset);
  return *(it - 1);
}

std::string_view SourceManager::lineText(SourceLoc loc) const {
  std::string_view text = files_[loc.file].text;
  uint32_t start = lineStart(loc);
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  if (end > start && text[end - 1] == '\r') --end;
  return text.substr(start, end - start);
}

} // namespace rnnc
