// The AST of a .rnn file, as the parser builds it: every node carries the source
// range it was parsed from. Nothing here is resolved; Resolve.cpp and
// Elaborate.cpp give names and widths their meaning.
#pragma once

#include "support/SourceManager.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rnnc {

/// A name as written, with where it was written.
struct Ident {
  std::string name;
  SourceRange range;
};

// ----- expressions -----

enum class ExprKind { Number, Name, Unary, Binary, Call, Error };

struct Expr {
  ExprKind kind;
  SourceRange range;
  unsigned depth = 1; // height of the tree below this node; the parser bounds it
  explicit Expr(ExprKind k, SourceRange r) : kind(k), range(r) {}
  virtual ~Expr() = default;
};
using ExprPtr = std::unique_ptr<Expr>;

/// `3`, `0.5`, `1e-5`.
struct NumberExpr : Expr {
  std::string spelling;
  double value = 0;
  bool isInteger = false;
  bool intOverflow = false;
  uint64_t intValue = 0;
  NumberExpr(SourceRange r) : Expr(ExprKind::Number, r) {}
};

/// `h` or, with a time offset, `h[t-1]` (offset -1) / `h[t+2]` (offset +2).
struct NameExpr : Expr {
  std::string name;
  SourceRange nameRange;
  int64_t timeOffset = 0; // 0: the current step
  SourceRange offsetRange; // the `[t-1]` part, when there is one
  NameExpr(SourceRange r) : Expr(ExprKind::Name, r) {}
  bool hasOffset() const { return timeOffset != 0; }
};

/// `-v`.
struct UnaryExpr : Expr {
  char op = '-';
  ExprPtr operand;
  UnaryExpr(SourceRange r) : Expr(ExprKind::Unary, r) {}
};

/// `a + b`, `a - b`, `a * b`, `a / b`, `P @ v`.
struct BinaryExpr : Expr {
  char op;
  SourceRange opRange;
  ExprPtr lhs, rhs;
  BinaryExpr(SourceRange r, char o) : Expr(ExprKind::Binary, r), op(o) {}
};

/// `name = size` inside a call: binds a dim of the cell being instantiated.
struct KeywordArg {
  Ident name;
  ExprPtr value;
};

/// `sigmoid(x)`, `split(v, 4)`, `LSTM(x, H = 256)`.
struct CallExpr : Expr {
  Ident callee;
  std::vector<ExprPtr> args;
  std::vector<KeywordArg> keywordArgs;
  CallExpr(SourceRange r) : Expr(ExprKind::Call, r) {}
};

/// Stands for an expression that failed to parse (already reported), so the
/// statement holding it still defines its names and no error cascades.
struct ErrorExpr : Expr {
  ErrorExpr(SourceRange r) : Expr(ExprKind::Error, r) {}
};

template <typename T> const T &as(const Expr &e) { return static_cast<const T &>(e); }

/// Calls `fn` on every call in `e`, outer calls before the calls in their
/// arguments (keyword arguments are sizes and are not visited).
void forEachCall(const Expr &e, const std::function<void(const CallExpr &)> &fn);

// ----- statements inside a cell or model -----

enum class StmtKind { Param, Assign };

struct Stmt {
  StmtKind kind;
  SourceRange range;
  Stmt(StmtKind k, SourceRange r) : kind(k), range(r) {}
  virtual ~Stmt() = default;
};
using StmtPtr = std::unique_ptr<Stmt>;

/// `param W_ih: [4*H, I]`, `param b_ih, b_hh: [4*H]`.
struct ParamDecl : Stmt {
  std::vector<Ident> names;
  std::vector<ExprPtr> shape; // one size per axis: 1 or 2 of them; none if it did not parse
  SourceRange shapeRange;
  ParamDecl(SourceRange r) : Stmt(StmtKind::Param, r) {}
};

/// `c = ...`, `i, f, g, o = split(..., 4)`, `h, c = Cell(x)`.
struct AssignStmt : Stmt {
  std::vector<Ident> targets;
  ExprPtr value;
  AssignStmt(SourceRange r) : Stmt(StmtKind::Assign, r) {}
};

// ----- top level -----

enum class DeclKind { Import, Dim, Cell };

struct Decl {
  DeclKind kind;
  SourceRange range;
  Decl(DeclKind k, SourceRange r) : kind(k), range(r) {}
  virtual ~Decl() = default;
};
using DeclPtr = std::unique_ptr<Decl>;

/// `import "lstm.rnn"`.
struct ImportDecl : Decl {
  std::string path;
  SourceRange pathRange;
  bool pathInError = false; // unterminated: not worth a second error if missing
  ImportDecl(SourceRange r) : Decl(DeclKind::Import, r) {}
};

/// `dim H = 128`.
struct DimDecl : Decl {
  Ident name;
  ExprPtr value;
  DimDecl(SourceRange r) : Decl(DeclKind::Dim, r) {}
};

/// `x: [I]` or `tok: index[V]`.
struct Port {
  Ident name;
  bool isIndex = false;
  ExprPtr size;
  SourceRange typeRange;
};

/// `cell NAME(ports) -> outputs { body }`, or `model ...` (a model may hold a
/// loss and cannot be instantiated).
struct CellDecl : Decl {
  bool isModel = false;
  Ident name;
  std::vector<Port> ports;
  std::vector<Ident> outputs;
  std::vector<StmtPtr> body;
  CellDecl(SourceRange r) : Decl(DeclKind::Cell, r) {}
  const char *keyword() const { return isModel ? "model" : "cell"; }
};

/// One parsed file.
struct Module {
  uint32_t file = 0;
  std::vector<DeclPtr> decls; // in source order
};

} // namespace rnnc
