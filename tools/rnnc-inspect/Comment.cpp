// readComment(): the equations and the helper mark of the `//` block above a
// definition. It reads the file's text, not the AST, so a comment is found
// wherever clang would attach it or not.
#include "Comment.h"

#include <algorithm>
#include <regex>

namespace rnnc::inspect {

Comment readComment(const clang::SourceManager &sm, clang::SourceLocation at) {
  at = sm.getExpansionLoc(at);
  llvm::StringRef buffer = sm.getBufferData(sm.getFileID(at));
  unsigned offset = sm.getFileOffset(at);
  // The start of the definition's line, then each line above it in turn
  // (StringRef::rfind(c, from) looks before `from`).
  size_t lineStart = buffer.rfind('\n', offset);
  lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
  std::vector<llvm::StringRef> block;
  while (lineStart > 0) {
    size_t end = lineStart - 1; // the '\n' ending the line above
    size_t start = buffer.rfind('\n', end);
    start = start == llvm::StringRef::npos ? 0 : start + 1;
    llvm::StringRef line = buffer.slice(start, end).trim();
    if (!line.startswith("//")) break;
    block.push_back(line.drop_while([](char c) { return c == '/'; }));
    lineStart = start;
  }
  std::reverse(block.begin(), block.end());
  Comment comment;
  static const std::regex equation(R"(^\s+([\w./-]+\.rnn):(\d+)(\s|$))");
  for (llvm::StringRef line : block) {
    std::smatch m;
    std::string s = line.str();
    if (std::regex_search(s, m, equation)) comment.equations.push_back(m[1].str() + ":" + m[2].str());
  }
  comment.helper = !block.empty() && block.front().trim().startswith("rnnc helper:");
  return comment;
}

} // namespace rnnc::inspect
