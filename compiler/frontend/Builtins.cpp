#include "frontend/Builtins.h"

namespace rnnc {

namespace {
const Builtin kBuiltins[] = {
    {"sigmoid", BuiltinKind::Pointwise, 1, 1},
    {"tanh", BuiltinKind::Pointwise, 1, 1},
    {"relu", BuiltinKind::Pointwise, 1, 1},
    {"exp", BuiltinKind::Pointwise, 1, 1},
    {"log", BuiltinKind::Pointwise, 1, 1},
    {"softplus", BuiltinKind::Pointwise, 1, 1},
    {"sqrt", BuiltinKind::Pointwise, 1, 1},
    {"abs", BuiltinKind::Pointwise, 1, 1},
    {"hard_sigmoid", BuiltinKind::Pointwise, 1, 1},
    {"silu", BuiltinKind::Pointwise, 1, 1},
    {"min", BuiltinKind::PointwisePair, 2, 2},
    {"max", BuiltinKind::PointwisePair, 2, 2},
    {"split", BuiltinKind::Split, 2, 2},
    {"concat", BuiltinKind::Concat, 1, 0},
    {"sum", BuiltinKind::Reduce, 1, 1},
    {"mean", BuiltinKind::Reduce, 1, 1},
    {"embed", BuiltinKind::Embed, 2, 2},
    {"cross_entropy", BuiltinKind::CrossEntropy, 2, 2},
    {"mse", BuiltinKind::Mse, 2, 2},
};
} // namespace

const Builtin *findBuiltin(const std::string &name) {
  for (const Builtin &b : kBuiltins)
    if (name == b.name) return &b;
  return nullptr;
}

std::vector<std::string> builtinNames() {
  std::vector<std::string> names;
  for (const Builtin &b : kBuiltins) names.push_back(b.name);
  return names;
}

} // namespace rnnc
