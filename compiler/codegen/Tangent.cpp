#include "codegen/Tangent.h"

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
  auto unary = [&](const std::string &factor) { return "(" + times(dx[0], factor) + ")"; };
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
  case Op::Sigmoid: return unary(fmt::format("{} * (real(1) - {})", y, y));
  case Op::Tanh: return unary(fmt::format("(real(1) - {} * {})", y, y));
  case Op::Relu: return unary(fmt::format("step({})", x[0]));
  case Op::Exp: return unary(y);
  case Op::Log: return fmt::format("{} / {}", dx[0], x[0]);
  case Op::Softplus: return unary(fmt::format("sigmoid({})", x[0]));
  case Op::Sqrt: return fmt::format("{} * real(0.5) / {}", dx[0], y);
  case Op::Abs: return unary(fmt::format("sign({})", x[0]));
  case Op::HardSigmoid: return unary(fmt::format("hard_sigmoid_grad({})", x[0]));
  case Op::Silu:
    return unary(fmt::format("(sigmoid({0}) * (real(1) + {0} * (real(1) - sigmoid({0}))))", x[0]));
  case Op::Min: // the derivative follows the operand taken (the first on a tie), as in reverse mode
  case Op::Max: {
    std::string first = op == Op::Min ? fmt::format("{} <= {}", x[0], x[1]) : fmt::format("{} <= {}", x[1], x[0]);
    return fmt::format("({} ? {} : {})", first, dx[0].empty() ? "real(0)" : dx[0], dx[1].empty() ? "real(0)" : dx[1]);
  }
  case Op::Step:
  case Op::Sign:
  case Op::Le:
  case Op::HardSigmoidGrad: return ""; // piecewise constant
  default: break;
  }
  (void)math;
  RNNC_UNREACHABLE(std::string("no tangent for ") + opMnemonic(op));
}

} // namespace rnnc::codegen
