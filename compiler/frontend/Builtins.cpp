#include "frontend/Builtins.h"

#include "ir/Pointwise.h"

namespace rnnc {

namespace {

/// Adds `op` if it is a function of the table (ir/Pointwise.cpp) that the
/// language names.
void addFunction(std::vector<Builtin> &all, Op op, const char *name) {
  const PointwiseRule *rule = pointwiseRule(op);
  if (!rule || !rule->builtin) return;
  auto arity = static_cast<unsigned>(rule->arity);
  all.push_back({name, arity == 1 ? BuiltinKind::Pointwise : BuiltinKind::PointwisePair, arity, arity, op});
}

std::vector<Builtin> makeBuiltins() {
  std::vector<Builtin> all;
  // The table's functions, in ir/Ops.def's order, named by their mnemonics.
#define RNNC_OP(Name, mnemonic, Kind, Rule) addFunction(all, Op::Name, mnemonic);
#include "ir/Ops.def"
  const Builtin others[] = {
      {"split", BuiltinKind::Split, 2, 2, Op::Slice},
      {"concat", BuiltinKind::Concat, 1, 0, Op::Concat},
      {"sum", BuiltinKind::Reduce, 1, 1, Op::Sum},
      {"mean", BuiltinKind::Reduce, 1, 1, Op::Mean},
      {"embed", BuiltinKind::Embed, 2, 2, Op::Embed},
      {"cross_entropy", BuiltinKind::CrossEntropy, 2, 2, Op::CrossEntropy},
      {"mse", BuiltinKind::Mse, 2, 2, Op::Mse},
      {"dropout", BuiltinKind::Dropout, 2, 2, Op::Keep},
      {"zoneout", BuiltinKind::Zoneout, 3, 3, Op::Keep},
  };
  all.insert(all.end(), std::begin(others), std::end(others));
  return all;
}

const std::vector<Builtin> &builtins() {
  static const std::vector<Builtin> all = makeBuiltins();
  return all;
}

} // namespace

const Builtin *findBuiltin(const std::string &name) {
  for (const Builtin &b : builtins())
    if (name == b.name) return &b;
  return nullptr;
}

std::vector<std::string> builtinNames() {
  std::vector<std::string> names;
  for (const Builtin &b : builtins()) names.push_back(b.name);
  return names;
}

} // namespace rnnc
