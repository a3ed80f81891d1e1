// Recurrence classes (analysis/Recurrence.h), golden: small cells written as
// .rnn text go through the whole pipeline, and each loop's kind (affine or
// nonlinear in its state), Jacobian shape and plan (scan, newton, sequential)
// is checked; backward loops too, on the graph autodiff makes.
#include "TestSupport.h"

#include "analysis/Recurrence.h"
#include "frontend/Lower.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"
#include "passes/Stats.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace rnnc;
using rnnc::test::errors;
using rnnc::test::frontend;
using rnnc::test::loweredGraph;

namespace {

struct Classified {
  std::unique_ptr<FrontendResult> fe;
  Compilation c;
  std::vector<RecurrenceClass> classes;

  /// The class of the loop whose states are named `names` (in id order).
  const RecurrenceClass &over(const std::vector<std::string> &names) const {
    for (const RecurrenceClass &r : classes) {
      std::vector<std::string> states;
      for (NodeId s : r.states) states.push_back(c.graph.node(s).name);
      if (states == names) return r;
    }
    FAIL("no loop over those states");
    return classes.front();
  }
  /// The classes of the loops of backward (autodiff) nodes.
  std::vector<RecurrenceClass> backwardLoops() const {
    std::vector<RecurrenceClass> out;
    for (const RecurrenceClass &r : classes)
      if (c.graph.node(c.time.loops[r.loop].nodes.front()).backward) out.push_back(r);
    return out;
  }
};

/// Frontend, lowering (and autodiff of every output when `backward`), the
/// optimizing pipeline, and the classes of the final graph.
std::unique_ptr<Classified> classified(const std::string &text, bool backward = false) {
  auto out = std::make_unique<Classified>();
  out->c.graph = loweredGraph(text, out->fe);
  if (backward) REQUIRE(differentiate(out->c.graph, defaultObjective(out->c.graph), *out->fe->diags));
  REQUIRE(runPipeline(out->c, *out->fe->diags));
  out->classes = classifyRecurrences(out->c.graph, out->c.time);
  REQUIRE(out->classes.size() == out->c.time.loops.size());
  return out;
}

/// The one loop of a cell with one recurrent component.
RecurrenceClass only(const std::string &text) {
  auto r = classified(text);
  INFO(text);
  REQUIRE(r->classes.size() == 1);
  return r->classes[0];
}

void checkClass(const RecurrenceClass &r, StateDependence kind, JacobianShape jacobian, TimeParallelPlan plan) {
  CHECK(r.kind == kind);
  CHECK(r.jacobian == jacobian);
  CHECK(r.plan() == plan);
}

const auto kAffine = StateDependence::Affine;
const auto kNonlinear = StateDependence::Nonlinear;
const auto kDiagonal = JacobianShape::Diagonal;
const auto kBlocks = JacobianShape::BlockDiagonal;
const auto kDense = JacobianShape::Dense;
const auto kScan = TimeParallelPlan::Scan;
const auto kNewton = TimeParallelPlan::Newton;
const auto kSequential = TimeParallelPlan::Sequential;

// SRU as first published (Lei et al. 2017): gates from x alone.
const std::string kSru2017 = "dim H = 8\n"
                             "cell SRU(x: [H]) -> h {\n"
                             "  param W: [3*H, H]\n"
                             "  param b_f, b_r: [H]\n"
                             "  xt, xf, xr = split(W @ x, 3)\n"
                             "  f = sigmoid(xf + b_f)\n"
                             "  c = f * c[t-1] + (1 - f) * xt\n"
                             "  r = sigmoid(xr + b_r)\n"
                             "  h = r * c + (1 - r) * x\n"
                             "}\n";

// SRU as in samples/sru.rnn (EMNLP 2018): the forget gate reads v_f * c[t-1].
const std::string kSru2018 = "dim H = 8\n"
                             "cell SRU(x: [H]) -> h {\n"
                             "  param W: [3*H, H]\n"
                             "  param v_f, v_r: [H]\n"
                             "  param b_f, b_r: [H]\n"
                             "  xt, xf, xr = split(W @ x, 3)\n"
                             "  f = sigmoid(xf + v_f * c[t-1] + b_f)\n"
                             "  c = f * c[t-1] + (1 - f) * xt\n"
                             "  r = sigmoid(xr + v_r * c[t-1] + b_r)\n"
                             "  h = r * c + (1 - r) * x\n"
                             "}\n";

const std::string kQrnn = "dim I = 4\ndim H = 8\n"
                          "cell QRNN(x: [I]) -> h {\n"
                          "  param W_0, W_1: [3*H, I]\n"
                          "  param b: [3*H]\n"
                          "  zz, zf, zo = split(W_0 @ x[t-1] + W_1 @ x + b, 3)\n"
                          "  f = sigmoid(zf)\n"
                          "  c = f * c[t-1] + (1 - f) * tanh(zz)\n"
                          "  h = sigmoid(zo) * c\n"
                          "}\n";

const std::string kMinGru = "dim I = 4\ndim H = 8\n"
                            "cell MinGRU(x: [I]) -> h {\n"
                            "  param W: [2*H, I]\n"
                            "  param b: [2*H]\n"
                            "  zx, hc = split(W @ x + b, 2)\n"
                            "  z = sigmoid(zx)\n"
                            "  h = (1 - z) * h[t-1] + z * hc\n"
                            "}\n";

const std::string kMinLstm = "dim I = 4\ndim H = 8\n"
                             "cell MinLSTM(x: [I]) -> h {\n"
                             "  param W: [3*H, I]\n"
                             "  param b: [3*H]\n"
                             "  fx, ix, hc = split(W @ x + b, 3)\n"
                             "  f = sigmoid(fx)\n"
                             "  i = sigmoid(ix)\n"
                             "  h = f / (f + i) * h[t-1] + i / (f + i) * hc\n"
                             "}\n";

/// IndRNN with `act` around its update ("" for the linear one).
std::string indRnn(const std::string &act) {
  return "dim I = 4\ndim H = 8\n"
         "cell IndRNN(x: [I]) -> h {\n"
         "  param W: [H, I]\n"
         "  param u, b: [H]\n"
         "  h = " + act + "(W @ x + u * h[t-1] + b)\n"
         "}\n";
}

/// A cell over h of width 8 whose update is `update` (x: [8], params a, b: [8]).
std::string cellWith(const std::string &update) {
  return "dim H = 8\n"
         "cell C(x: [H]) -> h {\n"
         "  param a, b: [H]\n"
         "  " + update + "\n"
         "}\n";
}

/// h = a * (h[t-1] rotated by one element) + x, at width n.
std::string rotated(int n) {
  std::string names, turned;
  for (int i = 0; i < n; ++i) {
    names += (i ? ", e" : "e") + std::to_string(i);
    turned += "e" + std::to_string((i + 1) % n) + (i + 1 < n ? ", " : "");
  }
  return "dim H = " + std::to_string(n) + "\ncell C(x: [H]) -> h {\n  param a: [H]\n  " + names + " = split(h[t-1], " +
         std::to_string(n) + ")\n  h = a * concat(" + turned + ") + x\n}\n";
}

} // namespace

