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
#include "frontend/CellWalk.h"

#include "frontend/Builtins.h"
#include "frontend/Names.h"

#include <fmt/format.h>
#include <functional>

namespace rnnc::sema {

/// Dims named in the sizes of a cell (port widths, param shapes, split counts,
/// keyword arguments), in order of first appearance.
std::vector<const NameExpr *> dimUses(const CellDecl &cell) {
  std::vector<const NameExpr *> uses;
  auto sizesIn = [&](const CallExpr &c) {
    if (c.callee.name == "split" && c.args.size() == 2) collectSizeNames(*c.args[1], uses);
    // dropout's and zoneout's p may name dims; dropout's keyword is not a size.
    if (c.callee.name == "dropout" && c.args.size() == 2) collectSizeNames(*c.args[1], uses);
    if (c.callee.name == "zoneout" && c.args.size() == 3) collectSizeNames(*c.args[2], uses);
    if (c.callee.name == "dropout") return;
    for (const auto &kw : c.keywordArgs) collectSizeNames(*kw.value, uses);
  };
  for (const auto &p : cell.ports) collectSizeNames(*p.size, uses);
  for (const auto &s : cell.body) {
    if (s->kind == StmtKind::Param)
      for (const auto &e : static_cast<const ParamDecl &>(*s).shape) collectSizeNames(*e, uses);
    else
      forEachCall(*static_cast<const AssignStmt &>(*s).value, sizesIn);
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
  for (const auto &p : cell_.ports) declare(p.name, {SymKind::Port, p.name.range, 0, {p.isIndex, std::nullopt}, true, false, {}});
  for (size_t i = 0; i < cell_.body.size(); ++i) {
    const Stmt &s = *cell_.body[i];
    if (s.kind == StmtKind::Param) {
      for (const auto &n : static_cast<const ParamDecl &>(s).names) declare(n, {SymKind::Param, n.range, i, {}, true, false, {}});
    } else {
      const auto &a = static_cast<const AssignStmt &>(s);
      std::set<std::string> seen;
      for (const auto &t : a.targets) {
        if (!seen.insert(t.name).second) {
          error(t.range, fmt::format("{} is assigned twice in one statement", quoted(t.name)));
          continue;
        }
        declare(t, {SymKind::Local, t.range, i, {}, false, false, {}});
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
  // Again while a pass learns widths that earlier reads needed.
  auto settle = [&] {
    for (int pass = 1; needsSecondPass_ && pass < kMaxPasses; ++pass) {
      needsSecondPass_ = false;
      widthsLearned_ = 0;
      evaluate(false);
      if (widthsLearned_ == 0) break;
    }
  };
  settle();
  if (needsSecondPass_ && complete_ && !ctx_.diags.hasErrors()) { // widths still unknown: the last resort
    broadcastFallback_ = true;
    settle();
  }
  checkOutputs();
  // A width still unknown with every dim known and no error so far (an error
  // leaves widths unknown too) comes from a value defined only through
  // offsets of itself.
  if (!complete_ || ctx_.diags.hasErrors()) return;
  for (const auto &st : cell_.body) {
    if (st->kind != StmtKind::Assign) continue;
    for (const auto &t : static_cast<const AssignStmt &>(*st).targets) {
      const Symbol &sym = symbols_.at(t.name);
      if (sym.decl == t.range && sym.typed && !sym.bad && !sym.type.width)
        error(t.range, fmt::format("cannot tell how wide {} is: it is computed only from time-offset reads of "
                                   "values whose width depends on it", quoted(t.name)));
    }
  }
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
    if (!sym.type.width && v.type.width && sym.typed) ++widthsLearned_;
    sym.type = v.type;
    sym.typed = true;
    sym.bad = v.bad;
    if (s.targets[k].name == "loss" && v.type.width && *v.type.width != 1 && !v.bad)
      error(s.targets[k].range, fmt::format("'loss' is the training objective and must be a scalar, but this "
                                            "value is {} wide", *v.type.width));
  }
  (void)first;
}

std::shared_ptr<const ElaboratedInstance> CellWalk::tree() const {
  auto t = std::make_shared<ElaboratedInstance>();
  t->cell = &cell_;
  t->prefix = prefix_;
  t->dims = scope_.dims;
  for (const auto &[name, sym] : symbols_)
    if (sym.kind != SymKind::Param) t->values[name] = sym.type;
  for (const auto &[stmt, inst] : instances_)
    if (inst.tree) t->children[stmt] = inst.tree;
  return t;
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

} // namespace rnnc::sema
