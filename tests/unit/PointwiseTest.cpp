// The op table (ir/Pointwise.cpp) checked row by row, so a new row is tested
// without a test of its own: each function the language names is found as a
// builtin, and its derivative (autodiff, run by the interpreter) matches
// central finite differences of its value.
#include "frontend/Builtins.h"
#include "interp/Interpreter.h"
#include "ir/Builder.h"
#include "ir/Pointwise.h"
#include "passes/Autodiff.h"
#include "support/Diagnostics.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace rnnc;

namespace {

const Op kAllOps[] = {
#define RNNC_OP(Name, mnemonic, Kind, Rule) Op::Name,
#include "ir/Ops.def"
};

// Points away from every kink and tie (all positive: log and sqrt are defined).
const std::vector<double> kX0 = {0.37, 1.3, 2.1}, kX1 = {1.1, 0.2, 2.5};

/// y = op(x0[, x1]) over three elements, one step; the gradients of
/// L = sum(y) with respect to each operand.
std::vector<std::vector<double>> gradients(Op op, int arity) {
  Graph g;
  g.name = "One";
  GraphBuilder b(g);
  std::vector<Edge> in;
  for (int k = 0; k < arity; ++k) in.push_back(Edge(b.input("x" + std::to_string(k), 3, false, {})));
  NodeId y = b.op(op, in, {});
  g.outputs.push_back({"y", Edge(y), {}});
  Objective objective;
  objective.outputs = {"y"};
  SourceManager sm;
  DiagnosticEngine diags(sm);
  REQUIRE(differentiate(g, objective, diags));
  InterpInputs inputs;
  inputs.T = inputs.B = 1;
  inputs.inputs["x0"] = kX0;
  if (arity > 1) inputs.inputs["x1"] = kX1;
  inputs.seeds["y"] = {1, 1, 1};
  InterpResult r = interpret(g, inputs);
  std::vector<std::vector<double>> out;
  for (int k = 0; k < arity; ++k) out.push_back(r.inputGrads.at("x" + std::to_string(k)));
  return out;
}

} // namespace

TEST_CASE("op table: every function the language names is a builtin of its arity", "[table]") {
  for (Op op : kAllOps) {
    const PointwiseRule *rule = pointwiseRule(op);
    if (!rule || !rule->builtin) continue;
    INFO(opMnemonic(op));
    const Builtin *b = findBuiltin(opMnemonic(op));
    REQUIRE(b);
    CHECK(b->op == op);
    CHECK(b->minArgs == static_cast<unsigned>(rule->arity));
    CHECK(opKind(op) == OpKind::Pointwise);
  }
}

TEST_CASE("op table: each derivative matches finite differences of the value", "[table]") {
  for (Op op : kAllOps) {
    const PointwiseRule *rule = pointwiseRule(op);
    if (!rule || !rule->derivative) continue;
    INFO(opMnemonic(op));
    std::vector<std::vector<double>> grads = gradients(op, rule->arity);
    for (int k = 0; k < rule->arity; ++k)
      for (size_t i = 0; i < kX0.size(); ++i) {
        const double eps = 1e-6;
        double lo[2] = {kX0[i], kX1[i]}, hi[2] = {kX0[i], kX1[i]};
        lo[k] -= eps;
        hi[k] += eps;
        double numeric = (rule->value(hi) - rule->value(lo)) / (2 * eps);
        CHECK(grads[k][i] == Approx(numeric).epsilon(1e-6).margin(1e-9));
      }
  }
}
