#include "frontend/Parser.h"

#include "support/Crash.h"
#include "frontend/Names.h"

#include <fmt/format.h>

namespace rnnc {

Parser::Parser(const SourceManager &sm, uint32_t file, DiagnosticEngine &diags)
    : sm_(sm), file_(file), diags_(diags), lexer_(sm, file, diags) {
  lastEnd_ = {file, 0};
}

// ----- token plumbing -----

const Token &Parser::peek(size_t k) {
  while (lookahead_.size() <= k) lookahead_.push_back(lexer_.next());
  return lookahead_[k];
}

Token Parser::consume() {
  Token t = peek();
  if (t.kind != Tok::Eof) {
    lookahead_.pop_front();
    lastEnd_ = t.range.end;
  }
  return t;
}

bool Parser::accept(Tok kind) {
  if (!at(kind)) return false;
  consume();
  return true;
}

void Parser::fail(SourceRange r, std::string message) {
  diags_.error(r, std::move(message));
  throw SyntaxError{};
}

void Parser::failExpected(const char *what, const char *context) {
  const Token &t = peek();
  if (t.afterInvalid) throw SyntaxError{}; // the lexer reported the cause
  std::string found;
  if (t.kind == Tok::Identifier || t.kind == Tok::Number)
    found = fmt::format("{} {}", tokenSpelling(t.kind), quoted(t.text));
  else if (t.kind == Tok::Newline && t.range.begin.offset == sm_.text(file_).size())
    found = tokenSpelling(Tok::Eof); // the newline the lexer adds at the end of a file
  else
    found = tokenSpelling(t.kind);
  // Point at the token found, or just past the previous one for a newline/eof.
  SourceRange r = t.kind == Tok::Newline || t.kind == Tok::Eof ? SourceRange(lastEnd_) : t.range;
  fail(r, fmt::format("expected {} {}, found {}", what, context, found));
}

Token Parser::expect(Tok kind, const char *context) {
  if (!at(kind)) failExpected(tokenSpelling(kind), context);
  return consume();
}

void Parser::skipNewlines() {
  while (at(Tok::Newline)) consume();
}

void Parser::skipToEndOfStatement() {
  while (!at(Tok::Eof) && !at(Tok::RBrace)) {
    if (consume().kind == Tok::Newline) return;
  }
}

// After a bad declaration header: skip to the next line that starts a declaration.
void Parser::skipToEndOfDecl() {
  while (!at(Tok::Eof)) {
    Tok k = consume().kind;
    if (k == Tok::Newline) {
      Tok n = peek().kind;
      if (n == Tok::KwCell || n == Tok::KwModel || n == Tok::KwDim || n == Tok::KwImport) return;
    }
  }
}

void Parser::expectEndOfStatement(const char *what) {
  if (at(Tok::RBrace) || at(Tok::Eof)) return;
  if (!at(Tok::Newline)) {
    const Token &t = peek();
    if (t.afterInvalid) throw SyntaxError{}; // the lexer reported the cause
    fail(t.range, fmt::format("expected a newline after {}, found {}", what,
                              t.kind == Tok::Identifier || t.kind == Tok::Number ? quoted(t.text)
                                                                                  : std::string(tokenSpelling(t.kind))));
  }
  consume();
}

Ident Parser::identFrom(const Token &t) { return Ident{std::string(t.text), t.range}; }

// ----- files -----

/// file = { NEWLINE } , { toplevel , { NEWLINE } } ;
Module Parser::parseFile() {
  Module m;
  m.file = file_;
  skipNewlines();
  while (!at(Tok::Eof)) {
    try {
      if (DeclPtr d = parseToplevel()) m.decls.push_back(std::move(d));
    } catch (SyntaxError &) {
      skipToEndOfDecl();
    }
    skipNewlines();
  }
  return m;
}

/// toplevel = import | dim_decl | cell | model ;
DeclPtr Parser::parseToplevel() {
  switch (peek().kind) {
  case Tok::KwImport: return parseImport();
  case Tok::KwDim: return parseDimDecl();
  case Tok::KwCell:
  case Tok::KwModel: return parseCell();
  case Tok::KwParam:
    fail(peek().range, "'param' declarations belong inside a cell or model");
  case Tok::Identifier:
    if (peek(1).kind == Tok::Equal || peek(1).kind == Tok::Comma)
      fail(peek().range, "statements belong inside a cell or model; at the top level a file holds "
                         "'import', 'dim', 'cell' and 'model'");
    [[fallthrough]];
  default:
    failExpected("'import', 'dim', 'cell' or 'model'", "at the top level");
  }
}

/// import = "import" , string , NEWLINE ;
DeclPtr Parser::parseImport() {
  Token kw = consume();
  Token path = expect(Tok::String, "after 'import'");
  auto d = std::make_unique<ImportDecl>(SourceRange::cover(kw.range, path.range));
  d->pathRange = path.range;
  d->pathInError = path.unterminated;
  // Resolve the two escapes a path may need.
  std::string s;
  for (size_t i = 0; i < path.stringBody.size(); ++i) {
    char c = path.stringBody[i];
    if (c == '\\' && i + 1 < path.stringBody.size()) c = path.stringBody[++i];
    s += c;
  }
  d->path = std::move(s);
  expectEndOfStatement("the import");
  return d;
}

/// dim_decl = "dim" , name , "=" , size , NEWLINE ;
DeclPtr Parser::parseDimDecl() {
  Token kw = consume();
  Token name = expect(Tok::Identifier, "after 'dim'");
  expect(Tok::Equal, "after the dim's name");
  ExprPtr value = parseExpr();
  auto d = std::make_unique<DimDecl>(SourceRange::cover(kw.range, value->range));
  d->name = identFrom(name);
  d->value = std::move(value);
  expectEndOfStatement("the dim declaration");
  return d;
}

// ----- cells and models -----

/// cell  = "cell" , name , "(" , [ ports ] , ")" , "->" , outputs , { NEWLINE } , body ;
/// model = "model" , name , "(" , [ ports ] , ")" , "->" , outputs , { NEWLINE } , body ;
/// ports = port , { "," , port } ;
/// outputs = name , { "," , name } ;
DeclPtr Parser::parseCell() {
  Token kw = consume();
  bool isModel = kw.kind == Tok::KwModel;
  const char *what = isModel ? "model" : "cell";
  Token name = expect(Tok::Identifier, isModel ? "after 'model'" : "after 'cell'");
  auto cell = std::make_unique<CellDecl>(SourceRange::cover(kw.range, name.range));
  cell->isModel = isModel;
  cell->name = identFrom(name);
  expect(Tok::LParen, fmt::format("after the {}'s name", what).c_str());
  if (!at(Tok::RParen)) {
    do {
      cell->ports.push_back(parsePort());
    } while (accept(Tok::Comma));
  }
  expect(Tok::RParen, fmt::format("to close the {}'s inputs", what).c_str());
  expect(Tok::Arrow, fmt::format("after the {}'s inputs", what).c_str());
  do {
    cell->outputs.push_back(identFrom(expect(Tok::Identifier, "in the list of outputs")));
  } while (accept(Tok::Comma));
  skipNewlines();
  if (!at(Tok::LBrace)) failExpected("'{'", fmt::format("to begin the {}'s body", what).c_str());
  parseBody(*cell);
  return cell;
}

/// port = name , ":" , port_type ;
/// port_type = "[" , size , "]" | "index" , "[" , size , "]" ;
Port Parser::parsePort() {
  Port p;
  p.name = identFrom(expect(Tok::Identifier, "for an input's name"));
  expect(Tok::Colon, "after the input's name");
  SourceLoc typeBegin = peek().range.begin;
  p.isIndex = accept(Tok::KwIndex);
  expect(Tok::LBracket, p.isIndex ? "after 'index'" : "to begin the input's width");
  p.size = parseExpr();
  if (at(Tok::Comma))
    fail(peek().range, "an input is a vector: its type has one size, like [I] or index[V]");
  expect(Tok::RBracket, "to close the input's width");
  p.typeRange = {typeBegin, lastEnd_};
  return p;
}

/// body = "{" , { NEWLINE } , { statement , ( NEWLINE | &"}" ) , { NEWLINE } } , "}" , NEWLINE ;
void Parser::parseBody(CellDecl &cell) {
  Token open = consume(); // '{'
  skipNewlines();
  while (!at(Tok::RBrace)) {
    Tok k = peek().kind;
    if (k == Tok::Eof || k == Tok::KwCell || k == Tok::KwModel || k == Tok::KwImport) {
      SourceRange r = k == Tok::Eof ? SourceRange(lastEnd_) : peek().range;
      diags_.error(r, fmt::format("expected '}}' to end {} {}", cell.keyword(), quoted(cell.name.name)),
                   {{open.range, "the body began here"}});
      return; // the declaration that follows is parsed as usual
    }
    try {
      if (StmtPtr s = parseStatement()) cell.body.push_back(std::move(s));
    } catch (SyntaxError &) {
      skipToEndOfStatement();
    }
    skipNewlines();
  }
  Token close = consume();
  cell.range = SourceRange::cover(cell.range, close.range);
  expectEndOfStatement(fmt::format("the {}'s closing '}}'", cell.keyword()).c_str());
}

/// statement = param_decl | assignment ;
StmtPtr Parser::parseStatement() {
  switch (peek().kind) {
  case Tok::KwParam: return parseParamDecl();
  case Tok::Identifier: return parseAssignment();
  case Tok::KwDim:
    fail(peek().range, "'dim' declarations are only allowed at the top level of a file");
  default:
    failExpected("a statement ('param' or an assignment)", "in the body");
  }
}

/// param_decl = "param" , name , { "," , name } , ":" , shape ;
/// shape = "[" , size , [ "," , size ] , "]" ;
StmtPtr Parser::parseParamDecl() {
  Token kw = consume();
  auto p = std::make_unique<ParamDecl>(kw.range);
  do {
    p->names.push_back(identFrom(expect(Tok::Identifier, "for a param's name")));
  } while (accept(Tok::Comma));
  // From here on, a declaration in error still declares its names (with no
  // shape), so that their uses do not report again.
  try {
    expect(Tok::Colon, "after the param's name");
    Token open = expect(Tok::LBracket, "to begin the param's shape");
    p->shape.push_back(parseExpr());
    while (accept(Tok::Comma)) p->shape.push_back(parseExpr());
    expect(Tok::RBracket, "to close the param's shape");
    p->shapeRange = {open.range.begin, lastEnd_};
    if (p->shape.size() > 2)
      fail(p->shapeRange, fmt::format("a param is a vector [n] or a matrix [rows, cols]; this shape has {} sizes",
                                      p->shape.size()));
    p->range = SourceRange::cover(kw.range, p->shapeRange);
    expectEndOfStatement("the param declaration");
  } catch (SyntaxError &) {
    p->shape.clear();
    skipToEndOfStatement();
  }
  return p;
}

/// assignment = name , { "," , name } , "=" , expr ;
StmtPtr Parser::parseAssignment() {
  auto a = std::make_unique<AssignStmt>(peek().range);
  a->targets.push_back(identFrom(consume()));
  // From here on, a statement in error still defines its names (with a value in
  // error), so that their uses, and the outputs, do not report again.
  try {
    while (accept(Tok::Comma))
      a->targets.push_back(identFrom(expect(Tok::Identifier, "in the list of names being assigned")));
    if (at(Tok::LBracket))
      fail(peek().range, fmt::format("cannot assign to a time offset of {}: define {} for the current step",
                                     quoted(a->targets.back().name), quoted(a->targets.back().name)));
    expect(Tok::Equal, "after the names being assigned");
    a->value = parseExpr();
    a->range = SourceRange::cover(a->range, a->value->range);
    expectEndOfStatement("the assignment");
  } catch (SyntaxError &) {
    a->value = std::make_unique<ErrorExpr>(a->range);
    skipToEndOfStatement();
  }
  return a;
}

// ----- expressions -----

ExprPtr Parser::makeBinary(char op, const Token &opTok, ExprPtr lhs, ExprPtr rhs) {
  auto b = std::make_unique<BinaryExpr>(SourceRange::cover(lhs->range, rhs->range), op);
  b->opRange = opTok.range;
  b->depth = std::max(lhs->depth, rhs->depth) + 1;
  if (b->depth > kMaxExprDepth)
    fail(opTok.range, fmt::format("expression is too large: its tree is more than {} levels deep (give parts of "
                                  "a long sum names of their own)", kMaxExprDepth));
  b->lhs = std::move(lhs);
  b->rhs = std::move(rhs);
  return b;
}

/// expr = term , { ( "+" | "-" ) , term } ;
ExprPtr Parser::parseExpr() {
  ExprPtr lhs = parseTerm();
  while (at(Tok::Plus) || at(Tok::Minus)) {
    Token op = consume();
    lhs = makeBinary(op.kind == Tok::Plus ? '+' : '-', op, std::move(lhs), parseTerm());
  }
  return lhs;
}

/// term = unary , { ( "*" | "/" | "@" ) , unary } ;
ExprPtr Parser::parseTerm() {
  ExprPtr lhs = parseUnary();
  while (at(Tok::Star) || at(Tok::Slash) || at(Tok::At)) {
    Token op = consume();
    char c = op.kind == Tok::Star ? '*' : op.kind == Tok::Slash ? '/' : '@';
    lhs = makeBinary(c, op, std::move(lhs), parseUnary());
  }
  return lhs;
}

namespace {
/// Counts one level of recursion and refuses to go past the limit.
struct NestingGuard {
  unsigned &n;
  NestingGuard(unsigned &count) : n(count) { ++n; }
  ~NestingGuard() { --n; }
};
} // namespace

/// unary = "-" , unary | postfix ;
ExprPtr Parser::parseUnary() {
  if (!at(Tok::Minus)) return parsePostfix();
  Token op = consume();
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting)
    fail(op.range, fmt::format("expression is too deeply nested (more than {} levels)", kMaxNesting));
  ExprPtr operand = parseUnary();
  auto u = std::make_unique<UnaryExpr>(SourceRange::cover(op.range, operand->range));
  u->depth = operand->depth + 1;
  if (u->depth > kMaxExprDepth)
    fail(op.range, fmt::format("expression is too deeply nested (more than {} levels)", kMaxExprDepth));
  u->operand = std::move(operand);
  return u;
}

