// Sema: gives a parsed program its meaning. It evaluates the file's dims (with
// -D overrides), then walks every cell and model: names declared once and
// defined before use (or read with a time offset), builtins and instantiations
// called correctly, and, wherever the dims are known, the width of every
// expression. Instances are elaborated with their dims bound and their params
// named after the instance (`h1.W_ih`).
#pragma once

#include "frontend/Loader.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rnnc {

/// Largest value a size may have.
constexpr int64_t kMaxSize = (int64_t{1} << 31) - 1;

/// The type of a value per time step and sequence.
struct ValueType {
  bool isIndex = false;         // an integer in [0, width) rather than a vector
  std::optional<int64_t> width; // unknown where the dims are not all known
};

/// A learnable tensor of an elaborated cell or model.
struct ElaboratedParam {
  std::string name;                        // full name: "h1.W_ih", or "W_ih" at the top
  std::vector<std::optional<int64_t>> shape;
  SourceRange decl;
};

/// A port or output of the cell or model being compiled.
struct ElaboratedPort {
  std::string name;
  ValueType type;
  SourceRange decl;
};

/// One walked cell: the dims it was walked with, the type of each of its
/// values, and the instances it makes. Lowering to the graph follows this tree.
struct ElaboratedInstance {
  const CellDecl *cell = nullptr;
  std::string prefix; // "" at the root, "h1." for instance h1
  std::map<std::string, std::optional<int64_t>> dims;
  std::map<std::string, ValueType> values; // ports and assigned names
  std::map<const AssignStmt *, std::shared_ptr<const ElaboratedInstance>> children;
};

/// A cell or model of the root file, walked with the file's dims.
struct Elaboration {
  const CellDecl *decl = nullptr;
  bool complete = false; // every dim known: widths are all checked
  std::vector<ElaboratedPort> inputs, outputs;
  std::vector<ElaboratedParam> params; // declaration order, instances inlined
  /// Unbound dims, when not complete.
  std::vector<std::string> unboundDims;
  std::shared_ptr<const ElaboratedInstance> tree;
};

/// A `-D NAME=VALUE` from the command line.
struct DimOverride {
  std::string name;
  int64_t value;
};

struct SemaResult {
  std::map<std::string, int64_t> dims; // the root file's dims after -D
  std::vector<Elaboration> entities;   // the root file's cells and models, in order
};

class Sema {
public:
  static constexpr unsigned kMaxInstanceDepth = 32;
  /// Instances elaborated in one run, all cells and models of the file together.
  static constexpr unsigned kMaxInstances = 10000;
  /// Statements and params walked in one run, instances inlined: bounds the
  /// time and memory a file can ask for by instantiating a big cell many times.
  static constexpr uint64_t kMaxElaboratedStatements = 1000000;

  Sema(const Program &program, DiagnosticEngine &diags) : program_(program), diags_(diags) {}

  SemaResult run(const std::vector<DimOverride> &overrides);

private:
  const Program &program_;
  DiagnosticEngine &diags_;
};

/// Parses the VALUE of `-D NAME=VALUE`: a positive integer no larger than
/// kMaxSize. Returns nullopt and sets `error` otherwise.
std::optional<DimOverride> parseDimOverride(const std::string &text, std::string &error);

} // namespace rnnc