TEST_CASE("recurrence: affine cells with a diagonal Jacobian are scan candidates", "[analysis][recurrence]") {
  for (const std::string &text : {kSru2017, kQrnn, kMinGru, kMinLstm, indRnn("")}) {
    INFO(text);
    RecurrenceClass r = only(text);
    checkClass(r, kAffine, kDiagonal, kScan);
    CHECK(r.blockSize == 1);
    CHECK(r.states.size() == 1);
  }
}

TEST_CASE("recurrence: the sample's SRU (v_f * c[t-1] in its gate) and IndRNN with relu are Newton candidates",
          "[analysis][recurrence]") {
  checkClass(only(kSru2018), kNonlinear, kDiagonal, kNewton);
  checkClass(only(indRnn("relu")), kNonlinear, kDiagonal, kNewton);
  checkClass(only(indRnn("tanh")), kNonlinear, kDiagonal, kNewton);
}

TEST_CASE("recurrence: a GEMM over the state makes LSTM, GRU and Elman dense and sequential", "[analysis][recurrence]") {
  auto lstm = classified(test::kLstmSource);
  REQUIRE(lstm->classes.size() == 1);
  checkClass(lstm->over({"c", "h"}), kNonlinear, kDense, kSequential);
  checkClass(only(test::kGruSource), kNonlinear, kDense, kSequential);
  checkClass(only(cellWith("param U: [H, H]\n  h = tanh(U @ h[t-1] + x)")), kNonlinear, kDense, kSequential);
  // Linear but dense: a scan would multiply H x H matrices; it stays sequential.
  checkClass(only(cellWith("param U: [H, H]\n  h = U @ h[t-1] + x")), kAffine, kDense, kSequential);
}

