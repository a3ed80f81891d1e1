// The builtin functions of the language, listed once: name, arity and what kind
// of typing rule applies. Sema checks calls against this table; later the
// lowering to the graph IR switches over the same kinds.
#pragma once

#include <string>
#include <vector>

namespace rnnc {

enum class BuiltinKind {
  Pointwise,     // sigmoid(v) ...: same width
  PointwisePair, // min(a, b), max(a, b): elementwise, scalar broadcast
  Split,         // split(v, n): n values of width(v)/n
  Concat,        // concat(a, b, ...): widths add
  Reduce,        // sum(v), mean(v): a scalar
  Embed,         // embed(table, idx): a row of a matrix param
  CrossEntropy,  // cross_entropy(logits, idx): a scalar loss
  Mse,           // mse(pred, target): a scalar loss
};

struct Builtin {
  const char *name;
  BuiltinKind kind;
  unsigned minArgs, maxArgs; // maxArgs 0: no limit
};

/// The builtin called `name`, or nullptr.
const Builtin *findBuiltin(const std::string &name);
std::vector<std::string> builtinNames();

} // namespace rnnc
