// The walk over one cell or model, with its dims bound (or some unknown).
//
// 1. Declare: ports, params and assigned names, each once; evaluate port widths
//    and param shapes.
// 2. Evaluate the statements in order: every name read at the current step is
//    defined earlier; every name read with a time offset is a port or a
//    variable of the cell; every expression gets a width; builtins and
//    instantiations are checked; an instance is walked in turn with its dims
//    bound and its params named after it.
// 3. If a variable was read with a time offset before its width was known
//    (h[t-1] above the line defining h), evaluate once more with all widths known.
// 4. Every output is defined.
#include "frontend/Sema.h"

#include "frontend/Builtins.h"
#include "frontend/Names.h"
#include "frontend/SizeExpr.h"
#include "support/Crash.h"

#include <fmt/format.h>
#include <set>

namespace rnnc {

namespace {

using Notes = std::vector<std::pair<SourceRange, std::string>>;

std::string describeWidth(const ValueType &t) {
  if (t.isIndex) return fmt::format("index[{}]", *t.width);
  return fmt::format("{} wide", *t.width);
}

/// The value an expression gives; `bad` once an error was reported for it, so
/// that one mistake is not reported again by every expression above it.
struct Val {
  ValueType type;
  bool bad = false;
  static Val dense(std::optional<int64_t> w) { return {{false, w}, false}; }
  static Val error() { return {{}, true}; }
};

/// Dims named in the sizes of a cell (port widths, param shapes, split counts,
/// keyword arguments), in order of first appearance.
std::vector<const NameExpr *> dimUses(const CellDecl &cell) {
  std::vector<const NameExpr *> uses;
  std::function<void(const Expr &)> visit = [&](const Expr &e) {
    switch (e.kind) {
    case ExprKind::Unary: visit(*as<UnaryExpr>(e).operand); break;
    case ExprKind::Binary:
      visit(*as<BinaryExpr>(e).lhs);
      visit(*as<BinaryExpr>(e).rhs);
      break;
    case ExprKind::Call: {
      const auto &c = as<CallExpr>(e);
      for (size_t i = 0; i < c.args.size(); ++i) {
        if (c.callee.name == "split" && i == 1) collectSizeNames(*c.args[i], uses);
        else visit(*c.args[i]);
      }
      for (const auto &kw : c.keywordArgs) collectSizeNames(*kw.value, uses);
      break;
    }
    default: break;
    }
  };
  for (const auto &p : cell.ports) collectSizeNames(*p.size, uses);
  for (const auto &s : cell.body) {
    if (s->kind == StmtKind::Param)
      for (const auto &e : static_cast<const ParamDecl &>(*s).shape) collectSizeNames(*e, uses);
    else
      visit(*static_cast<const AssignStmt &>(*s).value);
  }
  return uses;
}

/// The names of a cell's ports, params and variables.
std::set<std::string> valueNames(const CellDecl &cell) {
  std::set<std::string> names;
  for (const auto &p : cell.ports) names.insert(p.name.name);
  for (const auto &st : cell.body) {
    if (st->kind == StmtKind::Param)
      for (const auto &n : static_cast<const ParamDecl &>(*st).names) names.insert(n.name);
    else
      for (const auto &t : static_cast<const AssignStmt &>(*st).targets) names.insert(t.name);
  }
  return names;
}

/// The first use of each dim a cell's sizes name (names of values excluded:
/// using one in a size is reported where it is evaluated).
std::vector<const NameExpr *> freeDims(const CellDecl &cell) {
  std::set<std::string> values = valueNames(cell), seen;
  std::vector<const NameExpr *> dims;
  for (const NameExpr *u : dimUses(cell))
    if (!values.count(u->name) && seen.insert(u->name).second) dims.push_back(u);
  return dims;
}

/// What an instantiation gives the statement that makes it.
struct InstanceResult {
  std::vector<Val> outputs;
  std::vector<ElaboratedParam> params; // the instance's, full names
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

private:
  enum class SymKind { Port, Param, Local };
  struct Symbol {
    SymKind kind;
    SourceRange decl;
    size_t defIndex = 0; // statement that defines it
    ValueType type;
    bool typed = false;
    std::vector<std::optional<int64_t>> shape; // params
  };

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
  std::vector<Val> split(const CallExpr &c, size_t targets);
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
  std::map<const AssignStmt *, InstanceResult> instances_;
  std::vector<std::vector<ElaboratedParam>> stmtParams_; // per statement
};

void CellWalk::declare(const Ident &id, Symbol sym) {
  auto [it, fresh] = symbols_.emplace(id.name, sym);
  if (fresh) return;
  const Symbol &prev = it->second;
  if (sym.kind == SymKind::Local && prev.kind == SymKind::Port)
    error(id.range, fmt::format("cannot assign to input {}", quoted(id.name)), {{prev.decl, "declared as an input here"}});
  else if (sym.kind == SymKind::Local && prev.kind == SymKind::Param)
    error(id.range, fmt::format("cannot assign to param {}", quoted(id.name)), {{prev.decl, "declared as a param here"}});
  else
    error(id.range, fmt::format("redefinition of {}", quoted(id.name)), {{prev.decl, "first defined here"}});
}

void CellWalk::declareAll() {
  for (const auto &p : cell_.ports) declare(p.name, {SymKind::Port, p.name.range, 0, {p.isIndex, std::nullopt}, true, {}});
  for (size_t i = 0; i < cell_.body.size(); ++i) {
    const Stmt &s = *cell_.body[i];
    if (s.kind == StmtKind::Param) {
      for (const auto &n : static_cast<const ParamDecl &>(s).names) declare(n, {SymKind::Param, n.range, i, {}, true, {}});
    } else {
      const auto &a = static_cast<const AssignStmt &>(s);
      std::set<std::string> seen;
      for (const auto &t : a.targets) {
        if (!seen.insert(t.name).second) {
          error(t.range, fmt::format("{} is assigned twice in one statement", quoted(t.name)));
          continue;
        }
        declare(t, {SymKind::Local, t.range, i, {}, false, {}});
      }
    }
  }
  // Sizes, now that every value name is known (a size must not name one).
  for (const auto &p : cell_.ports) {
    Symbol &sym = symbols_.at(p.name.name);
    if (sym.decl != p.name.range) continue; // a duplicate, reported
    sym.type.width = evalSize(*p.size, scope_, ctx_.diags, "an input's width").value;
  }
  for (const auto &s : cell_.body) {
    if (s->kind != StmtKind::Param) continue;
    const auto &pd = static_cast<const ParamDecl &>(*s);
    std::vector<std::optional<int64_t>> shape;
    for (const auto &e : pd.shape) shape.push_back(evalSize(*e, scope_, ctx_.diags, "a param's size").value);
    for (const auto &n : pd.names) {
      Symbol &sym = symbols_.at(n.name);
      if (sym.decl != n.range) continue;
      sym.shape = shape;
      sym.type.width = shape.size() == 1 ? shape[0] : std::nullopt;
    }
  }
}

void CellWalk::run() {
  ctx_.walked.insert(&cell_);
  ctx_.work += cell_.ports.size() + cell_.body.size();
  for (const auto &st : cell_.body)
    if (st->kind == StmtKind::Param) ctx_.work += static_cast<const ParamDecl &>(*st).names.size();
  stmtParams_.assign(cell_.body.size(), {});
  declareAll();
  evaluate(true);
  if (needsSecondPass_) evaluate(false);
  checkOutputs();
}

void CellWalk::evaluate(bool first) {
  for (size_t i = 0; i < cell_.body.size(); ++i) {
    current_ = i;
    const Stmt &s = *cell_.body[i];
    if (s.kind == StmtKind::Param) {
      if (!first) continue;
      for (const auto &n : static_cast<const ParamDecl &>(s).names) {
        const Symbol &sym = symbols_.at(n.name);
        if (sym.decl == n.range && !sym.shape.empty()) stmtParams_[i].push_back({prefix_ + n.name, sym.shape, n.range});
      }
      continue;
    }
    assign(static_cast<const AssignStmt &>(s), i, first);
  }
  currentAssign_ = nullptr;
}

void CellWalk::assign(const AssignStmt &s, size_t index, bool first) {
  currentAssign_ = &s;
  std::vector<Val> results;
  const Expr &rhs = *s.value;
  const CallExpr *call = rhs.kind == ExprKind::Call ? &as<CallExpr>(rhs) : nullptr;
  const Builtin *builtin = call ? findBuiltin(call->callee.name) : nullptr;
  bool isCell = call && !builtin && ctx_.program.fileOf(cell_).cells.count(call->callee.name);
  if (call && builtin && builtin->kind == BuiltinKind::Split) {
    results = split(*call, s.targets.size());
  } else if (isCell) {
    // An instance is walked again only if an argument's width was unknown the
    // first time (it read a variable with an offset above its definition).
    auto it = instances_.find(&s);
    if (it == instances_.end() || !it->second.argsKnown) it = instances_.insert_or_assign(&s, instantiate(*call, s)).first;
    results = it->second.outputs;
    stmtParams_[index] = it->second.params;
  } else {
    results.push_back(value(rhs));
    if (s.targets.size() > 1 && !results[0].bad)
      error(SourceRange::cover(s.targets.front().range, s.targets.back().range),
            fmt::format("{} names are assigned, but the right side gives one value (only split() and cells "
                        "with several outputs give several)", s.targets.size()));
  }
  for (size_t k = 0; k < s.targets.size(); ++k) {
    auto it = symbols_.find(s.targets[k].name);
    if (it == symbols_.end() || it->second.decl != s.targets[k].range) continue;
    Symbol &sym = it->second;
    Val v = k < results.size() ? results[k] : Val::error();
    sym.type = v.type;
    sym.typed = true;
    if (s.targets[k].name == "loss" && v.type.width && *v.type.width != 1 && !v.bad)
      error(s.targets[k].range, fmt::format("'loss' is the training objective and must be a scalar, but this "
                                            "value is {} wide", *v.type.width));
  }
  (void)first;
}

std::vector<ElaboratedParam> CellWalk::params() const {
  std::vector<ElaboratedParam> all;
  for (const auto &ps : stmtParams_) all.insert(all.end(), ps.begin(), ps.end());
  return all;
}

void CellWalk::checkOutputs() {
  std::map<std::string, SourceRange> seen;
  for (const auto &o : cell_.outputs) {
    if (auto [it, fresh] = seen.emplace(o.name, o.range); !fresh) {
      error(o.range, fmt::format("{} is listed twice as an output", quoted(o.name)), {{it->second, "first listed here"}});
      continue;
    }
    auto it = symbols_.find(o.name);
    if (it == symbols_.end()) {
      error(o.range, fmt::format("output {} is never defined in {} {}{}", quoted(o.name), cell_.keyword(),
                                 quoted(cell_.name.name), didYouMean(o.name)));
    } else if (it->second.kind == SymKind::Param) {
      error(o.range, fmt::format("output {} is a param; an output must be a value computed per step", quoted(o.name)),
            {{it->second.decl, "declared as a param here"}});
    }
  }
}

std::string CellWalk::didYouMean(const std::string &n, bool readableOnly) const {
  if (symbols_.size() > kMaxSuggestionCandidates) return "";
  std::vector<std::string> names;
  for (auto &[name, sym] : symbols_)
    if (!readableOnly || sym.kind != SymKind::Local || sym.defIndex < current_) names.push_back(name);
  std::string hint = closestName(n, names);
  return hint.empty() ? "" : fmt::format("; did you mean {}?", quoted(hint));
}

std::vector<ValueType> CellWalk::outputTypes() const {
  std::vector<ValueType> types;
  for (const auto &o : cell_.outputs) {
    auto it = symbols_.find(o.name);
    types.push_back(it == symbols_.end() || it->second.kind == SymKind::Param ? ValueType{} : it->second.type);
  }
  return types;
}

std::vector<ElaboratedPort> CellWalk::ports(bool outputs) const {
  std::vector<ElaboratedPort> out;
  if (outputs) {
    auto types = outputTypes();
    for (size_t i = 0; i < cell_.outputs.size(); ++i) out.push_back({cell_.outputs[i].name, types[i], cell_.outputs[i].range});
  } else {
    for (const auto &p : cell_.ports) {
      auto it = symbols_.find(p.name.name);
      out.push_back({p.name.name, it->second.type, p.name.range});
    }
  }
  return out;
}

// ----- expressions -----

Val CellWalk::dense(const Expr &e) {
  Val v = value(e);
  if (!v.bad && v.type.isIndex) {
    std::string what = e.kind == ExprKind::Name ? quoted(as<NameExpr>(e).name) : std::string("this value");
    error(e.range, fmt::format("{} is an index (an integer per step), not a vector; use it with embed() or "
                               "cross_entropy()", what));
    return Val::error();
  }
  return v;
}

Val CellWalk::value(const Expr &e) {
  switch (e.kind) {
  case ExprKind::Number: return Val::dense(1);
  case ExprKind::Name: return name(as<NameExpr>(e));
  case ExprKind::Unary: return dense(*as<UnaryExpr>(e).operand);
  case ExprKind::Binary: return binary(as<BinaryExpr>(e));
  case ExprKind::Call: return call(as<CallExpr>(e));
  case ExprKind::Error: return Val::error();
  }
  return Val::error();
}

Val CellWalk::name(const NameExpr &n) {
  auto it = symbols_.find(n.name);
  if (it == symbols_.end()) {
    if (scope_.dims.count(n.name) || ctx_.rootDims.count(n.name))
      error(n.nameRange, fmt::format("{} is a dim (a size), not a value", quoted(n.name)));
    else if (findBuiltin(n.name) || ctx_.program.fileOf(cell_).cells.count(n.name))
      error(n.nameRange, fmt::format("{} is a function; call it, like {}(x)", quoted(n.name), n.name));
    else
      error(n.nameRange, fmt::format("unknown name {}{}", quoted(n.name), didYouMean(n.name, !n.hasOffset())));
    return Val::error();
  }
  const Symbol &sym = it->second;
  if (sym.kind == SymKind::Param) {
    if (sym.shape.empty()) return Val::error(); // its declaration did not parse
    if (n.hasOffset()) {
      error(n.offsetRange, fmt::format("param {} does not change over time; it cannot be read with a time offset",
                                       quoted(n.name)));
      return Val::error();
    }
    if (sym.shape.size() == 2) {
      error(n.nameRange, fmt::format("{} is a matrix param; it can only be the left operand of '@' (or the table "
                                     "of embed())", quoted(n.name)));
      return Val::error();
    }
    return {sym.type, false};
  }
  if (sym.kind == SymKind::Local && !n.hasOffset()) {
    bool ownTarget = false;
    if (currentAssign_ && sym.defIndex == current_)
      for (const auto &t : currentAssign_->targets) ownTarget |= t.name == n.name;
    if (ownTarget) {
      error(n.nameRange, fmt::format("{} is used in its own definition; to read its value from the previous step, "
                                     "write {}[t-1]", quoted(n.name), n.name));
      return Val::error();
    }
    if (sym.defIndex > current_) {
      error(n.nameRange, fmt::format("{} is used before it is defined", quoted(n.name)),
            {{sym.decl, "defined here"}});
      return Val::error();
    }
  }
  if (sym.kind == SymKind::Local && !sym.typed) {
    needsSecondPass_ = true; // read with an offset above its definition
    return {{false, std::nullopt}, false};
  }
  return {sym.type, false};
}

Val CellWalk::elementwise(const Val &l, const Val &r, SourceRange where, const char *what) {
  if (l.bad || r.bad) return Val::error();
  auto lw = l.type.width, rw = r.type.width;
  if (!lw || !rw) return Val::dense(lw && *lw != 1 ? lw : rw && *rw != 1 ? rw : std::nullopt);
  if (*lw == *rw || *rw == 1) return Val::dense(lw);
  if (*lw == 1) return Val::dense(rw);
  error(where, fmt::format("width mismatch in {}: the left operand is {} wide, the right one {}", what, *lw, *rw));
  return Val::error();
}

const CellWalk::Symbol *CellWalk::matrixParam(const Expr &e, const char *context) {
  if (e.kind == ExprKind::Name) {
    const auto &n = as<NameExpr>(e);
    auto it = symbols_.find(n.name);
    if (it != symbols_.end() && it->second.kind == SymKind::Param) {
      if (n.hasOffset()) {
        error(n.offsetRange, fmt::format("param {} does not change over time; it cannot be read with a time offset",
                                         quoted(n.name)));
        return nullptr;
      }
      if (it->second.shape.empty()) return nullptr; // its declaration did not parse
      if (it->second.shape.size() == 2) return &it->second;
      error(e.range, fmt::format("{} is a vector param; {} must be a matrix param [rows, cols]", quoted(n.name), context),
            {{it->second.decl, "declared here"}});
      return nullptr;
    }
    if (it == symbols_.end()) {
      name(n); // reports the unknown name
      return nullptr;
    }
  }
  error(e.range, fmt::format("{} must be a matrix param, like W in W @ x", context));
  return nullptr;
}

Val CellWalk::binary(const BinaryExpr &b) {
  if (b.op == '@') {
    const Symbol *w = matrixParam(*b.lhs, "the left operand of '@'");
    Val x = dense(*b.rhs);
    if (!w || x.bad) return Val::error();
    auto rows = w->shape[0], cols = w->shape[1];
    if (cols && x.type.width && *cols != *x.type.width) {
      error(b.opRange, fmt::format("width mismatch in '@': {} is [{}, {}] and needs a vector {} wide, but the right "
                                   "operand is {} wide", quoted(as<NameExpr>(*b.lhs).name), *rows, *cols, *cols,
                                   *x.type.width),
            {{w->decl, "declared here"}});
      return Val::error();
    }
    return Val::dense(rows);
  }
  Val l = dense(*b.lhs);
  Val r = dense(*b.rhs);
  char what[8] = {'\'', b.op, '\'', 0};
  return elementwise(l, r, b.opRange, what);
}

Val CellWalk::call(const CallExpr &c) {
  const Builtin *builtin = findBuiltin(c.callee.name);
  if (!builtin) {
    const auto &cells = ctx_.program.fileOf(cell_).cells;
    if (cells.count(c.callee.name)) {
      error(c.range, fmt::format("an instance of cell {} must be the whole right side of an assignment (its params "
                                 "are named after the name assigned)", quoted(c.callee.name)));
    } else if (symbols_.count(c.callee.name)) {
      error(c.callee.range, fmt::format("{} is a value, not a function", quoted(c.callee.name)),
            {{symbols_.at(c.callee.name).decl, "declared here"}});
    } else {
      std::vector<std::string> names = builtinNames();
      for (auto &[n, decl] : cells) names.push_back(n);
      std::string hint = closestName(c.callee.name, names);
      error(c.callee.range, fmt::format("unknown function {}{}", quoted(c.callee.name),
                                        hint.empty() ? "" : fmt::format("; did you mean {}?", quoted(hint))));
    }
    for (const auto &a : c.args) value(*a);
    return Val::error();
  }
  if (!c.keywordArgs.empty()) {
    error(c.keywordArgs.front().name.range,
          fmt::format("{}() takes no keyword arguments; they bind the dims of a cell", builtin->name));
    return Val::error();
  }
  size_t n = c.args.size();
  if (n < builtin->minArgs || (builtin->maxArgs && n > builtin->maxArgs)) {
    std::string expected = builtin->maxArgs == 0 ? fmt::format("at least {}", builtin->minArgs)
                                                 : fmt::format("{}", builtin->minArgs);
    error(c.callee.range, fmt::format("{}() takes {} argument{}, but {} {} given", builtin->name, expected,
                                      builtin->minArgs == 1 ? "" : "s", n, n == 1 ? "was" : "were"));
    return Val::error();
  }
  switch (builtin->kind) {
  case BuiltinKind::Pointwise: return dense(*c.args[0]);
  case BuiltinKind::PointwisePair: {
    Val l = dense(*c.args[0]);
    Val r = dense(*c.args[1]);
    return elementwise(l, r, c.callee.range, fmt::format("{}()", builtin->name).c_str());
  }
  case BuiltinKind::Split:
    error(c.range, "split() gives several values: assign them to names, like 'a, b = split(v, 2)'");
    return Val::error();
  case BuiltinKind::Concat: {
    int64_t total = 0;
    bool known = true, bad = false;
    for (const auto &a : c.args) {
      Val v = dense(*a);
      bad |= v.bad;
      if (v.bad || !v.type.width) known = false;
      else if (__builtin_add_overflow(total, *v.type.width, &total) || total > kMaxSize) {
        error(c.callee.range, fmt::format("concat() is too wide (the limit is {})", kMaxSize));
        return Val::error();
      }
    }
    if (bad) return Val::error();
    return Val::dense(known ? std::optional<int64_t>(total) : std::nullopt);
  }
  case BuiltinKind::Reduce: {
    Val v = dense(*c.args[0]);
    return v.bad ? v : Val::dense(1);
  }
  case BuiltinKind::Embed: {
    const Symbol *table = matrixParam(*c.args[0], "the first argument of embed()");
    Val idx = value(*c.args[1]);
    if (!table || idx.bad) return Val::error();
    if (!idx.type.isIndex) {
      error(c.args[1]->range, "the second argument of embed() must be an index input, like 'tok: index[V]'");
      return Val::error();
    }
    if (table->shape[0] && idx.type.width && *table->shape[0] != *idx.type.width) {
      error(c.args[1]->range, fmt::format("embed() table {} has {} rows, but this index is index[{}]",
                                          quoted(as<NameExpr>(*c.args[0]).name), *table->shape[0], *idx.type.width),
            {{table->decl, "declared here"}});
      return Val::error();
    }
    return Val::dense(table->shape[1]);
  }
  case BuiltinKind::CrossEntropy: {
    Val logits = dense(*c.args[0]);
    Val target = value(*c.args[1]);
    if (logits.bad || target.bad) return Val::error();
    if (!target.type.isIndex) {
      error(c.args[1]->range, "the second argument of cross_entropy() must be an index input (the target class)");
      return Val::error();
    }
    if (logits.type.width && target.type.width && *logits.type.width != *target.type.width) {
      error(c.args[0]->range, fmt::format("cross_entropy() logits are {} wide, but the target is index[{}]",
                                          *logits.type.width, *target.type.width));
      return Val::error();
    }
    return Val::dense(1);
  }
  case BuiltinKind::Mse: {
    Val pred = dense(*c.args[0]);
    Val target = dense(*c.args[1]);
    if (pred.bad || target.bad) return Val::error();
    if (pred.type.width && target.type.width && *pred.type.width != *target.type.width) {
      error(c.callee.range, fmt::format("mse() compares values of one width, but these are {} and {} wide",
                                        *pred.type.width, *target.type.width));
      return Val::error();
    }
    return Val::dense(1);
  }
  }
  return Val::error();
}

std::vector<Val> CellWalk::split(const CallExpr &c, size_t targets) {
  std::vector<Val> bad(targets, Val::error());
  if (c.args.size() != 2 || !c.keywordArgs.empty()) {
    error(c.callee.range, fmt::format("split() takes 2 arguments (a vector and a count), but {} {} given",
                                      c.args.size() + c.keywordArgs.size(), c.args.size() == 1 ? "was" : "were"));
    return bad;
  }
  Val v = dense(*c.args[0]);
  SizeValue n = evalSize(*c.args[1], scope_, ctx_.diags, "the count of split()");
  if (v.bad || n.error) return bad;
  if (n.value && static_cast<size_t>(*n.value) != targets) {
    error(c.range, fmt::format("split() makes {} parts, but {} name{} assigned", *n.value, targets,
                               targets == 1 ? " is" : "s are"));
    return bad;
  }
  if (!n.value || !v.type.width) return std::vector<Val>(targets, Val::dense(std::nullopt));
  if (*v.type.width % *n.value != 0) {
    error(c.args[1]->range, fmt::format("cannot split a vector {} wide into {} equal parts", *v.type.width, *n.value));
    return bad;
  }
  return std::vector<Val>(targets, Val::dense(*v.type.width / *n.value));
}

// ----- instances -----

InstanceResult CellWalk::instantiate(const CallExpr &c, const AssignStmt &s) {
  const CellDecl &callee = *ctx_.program.fileOf(cell_).cells.at(c.callee.name);
  InstanceResult bad{std::vector<Val>(std::max<size_t>(s.targets.size(), 1), Val::error()), {}, true};
  auto argValues = [&] {
    for (const auto &a : c.args) value(*a);
  };
  if (callee.isModel) {
    error(c.callee.range, fmt::format("cannot instantiate model {}: only cells can be instantiated",
                                      quoted(callee.name.name)), {{callee.name.range, "declared here"}});
    argValues();
    return bad;
  }
  for (const CellDecl *open : ctx_.stack) {
    if (open != &callee) continue;
    Notes notes{{callee.name.range, "declared here"}};
    error(c.callee.range, fmt::format("cell {} instantiates itself", quoted(callee.name.name)), notes);
    return bad;
  }
  if (ctx_.stack.size() >= Sema::kMaxInstanceDepth || ctx_.instances >= Sema::kMaxInstances ||
      ctx_.work >= Sema::kMaxElaboratedStatements) {
    if (!ctx_.overLimit)
      error(c.callee.range,
            ctx_.stack.size() >= Sema::kMaxInstanceDepth
                ? fmt::format("cells are instantiated too deeply (more than {} levels)", Sema::kMaxInstanceDepth)
            : ctx_.instances >= Sema::kMaxInstances
                ? fmt::format("too many cell instances (more than {})", Sema::kMaxInstances)
                : fmt::format("the instances are too large: together they hold more than {} statements and params",
                              Sema::kMaxElaboratedStatements));
    ctx_.overLimit = true;
    return bad;
  }
  std::string instance = s.targets.front().name;
  Notes chain = chain_;
  chain.insert(chain.begin(), {c.range, fmt::format("in instance {} of cell {}", quoted(prefix_ + instance),
                                                    quoted(callee.name.name))});
  if (c.args.size() != callee.ports.size()) {
    error(c.callee.range, fmt::format("cell {} takes {} input{}, but {} {} given", quoted(callee.name.name),
                                      callee.ports.size(), callee.ports.size() == 1 ? "" : "s", c.args.size(),
                                      c.args.size() == 1 ? "was" : "were"),
          {{callee.name.range, "declared here"}});
    argValues();
    return bad;
  }
  if (s.targets.size() != callee.outputs.size()) {
    error(SourceRange::cover(s.targets.front().range, s.targets.back().range),
          fmt::format("cell {} has {} output{}, but {} name{} assigned", quoted(callee.name.name),
                      callee.outputs.size(), callee.outputs.size() == 1 ? "" : "s", s.targets.size(),
                      s.targets.size() == 1 ? " is" : "s are"),
          {{callee.name.range, "declared here"}});
    argValues();
    return bad;
  }

  // The callee's dims: bound by keyword, inferred from argument widths, or taken
  // from the root file's dims, in that order.
  DimScope calleeScope;
  std::map<std::string, const NameExpr *> firstUse;
  for (const NameExpr *u : freeDims(callee)) {
    calleeScope.dims.emplace(u->name, std::nullopt);
    firstUse.emplace(u->name, u);
  }
  std::map<std::string, SourceRange> boundBy;
  bool bindingFailed = false;
  for (const auto &kw : c.keywordArgs) {
    SizeValue v = evalSize(*kw.value, scope_, ctx_.diags, "a dim");
    auto it = calleeScope.dims.find(kw.name.name);
    if (it == calleeScope.dims.end()) {
      std::vector<std::string> names;
      for (auto &[n, v2] : calleeScope.dims) names.push_back(n);
      std::string hint = closestName(kw.name.name, names);
      error(kw.name.range, fmt::format("cell {} has no dim {}{}", quoted(callee.name.name), quoted(kw.name.name),
                                       hint.empty() ? "" : fmt::format("; did you mean {}?", quoted(hint))),
            {{callee.name.range, "declared here"}});
      bindingFailed = true;
      continue;
    }
    if (boundBy.count(kw.name.name)) {
      error(kw.name.range, fmt::format("dim {} is bound twice", quoted(kw.name.name)),
            {{boundBy.at(kw.name.name), "first bound here"}});
      continue;
    }
    boundBy[kw.name.name] = kw.name.range;
    it->second = v.value;
    bindingFailed |= v.error;
  }
  std::vector<Val> args;
  bool argsKnown = true;
  for (size_t i = 0; i < c.args.size(); ++i) {
    const Port &port = callee.ports[i];
    Val a = port.isIndex ? value(*c.args[i]) : dense(*c.args[i]);
    args.push_back(a);
    argsKnown &= a.bad || a.type.width.has_value();
    if (a.bad) continue;
    if (port.isIndex && !a.type.isIndex) {
      error(c.args[i]->range, fmt::format("input {} of cell {} is an index input; this argument is a vector",
                                          quoted(port.name.name), quoted(callee.name.name)),
            {{port.name.range, "declared here"}});
      args.back() = Val::error();
      continue;
    }
    // Infer a dim from a port written as a single dim name, [I].
    if (port.size->kind == ExprKind::Name && a.type.width) {
      const auto &dn = as<NameExpr>(*port.size);
      auto it = calleeScope.dims.find(dn.name);
      if (it != calleeScope.dims.end() && !it->second && !boundBy.count(dn.name)) {
        it->second = a.type.width;
        boundBy[dn.name] = c.args[i]->range;
      }
    }
  }
  bool callerComplete = complete_;
  for (auto &[dim, v] : calleeScope.dims) {
    if (v || boundBy.count(dim)) continue;
    if (auto g = ctx_.rootDims.find(dim); g != ctx_.rootDims.end()) {
      v = g->second;
      continue;
    }
    if (callerComplete && argsKnown && !bindingFailed)
      error(c.callee.range, fmt::format("cannot tell dim {} of cell {}: bind it, like {}(..., {} = 128), or declare "
                                        "'dim {} = ...' in {}", quoted(dim), quoted(callee.name.name),
                                        callee.name.name, dim, dim, ctx_.rootFileName),
            {{firstUse.at(dim)->range, "used here"}});
  }
  ++ctx_.instances;
  ctx_.stack.push_back(&callee);
  CellWalk inner(ctx_, callee, calleeScope, prefix_ + instance + ".", chain);
  inner.run();
  ctx_.stack.pop_back();
  auto portTypes = inner.ports(false);
  for (size_t i = 0; i < c.args.size(); ++i) {
    const ValueType &want = portTypes[i].type;
    const ValueType &got = args[i].type;
    if (args[i].bad || !want.width || !got.width || *want.width == *got.width) continue;
    const Port &port = callee.ports[i];
    error(c.args[i]->range, fmt::format("input {} of cell {} is {}, but this argument is {}", quoted(port.name.name),
                                        quoted(callee.name.name), describeWidth(want), describeWidth(got)),
          {{port.typeRange, "declared here"}});
  }
  InstanceResult result{{}, inner.params(), argsKnown};
  for (const ValueType &t : inner.outputTypes()) result.outputs.push_back({t, false});
  return result;
}

/// The names of the cells that some cell or model of `file` instantiates
/// (one pass over the file).
std::set<std::string> instantiatedNames(const SourceFile &file) {
  std::set<std::string> names;
  std::function<void(const Expr &)> visit = [&](const Expr &e) {
    switch (e.kind) {
    case ExprKind::Unary: visit(*as<UnaryExpr>(e).operand); break;
    case ExprKind::Binary:
      visit(*as<BinaryExpr>(e).lhs);
      visit(*as<BinaryExpr>(e).rhs);
      break;
    case ExprKind::Call: {
      const auto &c = as<CallExpr>(e);
      if (!findBuiltin(c.callee.name)) names.insert(c.callee.name);
      for (const auto &a : c.args) visit(*a);
      break;
    }
    default: break;
    }
  };
  for (const CellDecl *cell : file.ownCells)
    for (const auto &s : cell->body)
      if (s->kind == StmtKind::Assign) visit(*static_cast<const AssignStmt &>(*s).value);
  return names;
}

} // namespace

// ----- the root file -----

std::optional<DimOverride> parseDimOverride(const std::string &text, std::string &error) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    error = fmt::format("-D {}: expected NAME=VALUE", text);
    return std::nullopt;
  }
  DimOverride d{text.substr(0, eq), 0};
  auto identChar = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
  };
  for (size_t i = 0; i < d.name.size(); ++i) {
    if (!identChar(d.name[i], i == 0)) {
      error = fmt::format("-D {}: {} is not a dim name", text, quoted(d.name));
      return std::nullopt;
    }
  }
  std::string value = text.substr(eq + 1);
  if (value.empty() || value.size() > 12 || value.find_first_not_of("0123456789") != std::string::npos) {
    error = fmt::format("-D {}: the value must be a positive integer no larger than {}", text, kMaxSize);
    return std::nullopt;
  }
  int64_t v = std::stoll(value);
  if (v <= 0 || v > kMaxSize) {
    error = fmt::format("-D {}: the value must be a positive integer no larger than {}", text, kMaxSize);
    return std::nullopt;
  }
  d.value = v;
  return d;
}

