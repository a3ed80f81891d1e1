// The rows of ir/Pointwise.h, one case per Table op of ir/Ops.def (a missing
// row is a -Wswitch error). Values come from rnnc/scalar.h through ir/Scalar.h,
// so the interpreter, the constant folder and the generated code share one
// formula per function; derivatives build the same nodes autodiff always made.
#include "ir/Pointwise.h"

#include "ir/Scalar.h"

#include <fmt/format.h>

namespace rnnc {

std::string TangentContext::unary(const std::string &factor) const {
  if (dx[0] == "real(1)") return "(" + factor + ")";
  return fmt::format("({} * {})", dx[0], factor);
}

namespace {

using Args = std::vector<std::string>;

constexpr bool kBuiltin = true;  // `name(x)` in the language
constexpr bool kBackward = false; // made by autodiff only

/// `name(x0)` or `name(x0, x1)`.
std::string call(const std::string &name, const Args &x) {
  return name + "(" + x[0] + (x.size() > 1 ? ", " + x[1] : "") + ")";
}

} // namespace

const PointwiseRule *pointwiseRule(Op op) {
  switch (op) {
  case Op::Sigmoid: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return scalar::sigmoid(x[0]); },
        [](const Args &x, const MathName &) { return call("sigmoid", x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Mul, {c.d, c.y, c.oneMinus(c.y)})); },
        [](const TangentContext &t) { return t.unary(fmt::format("{} * (real(1) - {})", t.y, t.y)); }};
    return &r;
  }
  case Op::Tanh: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return std::tanh(x[0]); },
        [](const Args &x, const MathName &math) { return call(math("tanh"), x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Mul, {c.d, c.oneMinus(c.make(Op::Mul, {c.y, c.y}))})); },
        [](const TangentContext &t) { return t.unary(fmt::format("(real(1) - {} * {})", t.y, t.y)); }};
    return &r;
  }
  case Op::Relu: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return std::max(0.0, x[0]); },
        [](const Args &x, const MathName &math) { return math("max") + "(real(0), " + x[0] + ")"; },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Mul, {c.d, c.make(Op::Step, {c.x[0]})})); },
        [](const TangentContext &t) { return t.unary(fmt::format("step({})", t.x[0])); }};
    return &r;
  }
  case Op::Exp: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return std::exp(x[0]); },
        [](const Args &x, const MathName &math) { return call(math("exp"), x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Mul, {c.d, c.y})); },
        [](const TangentContext &t) { return t.unary(t.y); }};
    return &r;
  }
  case Op::Log: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return std::log(x[0]); },
        [](const Args &x, const MathName &math) { return call(math("log"), x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Div, {c.d, c.x[0]})); },
        [](const TangentContext &t) { return fmt::format("{} / {}", t.dx[0], t.x[0]); }};
    return &r;
  }
  case Op::Softplus: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return scalar::softplus(x[0]); },
        [](const Args &x, const MathName &) { return call("softplus", x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Mul, {c.d, c.make(Op::Sigmoid, {c.x[0]})})); },
        [](const TangentContext &t) { return t.unary(fmt::format("sigmoid({})", t.x[0])); }};
    return &r;
  }
  case Op::Sqrt: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return std::sqrt(x[0]); },
        [](const Args &x, const MathName &math) { return call(math("sqrt"), x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Div, {c.make(Op::Mul, {c.d, c.constant(0.5)}), c.y})); },
        [](const TangentContext &t) { return fmt::format("{} * real(0.5) / {}", t.dx[0], t.y); }};
    return &r;
  }
  case Op::Abs: {
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return std::fabs(x[0]); },
        [](const Args &x, const MathName &math) { return call(math("fabs"), x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Mul, {c.d, c.make(Op::Sign, {c.x[0]})})); },
        [](const TangentContext &t) { return t.unary(fmt::format("sign({})", t.x[0])); }};
    return &r;
  }
  case Op::HardSigmoid: { // torch.nn.Hardsigmoid: clamp(x / 6 + 1/2, 0, 1)
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return scalar::hard_sigmoid(x[0]); },
        [](const Args &x, const MathName &) { return call("hard_sigmoid", x); },
        [](const AdjointContext &c) { c.to(0, c.make(Op::Mul, {c.d, c.make(Op::HardSigmoidGrad, {c.x[0]})})); },
        [](const TangentContext &t) { return t.unary(fmt::format("hard_sigmoid_grad({})", t.x[0])); }};
    return &r;
  }
  case Op::Silu: { // x * sigmoid(x); derivative s + x s (1 - s)
    static const PointwiseRule r{
        1, kBuiltin, 1, [](const double *x) { return scalar::silu(x[0]); },
        [](const Args &x, const MathName &) { return call("silu", x); },
        [](const AdjointContext &c) {
          NodeId s = c.make(Op::Sigmoid, {c.x[0]});
          c.to(0, c.make(Op::Mul, {c.d, c.make(Op::Add, {s, c.make(Op::Mul, {c.x[0], s, c.oneMinus(s)})})}));
        },
        [](const TangentContext &t) {
          return t.unary(fmt::format("(sigmoid({0}) * (real(1) + {0} * (real(1) - sigmoid({0}))))", t.x[0]));
        }};
    return &r;
  }
  // min and max: the derivative goes to the operand taken (the first on a
  // tie), in reverse and forward mode alike.
  case Op::Min: {
    static const PointwiseRule r{
        2, kBuiltin, 1, [](const double *x) { return std::min(x[0], x[1]); },
        [](const Args &x, const MathName &math) { return call(math("min"), x); },
        [](const AdjointContext &c) {
          NodeId first = c.make(Op::Le, {c.x[0], c.x[1]});
          c.to(0, c.make(Op::Mul, {c.d, first}));
          c.to(1, c.make(Op::Mul, {c.d, c.oneMinus(first)}));
        },
        [](const TangentContext &t) {
          return fmt::format("({} <= {} ? {} : {})", t.x[0], t.x[1], t.dx[0].empty() ? "real(0)" : t.dx[0],
                             t.dx[1].empty() ? "real(0)" : t.dx[1]);
        }};
    return &r;
  }
  case Op::Max: {
    static const PointwiseRule r{
        2, kBuiltin, 1, [](const double *x) { return std::max(x[0], x[1]); },
        [](const Args &x, const MathName &math) { return call(math("max"), x); },
        [](const AdjointContext &c) {
          NodeId first = c.make(Op::Le, {c.x[1], c.x[0]});
          c.to(0, c.make(Op::Mul, {c.d, first}));
          c.to(1, c.make(Op::Mul, {c.d, c.oneMinus(first)}));
        },
        [](const TangentContext &t) {
          return fmt::format("({} <= {} ? {} : {})", t.x[1], t.x[0], t.dx[0].empty() ? "real(0)" : t.dx[0],
                             t.dx[1].empty() ? "real(0)" : t.dx[1]);
        }};
    return &r;
  }
  // Derivatives of the functions above, piecewise constant: no tangent.
  case Op::Step: { // relu'
    static const PointwiseRule r{
        1, kBackward, 1, [](const double *x) { return scalar::step(x[0]); },
        [](const Args &x, const MathName &) { return call("step", x); }, nullptr,
        [](const TangentContext &) { return std::string(); }};
    return &r;
  }
  case Op::Sign: { // abs'
    static const PointwiseRule r{
        1, kBackward, 1, [](const double *x) { return scalar::sign(x[0]); },
        [](const Args &x, const MathName &) { return call("sign", x); }, nullptr,
        [](const TangentContext &) { return std::string(); }};
    return &r;
  }
  case Op::Le: { // min', max'
    static const PointwiseRule r{
        2, kBackward, 1, [](const double *x) { return x[0] <= x[1] ? 1.0 : 0.0; },
        [](const Args &x, const MathName &) { return "(" + x[0] + " <= " + x[1] + " ? real(1) : real(0))"; }, nullptr,
        [](const TangentContext &) { return std::string(); }};
    return &r;
  }
  case Op::HardSigmoidGrad: {
    static const PointwiseRule r{
        1, kBackward, 1, [](const double *x) { return scalar::hard_sigmoid_grad(x[0]); },
        [](const Args &x, const MathName &) { return call("hard_sigmoid_grad", x); }, nullptr,
        [](const TangentContext &) { return std::string(); }};
    return &r;
  }
#include "ir/OwnOpCases.def"
    return nullptr;
  }
  return nullptr;
}

} // namespace rnnc
