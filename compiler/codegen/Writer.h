// The indenting writer rnnc's host and scan printers print through: a line at
// a time, blocks opened and closed. The writer keeps the indentation (two
// spaces a level, as rnnc's code reads before clang-format), not the caller.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

namespace rnnc::codegen {

class Writer {
public:
  explicit Writer(int depth = 0) : depth_(depth) {}

  /// One line at the current depth, fmt-style; an empty line has no indentation.
  template <typename... Args> Writer &line(fmt::format_string<Args...> f, Args &&...args) {
    return put(fmt::format(f, std::forward<Args>(args)...));
  }
  Writer &blank() {
    text_ += '\n';
    return *this;
  }
  /// A line that opens a block ("for (...) {"); what follows is one level deeper.
  template <typename... Args> Writer &open(fmt::format_string<Args...> f, Args &&...args) {
    put(fmt::format(f, std::forward<Args>(args)...));
    ++depth_;
    return *this;
  }
  /// Back one level, then the line that closes the block ("}" unless told).
  template <typename... Args> Writer &close(fmt::format_string<Args...> f, Args &&...args) {
    --depth_;
    return put(fmt::format(f, std::forward<Args>(args)...));
  }
  Writer &close() { return close("}}"); }
  /// One level deeper (or back) without a line: a statement under an `if`.
  Writer &indent() {
    ++depth_;
    return *this;
  }
  Writer &dedent() {
    --depth_;
    return *this;
  }
  /// Text another printer made, lines and indentation its own, as it is.
  Writer &raw(const std::string &text) {
    text_ += text;
    return *this;
  }

  /// The current indentation, for a printer hook that takes it as a string.
  std::string pad() const { return std::string(static_cast<size_t>(2 * depth_), ' '); }
  int depth() const { return depth_; }
  const std::string &str() const { return text_; }
  std::string take() { return std::move(text_); }

private:
  Writer &put(const std::string &s) {
    if (!s.empty()) text_.append(static_cast<size_t>(2 * depth_), ' ');
    text_ += s;
    text_ += '\n';
    return *this;
  }

  std::string text_;
  int depth_;
};

} // namespace rnnc::codegen
