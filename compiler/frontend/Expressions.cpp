// The width of every expression in a cell: names resolved against the cell's
// symbols, '@' against matrix params, elementwise ops with scalar broadcast,
// and each builtin's own rule (Builtins.h). A value in error is `bad` and
// expressions built on it stay quiet.
#include "frontend/CellWalk.h"

#include "frontend/Builtins.h"
#include "frontend/Names.h"

#include <fmt/format.h>
#include <functional>

namespace rnnc::sema {

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
  case ExprKind::Number: {
    Val v = Val::dense(1);
    v.literal = true;
    return v;
  }
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
      error(n.nameRange, fmt::format("{} is a matrix param; it can only be the left operand of '@' (alone or as "
                                     "dropout({}, p) @ x) or the table of embed()", quoted(n.name), n.name));
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
  if (sym.kind == SymKind::Local && (!sym.typed || (!sym.type.width && !sym.bad && sym.defIndex >= current_))) {
    needsSecondPass_ = true; // read with an offset above its definition, width not known yet
    return {{sym.type.isIndex, std::nullopt}, false};
  }
  return {sym.type, false};
}

Val CellWalk::elementwise(const Val &l, const Val &r, SourceRange where, const char *what) {
  if (l.bad || r.bad) return Val::error();
  auto lw = l.type.width, rw = r.type.width;
  if (!lw || !rw) {
    if (broadcastFallback_ && lw && !l.literal) return Val::dense(lw); // the known width, 1 included
    if (broadcastFallback_ && rw && !r.literal) return Val::dense(rw);
    return Val::dense(lw && *lw != 1 ? lw : rw && *rw != 1 ? rw : std::nullopt);
  }
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

/// The name of the param left of '@' (productParam found it).
static const std::string &productParamName(const Expr &lhs) {
  return as<NameExpr>(lhs.kind == ExprKind::Call ? *as<CallExpr>(lhs).args[0] : lhs).name;
}

const CellWalk::Symbol *CellWalk::productParam(const Expr &lhs) {
  const auto *c = lhs.kind == ExprKind::Call ? &as<CallExpr>(lhs) : nullptr;
  const Builtin *builtin = c ? findBuiltin(c->callee.name) : nullptr;
  if (!builtin || builtin->kind != BuiltinKind::Dropout) return matrixParam(lhs, "the left operand of '@'");
  if (c->args.size() != 2) {
    error(c->callee.range, fmt::format("dropout() takes 2 arguments (a param and a probability), but {} {} given",
                                       c->args.size(), c->args.size() == 1 ? "was" : "were"));
    return nullptr;
  }
  if (!c->keywordArgs.empty()) {
    error(c->keywordArgs.front().name.range, "dropout() of a matrix param draws one mask per call (DropConnect); it "
                                             "takes no keyword arguments");
    return nullptr;
  }
  const Symbol *w = matrixParam(*c->args[0], "the first argument of dropout() left of '@'");
  ProbabilityValue p = evalProbability(*c->args[1], scope_, ctx_.diags, "the p of dropout()");
  return p.error ? nullptr : w;
}

Val CellWalk::binary(const BinaryExpr &b) {
  if (b.op == '@') {
    const Symbol *w = productParam(*b.lhs);
    Val x = dense(*b.rhs);
    if (!w || x.bad) return Val::error();
    auto rows = w->shape[0], cols = w->shape[1];
    if (cols && x.type.width && *cols != *x.type.width) {
      error(b.opRange, fmt::format("width mismatch in '@': {} is [{}, {}] and needs a vector {} wide, but the right "
                                   "operand is {} wide", quoted(productParamName(*b.lhs)), *rows, *cols, *cols,
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
  if (builtin->kind == BuiltinKind::Dropout && !dropoutKeywords(c)) return Val::error();
  if (!c.keywordArgs.empty() && builtin->kind != BuiltinKind::Dropout) {
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
  case BuiltinKind::Dropout: {
    Val x = dense(*c.args[0]);
    ProbabilityValue p = evalProbability(*c.args[1], scope_, ctx_.diags, "the p of dropout()");
    return p.error ? Val::error() : x;
  }
  case BuiltinKind::Zoneout: {
    Val fresh = dense(*c.args[0]);
    Val old = dense(*c.args[1]);
    ProbabilityValue p = evalProbability(*c.args[2], scope_, ctx_.diags, "the p of zoneout()");
    Val v = elementwise(fresh, old, c.callee.range, "zoneout()");
    return p.error ? Val::error() : v;
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

bool CellWalk::dropoutKeywords(const CallExpr &c) {
  for (const KeywordArg &kw : c.keywordArgs) {
    const bool isName = kw.value->kind == ExprKind::Name && !as<NameExpr>(*kw.value).hasOffset();
    const std::string value = isName ? as<NameExpr>(*kw.value).name : "";
    if (kw.name.name != "per" || c.keywordArgs.size() > 1) {
      error(kw.name.range, "dropout() takes one keyword argument: per = step (a mask per step, the default) or per = "
                           "sequence (one mask per sequence for all steps)");
      return false;
    }
    if (value != "step" && value != "sequence") {
      error(kw.value->range, "per = step or per = sequence: a mask per step, or one per sequence for all steps");
      return false;
    }
  }
  return true;
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

} // namespace rnnc::sema
