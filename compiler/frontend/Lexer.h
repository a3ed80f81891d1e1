// Lexer: turns the bytes of one .rnn file into tokens, on demand. A newline is a
// token (it ends a statement) except inside ( ) or [ ]; `#` starts a comment to
// the end of the line; a bad byte is reported once and skipped.
#pragma once

#include "frontend/Token.h"
#include "support/Diagnostics.h"

#include <string_view>

namespace rnnc {

class Lexer {
public:
  Lexer(const SourceManager &sm, uint32_t file, DiagnosticEngine &diags);

  /// The next token; returns Eof forever at the end.
  Token next();

private:
  SourceLoc loc(size_t offset) const { return {file_, static_cast<uint32_t>(offset)}; }
  SourceRange range(size_t b, size_t e) const { return {loc(b), loc(e)}; }
  Token make(Tok kind, size_t begin);
  Token lexNumber(size_t begin);
  Token lexString(size_t begin);
  void skipInvalid(size_t begin);

  uint32_t file_;
  std::string_view text_;
  DiagnosticEngine &diags_;
  size_t pos_ = 0;
  int groupDepth_ = 0; // open ( and [: newlines inside them are not tokens
  bool lastWasNewline_ = true;
  bool skippedInvalid_ = false; // since the last token
};

} // namespace rnnc