/// postfix = name , [ time_index ] | primary ;
ExprPtr Parser::parsePostfix() {
  if (at(Tok::Identifier) && peek(1).kind != Tok::LParen) {
    Token name = consume();
    auto n = std::make_unique<NameExpr>(name.range);
    n->name = std::string(name.text);
    n->nameRange = name.range;
    if (at(Tok::LBracket)) {
      n->timeOffset = parseTimeIndex(n->offsetRange);
      n->range = SourceRange::cover(name.range, n->offsetRange);
    }
    return n;
  }
  ExprPtr e = parsePrimary();
  if (at(Tok::LBracket))
    fail(peek().range, "a time offset applies to a name only: give the expression a name and read "
                       "that name with the offset");
  return e;
}

/// time_index = "[" , "t" , ( "-" | "+" ) , integer , "]" ;
int64_t Parser::parseTimeIndex(SourceRange &range) {
  Token open = consume();
  const Token &t = peek();
  if (t.kind != Tok::Identifier || t.text != "t")
    failExpected("'t'", "in a time index like [t-1]");
  consume();
  if (at(Tok::RBracket)) {
    Token close = consume();
    fail(SourceRange::cover(open.range, close.range),
         "a time offset must be non-zero: [t] is the current step, so leave the index out");
  }
  if (!at(Tok::Minus) && !at(Tok::Plus)) failExpected("'-' or '+'", "after 't' in a time index");
  Token sign = consume();
  const Token &k = peek();
  if (k.kind != Tok::Number) {
    if (k.kind == Tok::Identifier)
      fail(k.range, fmt::format("a time offset must be an integer literal, not {}", quoted(k.text)));
    failExpected("an integer", "in a time index like [t-1]");
  }
  Token num = consume();
  if (!num.isInteger)
    fail(num.range, fmt::format("a time offset must be an integer literal, not {}", quoted(num.text)));
  if (num.intValue == 0)
    fail(num.range, "a time offset must be non-zero: [t-0] is the current step, so leave the index out");
  if (num.intOverflow || num.intValue > static_cast<uint64_t>(kMaxTimeOffset))
    fail(num.range, fmt::format("time offset {} is too large (the limit is {})", quoted(num.text), kMaxTimeOffset));
  Token close = expect(Tok::RBracket, "to close the time index");
  range = SourceRange::cover(open.range, close.range);
  int64_t k64 = static_cast<int64_t>(num.intValue);
  return sign.kind == Tok::Minus ? -k64 : k64;
}

