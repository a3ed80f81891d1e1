// Parser: recursive descent over the grammar in grammar/rnn.ebnf, one function
// per rule, each quoting its rule. On an error it reports once, skips to the end
// of the statement (or declaration) and goes on, so one run shows several errors.
#pragma once

#include "frontend/AST.h"
#include "frontend/Lexer.h"

#include <deque>

namespace rnnc {

class Parser {
public:
  /// Deepest nesting of parentheses, unary minus and calls the parser follows.
  static constexpr unsigned kMaxNesting = 256;
  /// Tallest expression tree it builds (a long `a + b + c + ...` chain).
  static constexpr unsigned kMaxExprDepth = 4096;
  /// Largest |k| in `v[t-k]`.
  static constexpr int64_t kMaxTimeOffset = 65536;

  Parser(const SourceManager &sm, uint32_t file, DiagnosticEngine &diags);

  Module parseFile();

  /// Parses a single expression (tests).
  ExprPtr parseExpressionOnly();

private:
  struct SyntaxError {}; // unwinds to the statement being parsed

  const Token &peek(size_t k = 0);
  Token consume();
  bool at(Tok kind) { return peek().kind == kind; }
  bool accept(Tok kind);
  Token expect(Tok kind, const char *context);
  [[noreturn]] void fail(SourceRange r, std::string message);
  [[noreturn]] void failExpected(const char *what, const char *context);
  void skipNewlines();
  void skipToEndOfStatement();
  void skipToEndOfDecl();
  void expectEndOfStatement(const char *what);
  Ident identFrom(const Token &t);

  DeclPtr parseToplevel();
  DeclPtr parseImport();
  DeclPtr parseDimDecl();
  DeclPtr parseCell();
  Port parsePort();
  void parseBody(CellDecl &cell);
  StmtPtr parseStatement();
  StmtPtr parseParamDecl();
  StmtPtr parseAssignment();

  ExprPtr parseExpr();
  ExprPtr parseTerm();
  ExprPtr parseUnary();
  ExprPtr parsePostfix();
  ExprPtr parsePrimary();
  ExprPtr parseCall(const Token &callee);
  ExprPtr makeBinary(char op, const Token &opTok, ExprPtr lhs, ExprPtr rhs);
  int64_t parseTimeIndex(SourceRange &range);

  const SourceManager &sm_;
  uint32_t file_;
  DiagnosticEngine &diags_;
  Lexer lexer_;
  std::deque<Token> lookahead_;
  SourceLoc lastEnd_;
  unsigned nesting_ = 0;
};

} // namespace rnnc
