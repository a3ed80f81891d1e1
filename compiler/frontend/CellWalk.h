// CellWalk: the walk over one cell or model with its dims bound (or some
// unknown), shared by the three files that implement it: CellWalk.cpp (the
// statements), Expressions.cpp (the width of every expression) and
// Instantiate.cpp (instances). Internal to Sema; nothing outside frontend/
// includes it.
#pragma once

#include "frontend/Sema.h"
#include "frontend/SizeExpr.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace rnnc::sema {

using Notes = std::vector<std::pair<SourceRange, std::string>>;

/// The value an expression gives; `bad` once an error was reported for it, so
/// that one mistake is not reported again by every expression above it.
struct Val {
  ValueType type;
  bool bad = false;
  bool literal = false; // a number: broadcast, but it says nothing about widths
  static Val dense(std::optional<int64_t> w) { return {{false, w}, false}; }
  static Val error() { return {{}, true}; }
};

/// Dims named in the sizes of a cell (port widths, param shapes, split counts,
/// keyword arguments), in order of first appearance.
std::vector<const NameExpr *> dimUses(const CellDecl &cell);
/// The names of a cell's ports, params and variables.
std::set<std::string> valueNames(const CellDecl &cell);
/// The first use of each dim a cell's sizes name (names of values excluded:
/// using one in a size is reported where it is evaluated).
std::vector<const NameExpr *> freeDims(const CellDecl &cell);

/// What an instantiation gives the statement that makes it.
struct InstanceResult {
  std::vector<Val> outputs;
  std::vector<ElaboratedParam> params; // the instance's, full names
  std::shared_ptr<const ElaboratedInstance> tree;
  bool argsKnown = true;               // every argument's width was known
};

/// State shared by all walks of one root cell or model.
struct Context {
  const Program &program;
  DiagnosticEngine &diags;
  const std::map<std::string, int64_t> &rootDims;
  const std::string &rootFileName;
  Elaboration &out;
  std::set<const CellDecl *> &walked;  // every cell walked at least once
  unsigned &instances;                 // walked so far, all roots together
  uint64_t &work;                      // statements walked so far, all roots together
  std::vector<const CellDecl *> stack; // instantiation chain
  bool overLimit = false;
};

class CellWalk {
public:
  CellWalk(Context &ctx, const CellDecl &cell, DimScope scope, std::string prefix, Notes chain)
      : ctx_(ctx), cell_(cell), scope_(std::move(scope)), prefix_(std::move(prefix)), chain_(std::move(chain)) {
    complete_ = true;
    for (auto &[name, v] : scope_.dims)
      if (!v) complete_ = false;
    scope_.isValue = [this](const std::string &n) { return symbols_.count(n) != 0; };
  }

  void run();
  /// Types of the cell's ports and outputs after run().
  std::vector<ValueType> outputTypes() const;
  std::vector<ElaboratedPort> ports(bool outputs) const;
  /// The cell's params and its instances', in statement order.
  std::vector<ElaboratedParam> params() const;
  /// What lowering needs to know of this walk and its instances.
  std::shared_ptr<const ElaboratedInstance> tree() const;

private:
  enum class SymKind { Port, Param, Local };
  struct Symbol {
    SymKind kind;
    SourceRange decl;
    size_t defIndex = 0; // statement that defines it
    ValueType type;
    bool typed = false;
    bool bad = false; // its value had an error (already reported)
    std::vector<std::optional<int64_t>> shape; // params
  };
  /// Most evaluation passes over a cell: each one can learn the width of a
  /// variable read with an offset above its definition (h[t-1] before h = ...).
  static constexpr int kMaxPasses = 32;

  void error(SourceRange r, std::string msg, Notes notes = {}) {
    for (auto &n : chain_) notes.push_back(n);
    ctx_.diags.error(r, std::move(msg), std::move(notes));
  }

  void declare(const Ident &id, Symbol sym);
  void declareAll();
  void evaluate(bool first);
  void assign(const AssignStmt &s, size_t index, bool first);
  void checkOutputs();

  Val value(const Expr &e);
  Val name(const NameExpr &n);
  Val binary(const BinaryExpr &b);
  Val call(const CallExpr &c);
  Val dense(const Expr &e);
  Val elementwise(const Val &l, const Val &r, SourceRange where, const char *what);
  const Symbol *matrixParam(const Expr &e, const char *context);
  /// The matrix param left of '@': `W`, or `dropout(W, p)` (DropConnect).
  const Symbol *productParam(const Expr &lhs);
  std::vector<Val> split(const CallExpr &c, size_t targets);
  /// dropout()'s keyword argument, per = step | sequence; false after an error.
  bool dropoutKeywords(const CallExpr &c);
  InstanceResult instantiate(const CallExpr &c, const AssignStmt &s);
  /// A "did you mean" suffix; `readableOnly` limits it to names that may be
  /// read at the current step of the statement being evaluated.
  std::string didYouMean(const std::string &n, bool readableOnly = false) const;

  Context &ctx_;
  const CellDecl &cell_;
  DimScope scope_;
  std::string prefix_;
  Notes chain_;
  bool complete_ = false;
  std::map<std::string, Symbol> symbols_;
  size_t current_ = 0;            // index of the statement being evaluated
  const AssignStmt *currentAssign_ = nullptr;
  bool needsSecondPass_ = false;
  int widthsLearned_ = 0; // in the current pass
  // Last resort for widths no pass learned: an elementwise op of a width-1
  // value (not a number) and a value of unknown width is 1 wide
  // (`c = sigmoid(f) * c[t-1]` with 1-wide gates: 1 is the only width nothing
  // else pins down; `h = h[t-1] * 2` stays unknown).
  bool broadcastFallback_ = false;
  std::map<const AssignStmt *, InstanceResult> instances_;
  std::vector<std::vector<ElaboratedParam>> stmtParams_; // per statement
};

} // namespace rnnc::sema