/// primary = number | name | call | "(" , expr , ")" ;
ExprPtr Parser::parsePrimary() {
  const Token &t = peek();
  switch (t.kind) {
  case Tok::Number: {
    Token num = consume();
    auto n = std::make_unique<NumberExpr>(num.range);
    n->spelling = std::string(num.text);
    n->value = num.value;
    n->isInteger = num.isInteger;
    n->intOverflow = num.intOverflow;
    n->intValue = num.intValue;
    return n;
  }
  case Tok::Identifier: {
    Token callee = consume();
    return parseCall(callee);
  }
  case Tok::LParen: {
    Token open = consume();
    NestingGuard guard(nesting_);
    if (nesting_ > kMaxNesting)
      fail(open.range, fmt::format("expression is too deeply nested (more than {} levels)", kMaxNesting));
    ExprPtr e = parseExpr();
    if (!at(Tok::RParen)) {
      if (peek().afterInvalid) throw SyntaxError{};
      diags_.error(at(Tok::Newline) || at(Tok::Eof) ? SourceRange(lastEnd_) : peek().range,
                   "expected ')' to close this '('", {{open.range, "the '(' is here"}});
      throw SyntaxError{};
    }
    Token close = consume();
    e->range = SourceRange::cover(open.range, close.range);
    return e;
  }
  default:
    failExpected("an expression", "here");
  }
}

