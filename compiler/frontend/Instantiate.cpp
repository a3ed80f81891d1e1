// Instances: `h1 = LSTM(x, H = 256)`. Checks the call against the cell, binds
// the cell's dims (keyword, then inference from argument widths, then the root
// file's dims), walks the cell with them and its params named `h1.`, and
// checks each argument's width against its port.
#include "frontend/CellWalk.h"

#include "frontend/Builtins.h"
#include "frontend/Names.h"

#include <fmt/format.h>
#include <functional>

namespace rnnc::sema {

namespace {

std::string describeWidth(const ValueType &t) {
  if (t.isIndex) return fmt::format("index[{}]", *t.width);
  return fmt::format("{} wide", *t.width);
}

} // namespace

// ----- instances -----

InstanceResult CellWalk::instantiate(const CallExpr &c, const AssignStmt &s) {
  const CellDecl &callee = *ctx_.program.fileOf(cell_).cells.at(c.callee.name);
  InstanceResult bad{std::vector<Val>(std::max<size_t>(s.targets.size(), 1), Val::error()), {}, nullptr, true};
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
  InstanceResult result{{}, inner.params(), inner.tree(), argsKnown};
  for (const ValueType &t : inner.outputTypes()) result.outputs.push_back({t, false});
  return result;
}

} // namespace rnnc::sema
