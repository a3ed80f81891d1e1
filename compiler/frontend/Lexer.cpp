#include "frontend/Lexer.h"

#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>
#include <string>

#include "frontend/Names.h"

namespace rnnc {

const char *tokenSpelling(Tok kind) {
  switch (kind) {
#define X(name, spelling)                                                                  \
  case Tok::name: return spelling;
    RNNC_TOKENS(X)
#undef X
  }
  return "token";
}

namespace {

bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

Tok keywordKind(std::string_view word) {
  if (word == "dim") return Tok::KwDim;
  if (word == "cell") return Tok::KwCell;
  if (word == "model") return Tok::KwModel;
  if (word == "param") return Tok::KwParam;
  if (word == "import") return Tok::KwImport;
  if (word == "index") return Tok::KwIndex;
  return Tok::Identifier;
}

} // namespace

Lexer::Lexer(const SourceManager &sm, uint32_t file, DiagnosticEngine &diags)
    : file_(file), text_(sm.text(file)), diags_(diags) {}

Token Lexer::make(Tok kind, size_t begin) {
  Token t;
  t.kind = kind;
  t.range = range(begin, pos_);
  t.text = text_.substr(begin, pos_ - begin);
  t.afterInvalid = skippedInvalid_;
  skippedInvalid_ = false;
  lastWasNewline_ = kind == Tok::Newline;
  return t;
}

// number ::= digit { digit } [ '.' digit { digit } ] [ ( 'e' | 'E' ) [ '+' | '-' ] digit { digit } ]
Token Lexer::lexNumber(size_t begin) {
  bool integer = true;
  while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '.') {
    integer = false;
    ++pos_;
    if (pos_ >= text_.size() || !isDigit(text_[pos_]))
      diags_.error(range(pos_ - 1, pos_), "expected a digit after '.' in a number");
    while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    size_t e = pos_;
    size_t p = pos_ + 1;
    if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
    if (p < text_.size() && isDigit(text_[p])) {
      integer = false;
      pos_ = p;
      while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
    } else {
      pos_ = p;
      diags_.error(range(e, pos_), "expected digits in the exponent of a number");
    }
  }
  if (pos_ < text_.size() && isIdentStart(text_[pos_])) {
    size_t s = pos_;
    while (pos_ < text_.size() && isIdentChar(text_[pos_])) ++pos_;
    std::string suffix(text_.substr(s, std::min<size_t>(pos_ - s, 32)));
    diags_.error(range(s, pos_), fmt::format("invalid suffix '{}' on a number", suffix));
  }
  Token t = make(Tok::Number, begin);
  t.isInteger = integer;
  std::string spelling(t.text.substr(0, std::min<size_t>(t.text.size(), 400)));
  t.value = std::strtod(spelling.c_str(), nullptr);
  if (!integer && !(t.value <= 1.7976931348623157e308))
    diags_.error(t.range, fmt::format("number {} is too large for a 64-bit float", quoted(spelling.substr(0, 40))));
  if (integer) {
    uint64_t v = 0;
    for (char c : t.text) {
      if (!isDigit(c)) break;
      unsigned d = static_cast<unsigned>(c - '0');
      if (v > (UINT64_MAX - d) / 10) {
        t.intOverflow = true;
        break;
      }
      v = v * 10 + d;
    }
    t.intValue = v;
  }
  return t;
}

// string ::= '"' { any byte but '"', '\', newline | '\' any byte } '"'
Token Lexer::lexString(size_t begin) {
  ++pos_; // opening quote
  while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
    if (text_[pos_] == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '\n') ++pos_;
    ++pos_;
  }
  if (pos_ >= text_.size() || text_[pos_] != '"') {
    diags_.error(range(begin, begin + 1), "unterminated string");
    Token t = make(Tok::String, begin);
    t.stringBody = text_.substr(begin + 1, pos_ - begin - 1);
    t.unterminated = true;
    return t;
  }
  ++pos_;
  Token t = make(Tok::String, begin);
  t.stringBody = text_.substr(begin + 1, pos_ - begin - 2);
  return t;
}

// Reports a run of bytes that cannot start a token as one error and skips it;
// the next token is marked, so the parser does not report a second error there.
void Lexer::skipInvalid(size_t begin) {
  unsigned char c = static_cast<unsigned char>(text_[begin]);
  std::string what;
  if (c >= 0x80) {
    what = "non-ASCII byte " + describeByte(c) + " (only comments may hold non-ASCII text)";
  } else {
    what = "invalid character '" + describeByte(c) + "'";
  }
  pos_ = begin + 1;
  auto startsToken = [](char ch) {
    return isIdentChar(ch) || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '#' ||
           std::string_view("()[]{},:=+-*/@\"").find(ch) != std::string_view::npos;
  };
  while (pos_ < text_.size() && !startsToken(text_[pos_])) ++pos_;
  diags_.error(range(begin, pos_), what);
  skippedInvalid_ = true;
}

Token Lexer::next() {
  for (;;) {
    if (pos_ >= text_.size()) {
      // A file that does not end in a newline still ends its last statement.
      if (!lastWasNewline_) {
        size_t b = pos_;
        return make(Tok::Newline, b);
      }
      return make(Tok::Eof, pos_);
    }
    size_t begin = pos_;
    char c = text_[pos_];
    switch (c) {
    case ' ': case '\t': case '\r': case '\f': case '\v':
      ++pos_;
      continue;
    case '#':
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      continue;
    case '\n':
      ++pos_;
      if (groupDepth_ > 0 || lastWasNewline_) continue;
      return make(Tok::Newline, begin);
    case '(': ++pos_; ++groupDepth_; return make(Tok::LParen, begin);
    case '[': ++pos_; ++groupDepth_; return make(Tok::LBracket, begin);
    case ')': ++pos_; if (groupDepth_ > 0) --groupDepth_; return make(Tok::RParen, begin);
    case ']': ++pos_; if (groupDepth_ > 0) --groupDepth_; return make(Tok::RBracket, begin);
    // Braces never appear inside ( ) or [ ]: seeing one means a group was left
    // open by mistake, so newlines count again from here (better recovery).
    case '{': ++pos_; groupDepth_ = 0; return make(Tok::LBrace, begin);
    case '}': ++pos_; groupDepth_ = 0; return make(Tok::RBrace, begin);
    case ',': ++pos_; return make(Tok::Comma, begin);
    case ':': ++pos_; return make(Tok::Colon, begin);
    case '=': ++pos_; return make(Tok::Equal, begin);
    case '+': ++pos_; return make(Tok::Plus, begin);
    case '*': ++pos_; return make(Tok::Star, begin);
    case '/': ++pos_; return make(Tok::Slash, begin);
    case '@': ++pos_; return make(Tok::At, begin);
    case '-':
      ++pos_;
      if (pos_ < text_.size() && text_[pos_] == '>') {
        ++pos_;
        return make(Tok::Arrow, begin);
      }
      return make(Tok::Minus, begin);
    case '"':
      return lexString(begin);
    default:
      break;
    }
    if (isDigit(c)) return lexNumber(begin);
    if (isIdentStart(c)) {
      while (pos_ < text_.size() && isIdentChar(text_[pos_])) ++pos_;
      return make(keywordKind(text_.substr(begin, pos_ - begin)), begin);
    }
    skipInvalid(begin);
  }
}

} // namespace rnnc
