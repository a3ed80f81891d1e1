#include "codegen/Tangent.h"

#include "ir/Pointwise.h"
#include "support/Crash.h"

#include <fmt/format.h>

namespace rnnc::codegen {

namespace {

/// `dx * factor`, with `real(1)` tangents folded away.
std::string times(const std::string &dx, const std::string &factor) {
  if (dx == "real(1)") return factor;
  return fmt::format("{} * {}", dx, factor);
}

} // namespace

std::string tangentExpr(Op op, const std::vector<std::string> &x, const std::vector<std::string> &dx, const std::string &y,
                        const std::function<std::string(const char *)> &math) {
  bool any = false;
  for (const std::string &d : dx) any |= !d.empty();
  if (!any) return "";
  switch (op) {
  case Op::Add: {
    std::string s;
    for (const std::string &d : dx)
      if (!d.empty()) s += (s.empty() ? "" : " + ") + d;
    return s;
  }
  case Op::Sub:
    if (dx[1].empty()) return dx[0];
    return dx[0].empty() ? "-" + dx[1] : dx[0] + " - " + dx[1];
  case Op::Neg: return "-" + dx[0];
  case Op::Mul: { // product rule
    std::string s;
    for (size_t i = 0; i < x.size(); ++i) {
      if (dx[i].empty()) continue;
      std::string others;
      for (size_t j = 0; j < x.size(); ++j)
        if (j != i) others += (others.empty() ? "" : " * ") + x[j];
      s += (s.empty() ? "" : " + ") + (others.empty() ? dx[i] : times(dx[i], others));
    }
    return s;
  }
  case Op::Div: // (dx0 - y dx1) / x1
    if (dx[1].empty()) return fmt::format("{} / {}", dx[0], x[1]);
    if (dx[0].empty()) return fmt::format("-({}) / {}", times(dx[1], y), x[1]);
    return fmt::format("({} - {}) / {}", dx[0], times(dx[1], y), x[1]);
#include "ir/TableOpCases.def"
    return pointwiseRule(op)->tangent(TangentContext{x, dx, y, math});
  case Op::Input:
  case Op::Param:
  case Op::Const:
  case Op::Keep:
  case Op::Active:
  case Op::Sum:
  case Op::Mean:
  case Op::CrossEntropy:
  case Op::Mse:
  case Op::MatMul:
  case Op::Slice:
  case Op::Concat:
  case Op::Embed:
  case Op::SoftmaxMinusOneHot:
  case Op::Pad:
  case Op::Broadcast:
  case Op::MatMulT:
  case Op::GradMatrix:
  case Op::GradVector:
  case Op::GradEmbed: break; // not a scalar op of a scan's step
  }
  RNNC_UNREACHABLE(std::string("no tangent for ") + opMnemonic(op));
}

} // namespace rnnc::codegen