TEST_CASE("recurrence: lattice rules of single ops", "[analysis][recurrence]") {
  // Nonlinear of the state, in a gate or as a square.
  checkClass(only(cellWith("h = sigmoid(x + tanh(h[t-1])) * h[t-1] + x")), kNonlinear, kDiagonal, kNewton);
  checkClass(only(cellWith("h = a * h[t-1] * h[t-1] + x")), kNonlinear, kDiagonal, kNewton);
  checkClass(only(cellWith("h = max(h[t-1], x)")), kNonlinear, kDiagonal, kNewton);
  // Products and quotients with state-free factors stay affine; a state divisor does not.
  checkClass(only(cellWith("h = a * (x * h[t-1] - b) / (x + 2) + 1")), kAffine, kDiagonal, kScan);
  checkClass(only(cellWith("h = x / (a + h[t-1])")), kNonlinear, kDiagonal, kNewton);
  // A state-free scalar broadcast is fine; a state-dependent one couples every element.
  checkClass(only(cellWith("h = sum(x) * h[t-1] + x")), kAffine, kDiagonal, kScan);
  checkClass(only(cellWith("h = a * h[t-1] + sum(h[t-1])")), kAffine, kDense, kSequential);
  // Layer norm over the state: a reduction, nonlinear and dense.
  checkClass(only(cellWith("m = mean(h[t-1])\n  h = (h[t-1] - m) / sqrt(mean((h[t-1] - m) * (h[t-1] - m)) + 1e-5) + x")),
             kNonlinear, kDense, kSequential);
  // Slices and a concat that put every element back where it was: diagonal.
  checkClass(only(cellWith("p, q = split(h[t-1], 2)\n  ap, aq = split(a, 2)\n  h = concat(ap * p, q) + x")), kAffine,
             kDiagonal, kScan);
}

TEST_CASE("recurrence: two states coupled elementwise give blocks of diagonals", "[analysis][recurrence]") {
  auto r = classified("dim H = 8\n"
                      "cell Coupled(x: [H]) -> h {\n"
                      "  param a, b: [H]\n"
                      "  c = a * c[t-1] + n[t-1] + x\n"
                      "  n = b * n[t-1] - c[t-1]\n"
                      "  h = c + n\n"
                      "}\n");
  REQUIRE(r->classes.size() == 1);
  const RecurrenceClass &c = r->over({"c", "n"});
  checkClass(c, kAffine, kBlocks, kScan);
  CHECK(c.blockSize == 2);
  // The halves of one state swapped: element i reads element i + 4; pairs again.
  RecurrenceClass swap = only(cellWith("p, q = split(h[t-1], 2)\n  h = a * concat(q, p) + x"));
  checkClass(swap, kAffine, kBlocks, kScan);
  CHECK(swap.blockSize == 2);
  // Coupled through a tanh: nonlinear blocks, a Newton candidate.
  checkClass(only(cellWith("p, q = split(h[t-1], 2)\n  h = tanh(concat(p + q, p - q)) + x")), kNonlinear, kBlocks, kNewton);
  // A rotation by one element chains all the elements into one group: blocks while that group is
  // small (8 <= 16), dense beyond.
  RecurrenceClass rot = only(rotated(8));
  checkClass(rot, kAffine, kBlocks, kScan);
  CHECK(rot.blockSize == 8);
  checkClass(only(rotated(24)), kAffine, kDense, kSequential);
}

