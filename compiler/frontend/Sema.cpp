// Sema::run: the root file's dims (with -D), then a walk of every cell and
// model that is a root, then of every cell no walk reached.
#include "frontend/CellWalk.h"

#include "frontend/Builtins.h"
#include "frontend/Names.h"

#include <fmt/format.h>
#include <functional>

namespace rnnc {

using namespace sema;

namespace {

/// The names of the cells that some cell or model of `file` instantiates
/// (one pass over the file).
std::set<std::string> instantiatedNames(const SourceFile &file) {
  std::set<std::string> names;
  for (const CellDecl *cell : file.ownCells)
    for (const auto &s : cell->body)
      if (s->kind == StmtKind::Assign)
        forEachCall(*static_cast<const AssignStmt &>(*s).value, [&](const CallExpr &c) {
          if (!findBuiltin(c.callee.name)) names.insert(c.callee.name);
        });
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
    elab.tree = walk.tree();
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