/// call = name , "(" , [ arguments ] , ")" ;
/// arguments = argument , { "," , argument } ;
/// argument = expr | name , "=" , size ;
ExprPtr Parser::parseCall(const Token &callee) {
  Token open = expect(Tok::LParen, "after the function's name");
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting)
    fail(open.range, fmt::format("expression is too deeply nested (more than {} levels)", kMaxNesting));
  auto call = std::make_unique<CallExpr>(callee.range);
  call->callee = identFrom(callee);
  unsigned depth = 0;
  if (!at(Tok::RParen)) {
    do {
      if (at(Tok::Identifier) && peek(1).kind == Tok::Equal) {
        KeywordArg kw;
        kw.name = identFrom(consume());
        consume(); // '='
        kw.value = parseExpr();
        depth = std::max(depth, kw.value->depth);
        call->keywordArgs.push_back(std::move(kw));
      } else {
        ExprPtr arg = parseExpr();
        if (!call->keywordArgs.empty())
          fail(arg->range, "a positional argument cannot follow a keyword argument");
        depth = std::max(depth, arg->depth);
        call->args.push_back(std::move(arg));
      }
    } while (accept(Tok::Comma));
  }
  if (!at(Tok::RParen)) {
    if (peek().afterInvalid) throw SyntaxError{};
    diags_.error(at(Tok::Newline) || at(Tok::Eof) ? SourceRange(lastEnd_) : peek().range,
                 fmt::format("expected ')' to close the call to {}", quoted(callee.text)),
                 {{open.range, "the '(' is here"}});
    throw SyntaxError{};
  }
  Token close = consume();
  call->range = SourceRange::cover(callee.range, close.range);
  call->depth = depth + 1;
  if (call->depth > kMaxExprDepth)
    fail(callee.range, fmt::format("expression is too deeply nested (more than {} levels)", kMaxExprDepth));
  return call;
}

ExprPtr Parser::parseExpressionOnly() {
  try {
    ExprPtr e = parseExpr();
    if (!at(Tok::Newline) && !at(Tok::Eof)) failExpected("end of input", "after the expression");
    return e;
  } catch (SyntaxError &) {
    return nullptr;
  }
}

} // namespace rnnc
