#include "frontend/Loader.h"

#include "frontend/Names.h"
#include "frontend/Parser.h"
#include "support/Crash.h"

#include <climits>
#include <cstdlib>
#include <fmt/format.h>

namespace rnnc {

namespace {

std::string canonicalize(const std::string &path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf)) return buf;
  return path;
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return path.substr(0, slash + 1);
}

} // namespace

const SourceFile &Program::fileOf(const CellDecl &cell) const {
  for (const auto &f : files)
    if (f->file == cell.name.range.begin.file) return *f;
  RNNC_UNREACHABLE("cell from an unknown file");
}

bool Loader::load(const std::string &path, Program &program) {
  std::string error;
  auto id = sm_.loadFile(path, error);
  if (!id) {
    diags_.error(SourceRange(), fmt::format("cannot read '{}': {}", path, error));
    return false;
  }
  parse(*id, canonicalize(path), program);
  return true;
}

bool Loader::loadBuffer(const std::string &name, std::string text, Program &program) {
  uint32_t id = sm_.addBuffer(name, std::move(text));
  parse(id, name, program);
  return true;
}

SourceFile *Loader::parse(uint32_t fileId, std::string canonical, Program &program) {
  auto owned = std::make_unique<SourceFile>();
  SourceFile *sf = owned.get();
  sf->file = fileId;
  sf->canonicalPath = canonical;
  program.files.push_back(std::move(owned));
  byPath_[canonical] = sf;
  Parser parser(sm_, fileId, diags_);
  sf->module = parser.parseFile();
  resolveImports(*sf, program);
  buildScope(*sf);
  return sf;
}

void Loader::resolveImports(SourceFile &sf, Program &program) {
  for (const auto &d : sf.module.decls) {
    if (d->kind != DeclKind::Import) continue;
    const auto &imp = static_cast<const ImportDecl &>(*d);
    if (imp.path.empty()) {
      diags_.error(imp.pathRange, "import path is empty");
      continue;
    }
    if (imp.path.find('\0') != std::string::npos) {
      diags_.error(imp.pathRange, "import path contains a NUL byte");
      continue;
    }
    std::string path = imp.path[0] == '/' ? imp.path : directoryOf(sm_.name(sf.file)) + imp.path;
    std::string canonical = canonicalize(path);
    // A file still being loaded further up is a cycle.
    for (size_t i = 0; i < stack_.size() + 1; ++i) {
      const SourceFile *f = i < stack_.size() ? stack_[i].first : &sf;
      if (f->canonicalPath != canonical) continue;
      std::vector<std::pair<SourceRange, std::string>> notes;
      for (size_t j = i; j < stack_.size(); ++j) {
        const SourceFile *imported = j + 1 < stack_.size() ? stack_[j + 1].first : &sf;
        notes.push_back({stack_[j].second->pathRange,
                         fmt::format("which imports '{}' here", sm_.name(imported->file))});
      }
      diags_.error(imp.pathRange, fmt::format("import cycle: {} imports itself", quoted(imp.path)), std::move(notes));
      goto next;
    }
    if (auto it = byPath_.find(canonical); it != byPath_.end()) continue; // loaded already
    if (stack_.size() >= kMaxImportDepth || program.files.size() >= kMaxFiles) {
      diags_.error(imp.pathRange, fmt::format("imports are nested too deeply (more than {} files)",
                                              stack_.size() >= kMaxImportDepth ? kMaxImportDepth : kMaxFiles));
      continue;
    }
    {
      std::string error;
      auto id = sm_.loadFile(path, error);
      if (!id) {
        if (!imp.pathInError)
          diags_.error(imp.pathRange, fmt::format("cannot import {}: {}", quoted(imp.path), error));
        continue;
      }
      stack_.push_back({&sf, &imp});
      parse(*id, canonical, program);
      stack_.pop_back();
    }
  next:;
  }
}

// A file sees its own cells and those declared in the files it imports.
void Loader::buildScope(SourceFile &sf) {
  for (const auto &d : sf.module.decls) {
    if (d->kind == DeclKind::Dim) sf.dims.push_back(static_cast<const DimDecl *>(d.get()));
    if (d->kind != DeclKind::Cell) continue;
    const auto *cell = static_cast<const CellDecl *>(d.get());
    auto [it, fresh] = sf.cells.emplace(cell->name.name, cell);
    if (!fresh) {
      diags_.error(cell->name.range, fmt::format("redefinition of {} {}", cell->keyword(), quoted(cell->name.name)),
                   {{it->second->name.range, "first defined here"}});
      continue;
    }
    sf.ownCells.push_back(cell);
  }
  for (const auto &d : sf.module.decls) {
    if (d->kind != DeclKind::Import) continue;
    const auto &imp = static_cast<const ImportDecl &>(*d);
    std::string path = imp.path.empty() || imp.path[0] == '/' ? imp.path : directoryOf(sm_.name(sf.file)) + imp.path;
    auto it = byPath_.find(canonicalize(path));
    if (it == byPath_.end() || it->second == &sf) continue;
    for (const CellDecl *cell : it->second->ownCells) {
      auto [pos, fresh] = sf.cells.emplace(cell->name.name, cell);
      if (!fresh && pos->second != cell)
        diags_.error(imp.pathRange,
                     fmt::format("{} brings cell {}, which is already defined", quoted(imp.path), quoted(cell->name.name)),
                     {{pos->second->name.range, "the other definition is here"}, {cell->name.range, "the imported one is here"}});
    }
  }
}

} // namespace rnnc

