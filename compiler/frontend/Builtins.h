// The builtin functions of the language, listed once: name, arity, what kind
// of typing rule applies and the graph op a call lowers to. The pointwise
// functions come from the op table (ir/Pointwise.cpp). Sema checks calls
// against this list; later the lowering to the graph IR switches over the kinds.
#pragma once

#include "ir/Graph.h"

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
  Dropout,       // dropout(x, p[, per = step | sequence]): x through a random mask (keep ops)
  Zoneout,       // zoneout(new, old, p): each unit keeps old with probability p
};

struct Builtin {
  const char *name;
  BuiltinKind kind;
  unsigned minArgs, maxArgs; // maxArgs 0: no limit
  Op op;                     // what a call lowers to (split: slices)
};

/// The builtin called `name`, or nullptr.
const Builtin *findBuiltin(const std::string &name);
std::vector<std::string> builtinNames();

} // namespace rnnc
