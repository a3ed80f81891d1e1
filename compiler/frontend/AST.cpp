#include "frontend/AST.h"

namespace rnnc {

void forEachCall(const Expr &e, const std::function<void(const CallExpr &)> &fn) {
  switch (e.kind) {
  case ExprKind::Unary: forEachCall(*as<UnaryExpr>(e).operand, fn); break;
  case ExprKind::Binary:
    forEachCall(*as<BinaryExpr>(e).lhs, fn);
    forEachCall(*as<BinaryExpr>(e).rhs, fn);
    break;
  case ExprKind::Call: {
    const auto &c = as<CallExpr>(e);
    fn(c);
    for (const auto &a : c.args) forEachCall(*a, fn);
    break;
  }
  case ExprKind::Number:
  case ExprKind::Name:
  case ExprKind::Error: break;
  }
}

} // namespace rnnc
