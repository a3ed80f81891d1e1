// Tokens of the .rnn language. The kinds are listed once (RNNC_TOKENS) so the
// lexer, the parser's messages and the tests agree on their spelling.
#pragma once

#include "support/SourceManager.h"

#include <cstdint>
#include <string_view>

namespace rnnc {

#define RNNC_TOKENS(X)                                                                     \
  X(Eof, "end of file")                                                                    \
  X(Newline, "newline")                                                                    \
  X(Identifier, "name")                                                                    \
  X(Number, "number")                                                                      \
  X(String, "string")                                                                      \
  X(KwDim, "'dim'")                                                                        \
  X(KwCell, "'cell'")                                                                      \
  X(KwModel, "'model'")                                                                    \
  X(KwParam, "'param'")                                                                    \
  X(KwImport, "'import'")                                                                  \
  X(KwIndex, "'index'")                                                                    \
  X(LParen, "'('")                                                                         \
  X(RParen, "')'")                                                                         \
  X(LBracket, "'['")                                                                       \
  X(RBracket, "']'")                                                                       \
  X(LBrace, "'{'")                                                                         \
  X(RBrace, "'}'")                                                                         \
  X(Comma, "','")                                                                          \
  X(Colon, "':'")                                                                          \
  X(Equal, "'='")                                                                          \
  X(Plus, "'+'")                                                                           \
  X(Minus, "'-'")                                                                          \
  X(Star, "'*'")                                                                           \
  X(Slash, "'/'")                                                                          \
  X(At, "'@'")                                                                             \
  X(Arrow, "'->'")

enum class Tok : uint8_t {
#define X(name, spelling) name,
  RNNC_TOKENS(X)
#undef X
};

/// How a token kind is named in messages ("'('", "name", "newline").
const char *tokenSpelling(Tok kind);

struct Token {
  Tok kind = Tok::Eof;
  SourceRange range;
  std::string_view text; // the bytes of the token in the source buffer
  // For Number: whether it is an integer literal, and its value.
  bool isInteger = false;
  bool intOverflow = false; // an integer literal too large for 64 bits
  uint64_t intValue = 0;
  double value = 0;
  // For String: the text between the quotes, and whether the closing quote is missing.
  std::string_view stringBody;
  bool unterminated = false;
  // Bytes the lexer reported as invalid and skipped came just before this
  // token: a syntax error here is a consequence, not worth a second message.
  bool afterInvalid = false;
};

} // namespace rnnc
