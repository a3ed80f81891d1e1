// Loader: reads the file being compiled and, transitively, every file it
// imports, parsing each once. It resolves import paths (relative to the
// importing file), refuses missing files, directories and import cycles at the
// import line, and gives each file its scope of visible cells.
#pragma once

#include "frontend/AST.h"
#include "support/Diagnostics.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rnnc {

/// One parsed file and the cells it can see.
struct SourceFile {
  uint32_t file = 0;
  std::string canonicalPath;
  Module module;
  /// Cells visible in this file: its own and those of the files it imports.
  std::map<std::string, const CellDecl *> cells;
  std::vector<const CellDecl *> ownCells;
  std::vector<const DimDecl *> dims;
};

/// Every file of one compilation; the first is the root (the file being compiled).
struct Program {
  std::vector<std::unique_ptr<SourceFile>> files;
  const SourceFile &root() const { return *files.front(); }
  /// The file a cell was declared in.
  const SourceFile &fileOf(const CellDecl &cell) const;
};

class Loader {
public:
  static constexpr unsigned kMaxImportDepth = 64;
  static constexpr unsigned kMaxFiles = 1024;

  Loader(SourceManager &sm, DiagnosticEngine &diags) : sm_(sm), diags_(diags) {}

  /// Loads `path` and its imports. Returns false (after reporting) when the root
  /// file itself cannot be read; errors inside files are reported and loading
  /// goes on.
  bool load(const std::string &path, Program &program);
  /// The same, for text already in memory (tests); imports resolve against `dir`.
  bool loadBuffer(const std::string &name, std::string text, Program &program);

private:
  SourceFile *parse(uint32_t fileId, std::string canonical, Program &program);
  void resolveImports(SourceFile &sf, Program &program);
  void buildScope(SourceFile &sf);

  SourceManager &sm_;
  DiagnosticEngine &diags_;
  std::map<std::string, SourceFile *> byPath_;
  std::vector<std::pair<SourceFile *, const ImportDecl *>> stack_; // files being loaded
};

} // namespace rnnc
