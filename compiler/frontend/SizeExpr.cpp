#include "frontend/SizeExpr.h"

#include "frontend/Names.h"
#include "frontend/Sema.h"

#include <fmt/format.h>

namespace rnnc {

namespace {

SizeValue bad() { return {std::nullopt, true}; }

// Evaluates with int64 arithmetic; intermediate values may be negative.
SizeValue eval(const Expr &e, const DimScope &scope, DiagnosticEngine &diags) {
  switch (e.kind) {
  case ExprKind::Number: {
    const auto &n = as<NumberExpr>(e);
    if (!n.isInteger) {
      diags.error(e.range, fmt::format("a size must be an integer, not {}", quoted(n.spelling)));
      return bad();
    }
    if (n.intOverflow || n.intValue > static_cast<uint64_t>(kMaxSize)) {
      diags.error(e.range, fmt::format("size {} is too large (the limit is {})", quoted(n.spelling), kMaxSize));
      return bad();
    }
    return {static_cast<int64_t>(n.intValue), false};
  }
  case ExprKind::Name: {
    const auto &n = as<NameExpr>(e);
    if (n.hasOffset()) {
      diags.error(n.offsetRange, "a size cannot have a time offset");
      return bad();
    }
    if (auto it = scope.dims.find(n.name); it != scope.dims.end()) return {it->second, false};
    if (scope.isValue && scope.isValue(n.name)) {
      diags.error(e.range, fmt::format("{} is a value, not a dim: a size is built from dims and integers",
                                       quoted(n.name)));
      return bad();
    }
    std::vector<std::string> names;
    for (auto &[name, v] : scope.dims) names.push_back(name);
    std::string hint = closestName(n.name, names);
    diags.error(e.range, fmt::format("unknown dim {}{}", quoted(n.name),
                                     hint.empty() ? "" : fmt::format("; did you mean {}?", quoted(hint))));
    return bad();
  }
  case ExprKind::Unary: {
    SizeValue v = eval(*as<UnaryExpr>(e).operand, scope, diags);
    if (v.value) v.value = -*v.value;
    return v;
  }
  case ExprKind::Binary: {
    const auto &b = as<BinaryExpr>(e);
    if (b.op == '@') {
      diags.error(b.opRange, "'@' is not allowed in a size");
      return bad();
    }
    SizeValue l = eval(*b.lhs, scope, diags);
    SizeValue r = eval(*b.rhs, scope, diags);
    if (l.error || r.error) return bad();
    if (!l.value || !r.value) return {};
    int64_t x = *l.value, y = *r.value, out = 0;
    bool overflow = false;
    switch (b.op) {
    case '+': overflow = __builtin_add_overflow(x, y, &out); break;
    case '-': overflow = __builtin_sub_overflow(x, y, &out); break;
    case '*': overflow = __builtin_mul_overflow(x, y, &out); break;
    case '/':
      if (y == 0) {
        diags.error(b.opRange, "division by zero in a size");
        return bad();
      }
      if (x % y != 0) {
        diags.error(b.opRange, fmt::format("size {} / {} is not a whole number", x, y));
        return bad();
      }
      out = x / y;
      break;
    }
    if (overflow || out > kMaxSize || out < -kMaxSize) {
      diags.error(b.opRange, fmt::format("size is too large (the limit is {})", kMaxSize));
      return bad();
    }
    return {out, false};
  }
  case ExprKind::Error: return bad();
  case ExprKind::Call:
    diags.error(e.range, fmt::format("a size cannot call {}: it is built from dims and integers",
                                     quoted(as<CallExpr>(e).callee.name)));
    return bad();
  }
  return bad();
}

} // namespace

SizeValue evalSize(const Expr &e, const DimScope &scope, DiagnosticEngine &diags, const char *what) {
  SizeValue v = eval(e, scope, diags);
  if (v.value && *v.value <= 0) {
    diags.error(e.range, fmt::format("{} must be positive, but this one is {}", what, *v.value));
    return bad();
  }
  return v;
}

namespace {

ProbabilityValue badProbability() { return {std::nullopt, true}; }

ProbabilityValue evalReal(const Expr &e, const DimScope &scope, DiagnosticEngine &diags) {
  switch (e.kind) {
  case ExprKind::Number: return {as<NumberExpr>(e).value, false};
  case ExprKind::Name: {
    SizeValue v = eval(e, scope, diags); // a dim, or the error a size gives
    if (v.error) return badProbability();
    return {v.value ? std::optional<double>(static_cast<double>(*v.value)) : std::nullopt, false};
  }
  case ExprKind::Unary: {
    ProbabilityValue v = evalReal(*as<UnaryExpr>(e).operand, scope, diags);
    if (v.value) v.value = -*v.value;
    return v;
  }
  case ExprKind::Binary: {
    const auto &b = as<BinaryExpr>(e);
    if (b.op == '@') {
      diags.error(b.opRange, "'@' is not allowed in a probability: it is built from numbers and dims");
      return badProbability();
    }
    ProbabilityValue l = evalReal(*b.lhs, scope, diags);
    ProbabilityValue r = evalReal(*b.rhs, scope, diags);
    if (l.error || r.error) return badProbability();
    if (!l.value || !r.value) return {};
    double x = *l.value, y = *r.value;
    if (b.op == '/' && y == 0) {
      diags.error(b.opRange, "division by zero in a probability");
      return badProbability();
    }
    return {b.op == '+' ? x + y : b.op == '-' ? x - y : b.op == '*' ? x * y : x / y, false};
  }
  case ExprKind::Call:
    diags.error(e.range, fmt::format("a probability cannot call {}: it is built from numbers and dims",
                                     quoted(as<CallExpr>(e).callee.name)));
    return badProbability();
  case ExprKind::Error: return badProbability();
  }
  return badProbability();
}

} // namespace

ProbabilityValue evalProbability(const Expr &e, const DimScope &scope, DiagnosticEngine &diags, const char *what) {
  ProbabilityValue v = evalReal(e, scope, diags);
  if (v.value && !(*v.value >= 0 && *v.value < 1)) {
    diags.error(e.range, fmt::format("{} must be in [0, 1), but it is {}", what, *v.value));
    return badProbability();
  }
  return v;
}

void collectSizeNames(const Expr &e, std::vector<const NameExpr *> &out) {
  switch (e.kind) {
  case ExprKind::Name: out.push_back(&as<NameExpr>(e)); break;
  case ExprKind::Unary: collectSizeNames(*as<UnaryExpr>(e).operand, out); break;
  case ExprKind::Binary:
    collectSizeNames(*as<BinaryExpr>(e).lhs, out);
    collectSizeNames(*as<BinaryExpr>(e).rhs, out);
    break;
  case ExprKind::Call:
  case ExprKind::Number:
  case ExprKind::Error: break;
  }
}

} // namespace rnnc