SemaResult Sema::run(const std::vector<DimOverride> &overrides) {
  SemaResult result;
  const SourceFile &root = program_.root();
  const std::string &rootName = diags_.sourceManager().name(root.file);
  std::map<std::string, int64_t> overridden;
  for (const auto &o : overrides) overridden[o.name] = o.value;

  // The root file's dims, in order; a -D replaces a dim's value.
  DimScope globals;
  std::map<std::string, SourceRange> dimDecl;
  for (const DimDecl *d : root.dims) {
    SizeValue v = evalSize(*d->value, globals, diags_, "a dim");
    if (auto prev = dimDecl.find(d->name.name); prev != dimDecl.end()) {
      diags_.error(d->name.range, fmt::format("redefinition of dim {}", quoted(d->name.name)),
                   {{prev->second, "first defined here"}});
      continue;
    }
    dimDecl[d->name.name] = d->name.range;
    if (auto o = overridden.find(d->name.name); o != overridden.end()) v = {o->second, false};
    if (v.value) {
      globals.dims[d->name.name] = v.value;
      result.dims[d->name.name] = *v.value;
    } else {
      globals.dims[d->name.name] = std::nullopt;
    }
  }
  // A -D for a dim the file does not declare binds the free dims of its cells.
  std::set<std::string> usedDims;
  for (const CellDecl *cell : root.ownCells)
    for (const NameExpr *u : dimUses(*cell)) usedDims.insert(u->name);
  for (const auto &o : overrides) {
    if (dimDecl.count(o.name)) continue;
    result.dims[o.name] = o.value;
    if (!usedDims.count(o.name))
      diags_.warning(SourceRange(), fmt::format("-D {}={} has no effect: {} declares no dim {} and no cell uses one",
                                                o.name, o.value, rootName, quoted(o.name)));
  }

  // Each cell and model of the root file: models always, with every dim bound;
  // cells unless another cell or model of the file instantiates them (they are
  // checked as instances then). A cell of a file that declares no dim at all is
  // generic: its names are checked now and its widths when it is instantiated.
  bool fileFixesSizes = !result.dims.empty();
  std::set<const CellDecl *> walked;
  unsigned instances = 0;
  uint64_t work = 0;
  std::set<std::string> instantiated = instantiatedNames(root);
  for (const CellDecl *cell : root.ownCells) {
    if (!cell->isModel && instantiated.count(cell->name.name)) continue;
    Elaboration elab;
    elab.decl = cell;
    Context ctx{program_, diags_, result.dims, rootName, elab, walked, instances, work, {cell}, false};
    DimScope scope;
    std::vector<std::string> known;
    for (auto &[n, v] : result.dims) known.push_back(n);
    for (const NameExpr *u : freeDims(*cell)) {
      auto g = result.dims.find(u->name);
      if (g != result.dims.end()) {
        scope.dims[u->name] = g->second;
        continue;
      }
      if (globals.dims.count(u->name)) { // declared, but its value was in error
        scope.dims[u->name] = std::nullopt;
        continue;
      }
      if (cell->isModel || fileFixesSizes) {
        std::string hint = closestName(u->name, known);
        diags_.error(u->range, fmt::format("unknown dim {}{}", quoted(u->name),
                                           hint.empty() ? fmt::format("; declare it, like 'dim {} = 128', or pass -D {}=128",
                                                                      u->name, u->name)
                                                        : fmt::format("; did you mean {}?", quoted(hint))));
        scope.dims[u->name] = std::nullopt;
        continue;
      }
      scope.dims[u->name] = std::nullopt;
      elab.unboundDims.push_back(u->name);
    }
    CellWalk walk(ctx, *cell, scope, "", {});
    walk.run();
    elab.params = walk.params();
    elab.complete = elab.unboundDims.empty();
    elab.inputs = walk.ports(false);
    elab.outputs = walk.ports(true);
    result.entities.push_back(std::move(elab));
  }

  // Cells no walk reached (the cell was only named by an instantiation that was
  // in error, or cells instantiate each other with no model above them, or an
  // imported cell no one uses) still get their names and structure checked,
  // with the file's dims where it has them.
  for (const auto &file : program_.files) {
    for (const CellDecl *cell : file->ownCells) {
      if (walked.count(cell)) continue;
      Elaboration scratch;
      Context ctx{program_, diags_, result.dims, rootName, scratch, walked, instances, work, {cell}, false};
      DimScope scope;
      for (const NameExpr *u : freeDims(*cell)) {
        auto g = result.dims.find(u->name);
        bool own = file.get() == &root;
        scope.dims.emplace(u->name, own && g != result.dims.end() ? std::optional<int64_t>(g->second) : std::nullopt);
      }
      CellWalk walk(ctx, *cell, scope, "", {});
      walk.run();
    }
  }
  return result;
}

} // namespace rnnc
