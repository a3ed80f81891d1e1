// Sizes: the compile-time integers of the language (`4*H`, `V`, `H/2`). A size
// is an expression of integer literals, dims, + - * / and parentheses; this file
// evaluates one against the dims in scope, exactly, with overflow checked.
#pragma once

#include "frontend/AST.h"
#include "support/Diagnostics.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rnnc {

/// The dims a size may name, each with its value or nullopt where it is not
/// bound (a generic cell checked without its sizes).
struct DimScope {
  std::map<std::string, std::optional<int64_t>> dims;
  /// Whether a name is a value (port, param, variable) where the size is written.
  std::function<bool(const std::string &)> isValue;
};

/// A size's value: known, unknown (an unbound dim), or an error already reported.
struct SizeValue {
  std::optional<int64_t> value;
  bool error = false;
};

/// Evaluates a size that must be positive (a width, a shape, a count); `what`
/// names it in messages ("a param's size").
SizeValue evalSize(const Expr &e, const DimScope &scope, DiagnosticEngine &diags, const char *what);

/// A probability's value (dropout's and zoneout's p), or nullopt where a dim
/// is unbound; `error`: already reported.
struct ProbabilityValue {
  std::optional<double> value;
  bool error = false;
};

/// Evaluates a probability: numbers, dims, + - * / and parentheses, in
/// double; it must lie in [0, 1). `what` names it ("the p of dropout()").
ProbabilityValue evalProbability(const Expr &e, const DimScope &scope, DiagnosticEngine &diags, const char *what);

/// Adds to `out` every name a size expression mentions.
void collectSizeNames(const Expr &e, std::vector<const NameExpr *> &out);

} // namespace rnnc