TEST_CASE("recurrence: a state read two steps back is a companion block", "[analysis][recurrence]") {
  RecurrenceClass r = only(cellWith("h = a * h[t-2] + x"));
  checkClass(r, kAffine, kBlocks, kScan);
  CHECK(r.blockSize == 2);
  checkClass(only(cellWith("h = a * h[t-1] + b * h[t-2] + x")), kAffine, kBlocks, kScan);
}

TEST_CASE("recurrence: a backward-running loop is classified the same way", "[analysis][recurrence]") {
  checkClass(only(cellWith("h = a * h[t+1] + x")), kAffine, kDiagonal, kScan);
}

TEST_CASE("recurrence: BPTT is affine in the adjoints, with the forward loop's Jacobian shape",
          "[analysis][recurrence]") {
  // IndRNN with relu: nonlinear forward (newton), but its backward loop is a reverse scan.
  auto ind = classified(indRnn("relu"), true);
  auto back = ind->backwardLoops();
  REQUIRE(back.size() == 1);
  checkClass(back[0], kAffine, kDiagonal, kScan);
  Stats s = computeStats(ind->c);
  CHECK(s.forward.newtonLoops == 1);
  CHECK(s.forward.scanLoops == 0);
  CHECK(s.backward.scanLoops == 1);
  CHECK(s.backward.newtonLoops == 0);
  // minGRU: a scan both ways.
  auto mingru = classified(kMinGru, true);
  REQUIRE(mingru->backwardLoops().size() == 1);
  checkClass(mingru->backwardLoops()[0], kAffine, kDiagonal, kScan);
  // LSTM: W_hh^T @ delta in the backward loop: dense, sequential.
  auto lstm = classified(test::kLstmSource, true);
  REQUIRE(lstm->backwardLoops().size() == 1);
  checkClass(lstm->backwardLoops()[0], kAffine, kDense, kSequential);
  Stats ls = computeStats(lstm->c);
  CHECK(ls.forward.scanLoops + ls.forward.newtonLoops + ls.backward.scanLoops + ls.backward.newtonLoops == 0);
}

TEST_CASE("recurrence: -O0 runs no analysis, so its stats count no candidates", "[analysis][recurrence]") {
  auto fe = frontend(kMinGru);
  REQUIRE(errors(*fe).empty());
  auto g = lowerToGraph(fe->sema.entities[0], *fe->diags);
  REQUIRE(g);
  Compilation c;
  c.graph = std::move(*g);
  c.optimize = false;
  REQUIRE(runPipeline(c, *fe->diags));
  Stats s = computeStats(c);
  CHECK(s.forward.loops == 1);
  CHECK(s.forward.scanLoops == 0);
  // The analysis itself still works on the unoptimized graph.
  auto classes = classifyRecurrences(c.graph, c.time);
  REQUIRE(classes.size() == 1);
  checkClass(classes[0], kAffine, kDiagonal, kScan);
}

TEST_CASE("recurrence: the summary line names the states, the Jacobian and the plan", "[analysis][recurrence]") {
  auto r = classified(kMinGru);
  CHECK(recurrenceSummary(r->c.graph, r->classes.at(0)) == "affine in h, diagonal Jacobian -> scan candidate");
  auto lstm = classified(test::kLstmSource);
  CHECK(recurrenceSummary(lstm->c.graph, lstm->classes.at(0)) == "nonlinear in c, h, dense Jacobian -> sequential");
  auto two = classified(cellWith("h = a * h[t-2] + x"));
  CHECK(recurrenceSummary(two->c.graph, two->classes.at(0)) ==
        "affine in h, block-diagonal (blocks of 2) Jacobian -> scan candidate");
}

TEST_CASE("recurrence: a long elementwise chain over one state stays diagonal", "[analysis][recurrence]") {
  // Each line reads the state through both operands: the element lists merge, they do not double.
  std::string body = "a0 = h[t-1]\n";
  for (int i = 1; i <= 12; ++i)
    body += "  a" + std::to_string(i) + " = a" + std::to_string(i - 1) + " * a" + std::to_string(i - 1) + " + a" +
            std::to_string(i - 1) + "\n";
  checkClass(only(cellWith(body + "  h = sigmoid(a12) + x")), kNonlinear, kDiagonal, kNewton);
}
