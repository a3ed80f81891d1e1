// The passes between the lowered graph and code generation, on small cells
// written as .rnn text: the frontend runs on the text, the root is lowered, and
// either the whole pipeline runs (runPipeline) or the passes are called one by
// one. Each test names the contract from the pass's header it checks.
#include "TestSupport.h"

#include "frontend/Lower.h"
#include "ir/Verifier.h"
#include "passes/Canonicalize.h"
#include "passes/ClassifyTime.h"
#include "passes/FusePointwise.h"
#include "passes/HoistTimeParallel.h"
#include "passes/Pipeline.h"
#include "passes/Schedule.h"
#include "passes/StackGemms.h"
#include "passes/Stats.h"

#include <catch2/catch.hpp>
#include <map>
#include <fmt/format.h>

#include <algorithm>
#include <set>

using namespace rnnc;
using rnnc::test::errors;
using rnnc::test::frontend;
using rnnc::test::loweredGraph;

namespace {

/// The frontend result (which owns the source text and diagnostics the graph
/// points into) and what was made of its one root.
struct Compiled {
  std::unique_ptr<FrontendResult> fe;
  Compilation c;
  size_t loweredLive = 0; // live nodes right after lowering
  bool ok = false;
  Graph &g() { return c.graph; }
};

/// Frontend and lowering only (c.graph is the lowered graph).
std::unique_ptr<Compiled> lowered(const std::string &text) {
  auto out = std::make_unique<Compiled>();
  out->c.graph = loweredGraph(text, out->fe);
  out->loweredLive = out->c.graph.liveCount();
  return out;
}

/// Frontend, lowering and the whole pipeline (optimize false: -O0).
std::unique_ptr<Compiled> compiled(const std::string &text, bool optimize = true) {
  auto out = lowered(text);
  out->c.optimize = optimize;
  out->ok = runPipeline(out->c, *out->fe->diags);
  REQUIRE(out->ok);
  REQUIRE(verifyGraph(out->c.graph) == "");
  return out;
}

/// The live node the user named `name` (a root-level name, or `h1.h` in an instance).
NodeId named(const Graph &g, const std::string &name) {
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead && g.node(id).name == name) return id;
  FAIL("no live node named " << name);
  return kNoNode;
}

/// The live MatMul nodes whose params include `param`.
std::vector<NodeId> productsOf(const Graph &g, const std::string &param) {
  std::vector<NodeId> out;
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node &n = g.node(id);
    if (!n.dead && n.op == Op::MatMul && std::find(n.params.begin(), n.params.end(), param) != n.params.end())
      out.push_back(id);
  }
  return out;
}

NodeId productOf(const Graph &g, const std::string &param) {
  auto p = productsOf(g, param);
  REQUIRE(p.size() == 1);
  return p[0];
}

std::vector<NodeId> liveOfOp(const Graph &g, Op op) {
  std::vector<NodeId> out;
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead && g.node(id).op == op) out.push_back(id);
  return out;
}

/// "gemm" / "kernel" for each launch of a stage.
std::vector<std::string> launchKinds(const Stage &s) {
  std::vector<std::string> out;
  for (const Kernel &k : s.kernels) out.push_back(k.gemm ? "gemm" : "kernel");
  return out;
}

std::vector<const Stage *> loopStages(const Compilation &c) {
  std::vector<const Stage *> out;
  for (const Stage &s : c.schedule.stages)
    if (s.loop) out.push_back(&s);
  return out;
}

const std::string kDims = "dim I = 6\ndim H = 8\n";

const std::string kLstm = test::kLstmSource;

const std::string kMgu = kDims + "cell MGU(x: [I]) -> h {\n"
                                 "  param W_f: [H, I]\n"
                                 "  param U_f: [H, H]\n"
                                 "  param b_f: [H]\n"
                                 "  param W_h: [H, I]\n"
                                 "  param U_h: [H, H]\n"
                                 "  param b_h: [H]\n"
                                 "  f = sigmoid(W_f @ x + U_f @ h[t-1] + b_f)\n"
                                 "  n = tanh(W_h @ x + U_h @ (f * h[t-1]) + b_h)\n"
                                 "  h = (1 - f) * h[t-1] + f * n\n"
                                 "}\n";

const std::string kElman = "cell Elman(x: [D]) -> h {\n"
                           "  param W: [H, D]\n"
                           "  param U: [H, H]\n"
                           "  param b: [H]\n"
                           "  h = tanh(W @ x + U @ h[t-1] + b)\n"
                           "}\n";

} // namespace

// ---------------------------------------------------------------------------
// classify-time (TimeClasses.h): SCCs over all edges; one loop per recurrent
// component; direction from the sign of its delays; levels.

TEST_CASE("classify: feedback across two layers is one loop holding both", "[passes][classify]") {
  auto r = compiled(kDims + "cell Two(x: [I]) -> h2 {\n"
                            "  param W1: [H, I]\n"
                            "  param U1, F, W2, U2: [H, H]\n"
                            "  h1 = tanh(W1 @ x + U1 @ h1[t-1] + F @ h2[t-1])\n"
                            "  h2 = tanh(W2 @ h1 + U2 @ h2[t-1])\n"
                            "}\n");
  const TimeClasses &tc = r->c.time;
  REQUIRE(tc.loops.size() == 1);
  CHECK(tc.loopOf[named(r->g(), "h1")] == 0);
  CHECK(tc.loopOf[named(r->g(), "h2")] == 0);
  CHECK(tc.loopOf[productOf(r->g(), "W2")] == 0); // layer 2's input product reads h1 at this step
  CHECK(tc.loopOf[productOf(r->g(), "W1")] == -1); // only x: time-parallel
  CHECK(tc.loops[0].direction == +1);
  CHECK_FALSE(tc.loops[0].mixed);
  CHECK(tc.loops[0].level == 1);
  CHECK(loopStages(r->c).size() == 1);
}

TEST_CASE("classify: top-down feedback between two instances is one loop", "[passes][classify]") {
  // As samples/feedback.rnn: layer 1 reads layer 2's previous output through a port.
  auto r = compiled(kDims + "cell Layer(x: [D], other: [K]) -> h {\n"
                            "  param W: [H, D]\n"
                            "  param U: [H, H]\n"
                            "  param V: [H, K]\n"
                            "  h = tanh(W @ x + U @ h[t-1] + V @ other)\n"
                            "}\n"
                            "model M(x: [I]) -> y {\n"
                            "  h1 = Layer(x, h2[t-1])\n"
                            "  h2 = Layer(h1, h1[t-1])\n"
                            "  y = h2\n"
                            "}\n");
  const TimeClasses &tc = r->c.time;
  REQUIRE(tc.loops.size() == 1);
  CHECK(tc.loopOf[named(r->g(), "h1.h")] == 0);
  CHECK(tc.loopOf[named(r->g(), "h2.h")] == 0);
  CHECK(tc.loopOf[productOf(r->g(), "h1.V")] == 0);
  CHECK(tc.loopOf[productOf(r->g(), "h1.W")] == -1);
  CHECK(tc.loops[0].level == 1);
}

TEST_CASE("classify: a delay of 2 is still one loop", "[passes][classify]") {
  auto r = compiled(kDims + "cell D2(x: [I]) -> h {\n"
                            "  param W: [H, I]\n"
                            "  param U: [H, H]\n"
                            "  c = tanh(W @ x) * c[t-2] + h[t-1]\n"
                            "  h = tanh(U @ h[t-2] + c)\n"
                            "}\n");
  const TimeClasses &tc = r->c.time;
  REQUIRE(tc.loops.size() == 1);
  CHECK(tc.loopOf[named(r->g(), "h")] == 0);
  CHECK(tc.loopOf[named(r->g(), "c")] == 0);
  CHECK(tc.loopOf[productOf(r->g(), "U")] == 0);
  CHECK(tc.loopOf[productOf(r->g(), "W")] == -1);
  CHECK(tc.loops[0].direction == +1);
  // Only t-2: still a loop of its own.
  auto only2 = compiled(kDims + "cell D(x: [I]) -> h {\n"
                                "  param W: [H, I]\n"
                                "  param U: [H, H]\n"
                                "  h = tanh(W @ x + U @ h[t-2])\n"
                                "}\n");
  REQUIRE(only2->c.time.loops.size() == 1);
  CHECK(only2->c.time.loopOf[named(only2->g(), "h")] == 0);
  CHECK(only2->c.time.loops[0].direction == +1);
}

TEST_CASE("classify: gates nested in gates all stay in the loop", "[passes][classify]") {
  auto r = compiled(kDims + "cell Nest(x: [I]) -> h {\n"
                            "  param W1, W2, W3: [H, I]\n"
                            "  param U1, U2: [H, H]\n"
                            "  g1 = sigmoid(W1 @ x + U1 @ h[t-1])\n"
                            "  g2 = sigmoid(W2 @ x + g1 * (U2 @ h[t-1]))\n"
                            "  g3 = tanh(W3 @ x)\n"
                            "  h = g2 * (g1 * g3) + (1 - g2) * h[t-1]\n"
                            "}\n");
  const TimeClasses &tc = r->c.time;
  const Graph &g = r->g();
  REQUIRE(tc.loops.size() == 1);
  for (const char *n : {"g1", "g2", "h"}) {
    INFO(n);
    CHECK(tc.loopOf[named(g, n)] == 0);
  }
  CHECK(tc.loopOf[named(g, "g3")] == -1); // a gate of x alone: time-parallel
  CHECK(tc.loopOf[productOf(g, "U1")] == 0);
  CHECK(tc.loopOf[productOf(g, "U2")] == 0);
  for (const char *p : {"W1", "W2", "W3"}) {
    INFO(p);
    CHECK(tc.loopOf[productOf(g, p)] == -1);
  }
}

TEST_CASE("classify: MGU's product of a gated state stays in the loop", "[passes][classify]") {
  auto r = compiled(kMgu);
  const TimeClasses &tc = r->c.time;
  const Graph &g = r->g();
  REQUIRE(tc.loops.size() == 1);
  NodeId uh = productOf(g, "U_h");
  CHECK(tc.loopOf[uh] == 0);
  const Node &gated = g.node(g.node(uh).inputs[0].src); // f * h[t-1]
  CHECK(gated.op == Op::Mul);
  CHECK(g.node(uh).inputs[0].delay == 0);
  CHECK(tc.loopOf[g.node(uh).inputs[0].src] == 0);
  CHECK(tc.loopOf[productOf(g, "U_f")] == 0);
  CHECK(tc.loopOf[named(g, "f")] == 0);
  CHECK(tc.loopOf[named(g, "n")] == 0);
  // The two products of x were stacked, out of the loop.
  NodeId wx = productOf(g, "W_f");
  CHECK(wx == productOf(g, "W_h"));
  CHECK(tc.loopOf[wx] == -1);
}

TEST_CASE("classify: offsets only on inputs make no loop", "[passes][classify]") {
  auto r = compiled(kDims + "cell Conv(x: [I]) -> y {\n"
                            "  param A, B: [H, I]\n"
                            "  param u: [I]\n"
                            "  s = u * x[t-1] + x[t-2]\n"
                            "  y = tanh(A @ x + B @ s[t-1])\n"
                            "}\n");
  const TimeClasses &tc = r->c.time;
  CHECK(tc.loops.empty());
  for (NodeId id = 0; id < r->g().nodes.size(); ++id)
    if (!r->g().node(id).dead) {
      CHECK(tc.loopOf[id] == -1);
      CHECK(tc.level[id] == 0);
    }
  CHECK(loopStages(r->c).empty());
  CHECK(computeStats(r->c).forward.loops == 0);
}

TEST_CASE("classify: a backward cell runs backward in time", "[passes][classify]") {
  auto r = compiled(kDims + "cell Bwd(x: [I]) -> h {\n"
                            "  param W: [H, I]\n"
                            "  param U: [H, H]\n"
                            "  c = tanh(W @ x) + c[t+2]\n"
                            "  h = tanh(U @ h[t+1]) * c\n"
                            "}\n");
  const TimeClasses &tc = r->c.time;
  REQUIRE(tc.loops.size() == 2); // c and h: c feeds h, h does not feed c
  for (const auto &loop : tc.loops) {
    CHECK(loop.direction == -1);
    CHECK_FALSE(loop.mixed);
  }
  CHECK(tc.loops[tc.loopOf[named(r->g(), "c")]].level == 1);
  CHECK(tc.loops[tc.loopOf[named(r->g(), "h")]].level == 2);
  for (const Stage *s : loopStages(r->c)) CHECK(s->direction == -1);
}

TEST_CASE("classify: a component reading t-1 and t+1 is a user error", "[passes][classify]") {
  auto r = lowered(kDims + "cell Mixed(x: [I]) -> h {\n"
                           "  param U: [H, I]\n"
                           "  a = tanh(U @ x + h[t+1])\n"
                           "  h = a + h[t-1]\n"
                           "}\n");
  CHECK_FALSE(runPipeline(r->c, *r->fe->diags));
  auto errs = errors(*r->fe);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].find("reads both earlier steps") != std::string::npos);
  REQUIRE(r->c.time.loops.size() == 1);
  CHECK(r->c.time.loops[0].mixed);
}

TEST_CASE("classify: two stacked layers are loops of levels 1 and 2", "[passes][classify]") {
  auto r = compiled(kDims + kElman +
                    "model Stack(x: [I]) -> y {\n"
                    "  h1 = Elman(x)\n"
                    "  h2 = Elman(h1)\n"
                    "  param Wo: [3, H]\n"
                    "  y = Wo @ h2\n"
                    "}\n");
  const TimeClasses &tc = r->c.time;
  const Graph &g = r->g();
  REQUIRE(tc.loops.size() == 2);
  int l1 = tc.loopOf[named(g, "h1.h")], l2 = tc.loopOf[named(g, "h2.h")];
  REQUIRE(l1 >= 0);
  REQUIRE(l2 >= 0);
  CHECK(l1 != l2);
  CHECK(tc.loops[l1].level == 1);
  CHECK(tc.loops[l2].level == 2);
  CHECK(l1 < l2); // loops are numbered in dataflow order
  CHECK(tc.level[named(g, "h1.h")] == 1);
  CHECK(tc.level[named(g, "h2.h")] == 2);
  // Layer 2's input product reads layer 1's loop: time-parallel, between the loops.
  NodeId w2 = productOf(g, "h2.W");
  CHECK(tc.loopOf[w2] == -1);
  CHECK(tc.level[w2] == 1);
  CHECK(tc.level[productOf(g, "h1.W")] == 0);
  CHECK(tc.level[productOf(g, "Wo")] == 2);
  // Issue order: parallel 0, loop 1, parallel 1, loop 2, parallel 2.
  std::vector<std::pair<bool, int>> order;
  for (const Stage &s : r->c.schedule.stages) order.push_back({s.loop, s.level});
  CHECK(order == std::vector<std::pair<bool, int>>{{false, 0}, {true, 1}, {false, 1}, {true, 2}, {false, 2}});
}

// ---------------------------------------------------------------------------
// hoist-time-parallel: time-parallel terms of a recurrent sum move into one new
// time-parallel Add.

TEST_CASE("hoist: the LSTM sum splits into a hoisted add and a two-term loop add", "[passes][hoist]") {
  auto r = lowered(kLstm);
  Graph &g = r->g();
  REQUIRE(canonicalize(g));
  Compilation &c = r->c;
  DiagnosticEngine &diags = *r->fe->diags;
  REQUIRE(classifyTimePass(c, diags));
  size_t before = g.nodes.size();
  NodeId whh = productOf(g, "W_hh"), wih = productOf(g, "W_ih");
  // After canonicalize the gate sum is one 4-term add in the loop.
  std::vector<NodeId> adds;
  for (NodeId id : liveOfOp(g, Op::Add))
    if (g.node(id).inputs.size() == 4) adds.push_back(id);
  REQUIRE(adds.size() == 1);
  NodeId sum = adds[0];
  CHECK(c.time.recurrent(sum));
  REQUIRE(hoistTimeParallel(g, c.time));
  CHECK(verifyGraph(g) == "");
  REQUIRE(g.nodes.size() == before + 1); // one new node
  NodeId pre = static_cast<NodeId>(before);
  const Node &loopAdd = g.node(sum);
  REQUIRE(loopAdd.inputs.size() == 2);
  CHECK(loopAdd.inputs[0] == Edge{whh, 0});
  CHECK(loopAdd.inputs[1] == Edge{pre, 0});
  const Node &hoisted = g.node(pre);
  CHECK(hoisted.op == Op::Add);
  REQUIRE(hoisted.inputs.size() == 3);
  std::set<std::string> terms;
  for (Edge e : hoisted.inputs) {
    CHECK(e.delay == 0);
    const Node &in = g.node(e.src);
    terms.insert(in.op == Op::MatMul ? "matmul " + in.params[0] : in.op == Op::Param ? "param " + in.params[0] : "?");
  }
  CHECK(terms == std::set<std::string>{"matmul W_ih", "param b_ih", "param b_hh"});
  CHECK(hoisted.inputs[0].src == wih);
  CHECK(hoisted.locs == loopAdd.locs); // the new node keeps the sum's places
  c.time = classifyTime(g);
  CHECK_FALSE(c.time.recurrent(pre));
  CHECK(c.time.recurrent(sum));
  CHECK(c.time.level[pre] == 0);
  CHECK_FALSE(hoistTimeParallel(g, c.time)); // nothing left to hoist
}

TEST_CASE("hoist: nothing moves when only one term is time-parallel", "[passes][hoist]") {
  auto r = lowered(kDims + "cell E(x: [I]) -> h {\n"
                           "  param W: [H, I]\n"
                           "  param U: [H, H]\n"
                           "  param u: [H]\n"
                           "  h = tanh(W @ x + U @ h[t-1] + u * h[t-1])\n"
                           "}\n");
  Graph &g = r->g();
  canonicalize(g);
  Compilation &c = r->c;
  REQUIRE(classifyTimePass(c, *r->fe->diags));
  size_t before = g.nodes.size();
  CHECK_FALSE(hoistTimeParallel(g, c.time));
  CHECK(g.nodes.size() == before);
  // Through the whole pipeline: the loop still adds the input product itself.
  auto full = compiled(kDims + "cell E(x: [I]) -> h {\n"
                               "  param W: [H, I]\n"
                               "  param U: [H, H]\n"
                               "  param u: [H]\n"
                               "  h = tanh(W @ x + U @ h[t-1] + u * h[t-1])\n"
                               "}\n");
  NodeId wx = productOf(full->g(), "W");
  auto users = full->g().users();
  REQUIRE(users[wx].size() == 1);
  CHECK(full->c.time.recurrent(users[wx][0].first));
  CHECK(full->g().node(users[wx][0].first).inputs.size() == 3);
}

TEST_CASE("hoist: a sum with no recurrent term is not touched", "[passes][hoist]") {
  auto r = lowered(kDims + "cell P(x: [I]) -> y {\n"
                           "  param A, B: [H, I]\n"
                           "  param b: [H]\n"
                           "  y = A @ x + B @ x[t-1] + b\n"
                           "}\n");
  canonicalize(r->g());
  REQUIRE(classifyTimePass(r->c, *r->fe->diags));
  CHECK_FALSE(hoistTimeParallel(r->g(), r->c.time));
}

// ---------------------------------------------------------------------------
// stack-gemms: products sharing their operand (node and delay) and their stage
// become one GEMM with the params stacked by rows.

TEST_CASE("stack: three products of x become one GEMM over params in node order", "[passes][stack]") {
  // Declared A, B, C; the products are made in the order B, C, A.
  auto r = compiled("dim I = 5\n"
                    "cell S(x: [I]) -> y {\n"
                    "  param A: [2, I]\n"
                    "  param B: [3, I]\n"
                    "  param C: [4, I]\n"
                    "  b = tanh(B @ x)\n"
                    "  c = sigmoid(C @ x)\n"
                    "  a = A @ x\n"
                    "  y = concat(a, b, c)\n"
                    "}\n");
  const Graph &g = r->g();
  auto stacked = productsOf(g, "A");
  REQUIRE(stacked.size() == 1);
  const Node &mm = g.node(stacked[0]);
  CHECK(mm.params == std::vector<std::string>{"B", "C", "A"});
  CHECK(mm.width == 9);
  CHECK(mm.inputs[0].delay == 0);
  CHECK(g.node(mm.inputs[0].src).op == Op::Input);
  CHECK(liveOfOp(g, Op::MatMul).size() == 1);
  // Each old product is a slice at its rows: B at 0, C at 3, A at 3 + 4.
  std::map<std::string, std::pair<int64_t, int64_t>> slices; // user name -> (offset, width)
  auto users = g.users();
  for (auto [user, slot] : users[stacked[0]]) {
    const Node &s = g.node(user);
    REQUIRE(s.op == Op::Slice);
    std::string what = g.node(users[user].at(0).first).op == Op::Tanh      ? "B"
                       : g.node(users[user].at(0).first).op == Op::Sigmoid ? "C"
                                                                          : "A";
    slices[what] = {s.offset, s.width};
  }
  CHECK(slices["B"] == std::make_pair(int64_t{0}, int64_t{3}));
  CHECK(slices["C"] == std::make_pair(int64_t{3}, int64_t{4}));
  CHECK(slices["A"] == std::make_pair(int64_t{7}, int64_t{2}));
  CHECK(g.node(named(g, "a")).op == Op::Slice); // the slice keeps the user's name
  // The block is recorded on its first param.
  CHECK(g.param("B")->stackedWith == std::vector<std::string>{"B", "C", "A"});
  CHECK(g.param("A")->stackedWith.empty());
  CHECK(g.param("C")->stackedWith.empty());
  CHECK(computeStats(r->c).forward.hoistedGemms == 1);
}

TEST_CASE("stack: products of x and x[t-1] are not stacked", "[passes][stack]") {
  auto r = compiled(kDims + "cell S(x: [I]) -> y {\n"
                            "  param A, B: [H, I]\n"
                            "  y = A @ x + B @ x[t-1]\n"
                            "}\n");
  const Graph &g = r->g();
  CHECK(liveOfOp(g, Op::MatMul).size() == 2);
  CHECK(g.node(productOf(g, "A")).params.size() == 1);
  CHECK(g.node(productOf(g, "B")).params.size() == 1);
  CHECK(g.param("A")->stackedWith.empty());
  CHECK(g.param("B")->stackedWith.empty());
  // While two products of x[t-1] are.
  auto both = compiled(kDims + "cell S(x: [I]) -> y {\n"
                               "  param A, B: [H, I]\n"
                               "  y = (A @ x[t-1]) * (B @ x[t-1])\n"
                               "}\n");
  CHECK(liveOfOp(both->g(), Op::MatMul).size() == 1);
  CHECK(both->g().param("A")->stackedWith == std::vector<std::string>{"A", "B"});
}

TEST_CASE("stack: a product in the loop and one outside are not stacked", "[passes][stack]") {
  // U @ h[t-1] is in the loop; V @ h[t-1] only feeds the output: same operand
  // and delay, different stages.
  auto r = compiled(kDims + "cell S(x: [I]) -> y {\n"
                            "  param W: [H, I]\n"
                            "  param U, V: [H, H]\n"
                            "  h = tanh(W @ x + U @ h[t-1])\n"
                            "  y = V @ h[t-1]\n"
                            "}\n");
  const Graph &g = r->g();
  const TimeClasses &tc = r->c.time;
  NodeId u = productOf(g, "U"), v = productOf(g, "V");
  CHECK(u != v);
  CHECK(g.node(u).inputs[0] == g.node(v).inputs[0]);
  CHECK(tc.loopOf[u] == 0);
  CHECK(tc.loopOf[v] == -1);
  CHECK(g.param("U")->stackedWith.empty());
  CHECK(g.param("V")->stackedWith.empty());
}

TEST_CASE("stack: a param used twice is not stacked with itself", "[passes][stack]") {
  auto r = compiled(kDims + "cell S(x: [I]) -> y {\n"
                            "  param A: [H, I]\n"
                            "  y = tanh(A @ x) * (A @ x[t-1])\n"
                            "}\n");
  for (NodeId id : liveOfOp(r->g(), Op::MatMul)) CHECK(r->g().node(id).params.size() == 1);
}

// ---------------------------------------------------------------------------
// canonicalize: sub -> add + neg, n-ary sums and products, constants folded,
// duplicates merged, dead code removed.

TEST_CASE("canonicalize: subtraction becomes addition of a negation", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> y, z {\n"
                           "  a = tanh(x)\n"
                           "  y = a - sigmoid(x)\n"
                           "  z = -(-a)\n"
                           "}\n");
  Graph &g = r->g();
  REQUIRE(liveOfOp(g, Op::Sub).size() == 1);
  CHECK(canonicalize(g));
  CHECK(verifyGraph(g) == "");
  CHECK(liveOfOp(g, Op::Sub).empty());
  const Node &y = g.node(named(g, "y"));
  CHECK(y.op == Op::Add);
  REQUIRE(y.inputs.size() == 2);
  CHECK(y.inputs[0].src == named(g, "a"));
  const Node &neg = g.node(y.inputs[1].src);
  CHECK(neg.op == Op::Neg);
  CHECK(g.node(neg.inputs[0].src).op == Op::Sigmoid);
  // -(-a) is a: the output reads the tanh.
  REQUIRE(g.outputs.size() == 2);
  CHECK(g.outputs[1].value == Edge{named(g, "a"), 0});
  CHECK(liveOfOp(g, Op::Neg).size() == 1);
  CHECK_FALSE(canonicalize(g)); // a fixed point
}

TEST_CASE("canonicalize: sums and products are flattened", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> y, p, z {\n"
                           "  a = tanh(x)\n"
                           "  b = sigmoid(x)\n"
                           "  s = a + b\n"
                           "  y = a - b + exp(x) + x[t-1]\n"
                           "  p = a * (b * x) * x[t-2]\n"
                           "  z = s + s[t-1] + s * 2\n"
                           "}\n");
  Graph &g = r->g();
  CHECK(canonicalize(g));
  CHECK(verifyGraph(g) == "");
  const Node &y = g.node(named(g, "y"));
  CHECK(y.op == Op::Add);
  CHECK(y.inputs.size() == 4); // a, -b, exp(x), x[t-1]
  const Node &p = g.node(named(g, "p"));
  CHECK(p.op == Op::Mul);
  CHECK(p.inputs.size() == 4); // a, b, x, x[t-2]
  // s is read three times (once delayed): it stays a node of its own.
  NodeId s = named(g, "s");
  CHECK(g.node(s).op == Op::Add);
  CHECK(g.node(s).inputs.size() == 2);
  const Node &z = g.node(named(g, "z"));
  CHECK(z.inputs.size() == 3);
  CHECK(std::count(z.inputs.begin(), z.inputs.end(), Edge{s, 0}) == 1);
  CHECK(std::count(z.inputs.begin(), z.inputs.end(), Edge{s, 1}) == 1);
  // A flattened node carries the places of what it absorbed.
  CHECK(y.locs.size() >= 2);
}

TEST_CASE("canonicalize: a delayed sum is not flattened into its reader", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> y {\n"
                           "  s = tanh(x) + x\n"
                           "  y = s[t-1] + x\n"
                           "}\n");
  Graph &g = r->g();
  canonicalize(g);
  const Node &y = g.node(named(g, "y"));
  REQUIRE(y.inputs.size() == 2);
  CHECK(y.inputs[0] == Edge{named(g, "s"), 1});
}

TEST_CASE("canonicalize: constants are folded", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> a, b, c, d, e {\n"
                           "  a = x * (2 * 3)\n"
                           "  b = tanh(x) + 0\n"
                           "  c = sigmoid(x) * exp(0)\n"
                           "  d = 1 + tanh(x) + 2\n"
                           "  e = x * 0.5 * 4 - 1\n"
                           "}\n");
  Graph &g = r->g();
  CHECK(canonicalize(g));
  CHECK(verifyGraph(g) == "");
  auto constsOf = [&](const Node &n) {
    std::vector<double> out;
    for (Edge e : n.inputs)
      if (g.node(e.src).op == Op::Const) out.push_back(g.node(e.src).value);
    return out;
  };
  auto out = [&](const std::string &name) -> Edge {
    for (const GraphPort &o : g.outputs)
      if (o.name == name) return o.value;
    FAIL("no output " << name);
    return {};
  };
  const Node &a = g.node(out("a").src);
  CHECK(a.op == Op::Mul);
  CHECK(constsOf(a) == std::vector<double>{6});
  // + 0 and * exp(0) vanish: the outputs read the tanh and the sigmoid.
  CHECK(g.node(out("b").src).op == Op::Tanh);
  CHECK(g.node(out("c").src).op == Op::Sigmoid);
  const Node &d = g.node(out("d").src);
  CHECK(d.op == Op::Add);
  CHECK(d.inputs.size() == 2);
  CHECK(constsOf(d) == std::vector<double>{3});
  const Node &e = g.node(out("e").src);
  CHECK(e.op == Op::Add);
  CHECK(constsOf(e) == std::vector<double>{-1});
  REQUIRE(e.inputs.size() == 2);
  const Node &scaled = g.node(e.inputs[0].src);
  CHECK(scaled.op == Op::Mul);
  CHECK(constsOf(scaled) == std::vector<double>{2});
  for (NodeId id : liveOfOp(g, Op::Const)) CHECK(g.node(id).width == 1);
  CHECK_FALSE(canonicalize(g));
}

TEST_CASE("canonicalize: a constant that does not fold to a finite value stays", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> y {\n"
                           "  y = x * log(0)\n"
                           "}\n");
  Graph &g = r->g();
  canonicalize(g);
  CHECK(verifyGraph(g) == "");
  CHECK(liveOfOp(g, Op::Log).size() == 1);
}

TEST_CASE("canonicalize: identical nodes merge", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> y, z, w {\n"
                           "  param W: [I, I]\n"
                           "  a = tanh(x)\n"
                           "  b = tanh(x)\n"
                           "  y = a * b\n"
                           "  z = (W @ x) * sigmoid(a) + (W @ x) * sigmoid(b)\n"
                           "  w = tanh(x[t-1]) + tanh(x[t-2])\n"
                           "}\n");
  Graph &g = r->g();
  CHECK(canonicalize(g));
  CHECK(verifyGraph(g) == "");
  // tanh(x) once, tanh(x[t-1]) and tanh(x[t-2]) once each.
  CHECK(liveOfOp(g, Op::Tanh).size() == 3);
  CHECK(liveOfOp(g, Op::Sigmoid).size() == 1);
  CHECK(liveOfOp(g, Op::MatMul).size() == 1);
  const Node &y = g.node(named(g, "y"));
  REQUIRE(y.inputs.size() == 2);
  CHECK(y.inputs[0] == y.inputs[1]);
  // (W@x)*sigmoid(a) twice: one product, read twice by z.
  const Node &z = g.node(g.outputs[1].value.src);
  CHECK(z.op == Op::Add);
  REQUIRE(z.inputs.size() == 2);
  CHECK(z.inputs[0] == z.inputs[1]);
}

TEST_CASE("canonicalize: merging respects commutativity and the order of other ops", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> p, q, d1, d2 {\n"
                           "  a = tanh(x)\n"
                           "  b = sigmoid(x)\n"
                           "  p = a * b\n"
                           "  q = b * a\n"
                           "  d1 = a / b\n"
                           "  d2 = b / a\n"
                           "}\n");
  Graph &g = r->g();
  canonicalize(g);
  CHECK(g.outputs[0].value == g.outputs[1].value); // a*b = b*a
  CHECK(g.outputs[2].value != g.outputs[3].value); // a/b != b/a
}

TEST_CASE("canonicalize: what no output or state reaches is removed", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I]) -> y {\n"
                           "  param W: [H, I]\n"
                           "  unused = tanh(W @ x)\n"
                           "  z = sigmoid(x) + z[t-1]\n"
                           "  y = exp(x)\n"
                           "}\n");
  Graph &g = r->g();
  CHECK(canonicalize(g));
  CHECK(verifyGraph(g) == "");
  // `unused` goes; the recurrence z stays: its final state is a result of the cell.
  std::map<Op, int> live;
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead) ++live[g.node(id).op];
  CHECK(live == std::map<Op, int>{{Op::Input, 1}, {Op::Exp, 1}, {Op::Sigmoid, 1}, {Op::Add, 1}});
  CHECK(g.inputs.size() == 1);
  CHECK(g.states().size() == 1);
}

TEST_CASE("canonicalize: an input no output reads stays a port", "[passes][canonicalize]") {
  auto r = lowered(kDims + "cell C(x: [I], unused: [H]) -> y {\n"
                           "  y = tanh(x)\n"
                           "}\n");
  canonicalize(r->g());
  CHECK(verifyGraph(r->g()) == "");
  CHECK(!r->g().node(r->g().inputs[1].value.src).dead);
}

// ---------------------------------------------------------------------------
// fuse-pointwise: every GEMM is a launch; the pointwise work between GEMMs of a
// stage is one kernel.

TEST_CASE("fuse: the LSTM loop is one GEMM and one kernel per step", "[passes][fuse]") {
  auto r = compiled(kLstm);
  auto loops = loopStages(r->c);
  REQUIRE(loops.size() == 1);
  CHECK(launchKinds(*loops[0]) == std::vector<std::string>{"gemm", "kernel"});
  const Node &gemm = r->g().node(loops[0]->kernels[0].nodes.at(0));
  CHECK(gemm.params == std::vector<std::string>{"W_hh"});
  CHECK(gemm.inputs[0].delay == 1);
  // Everything else of the step is in the kernel.
  CHECK(loops[0]->kernels[1].nodes.size() + 1 == loops[0]->nodes.size());
  // Outside the loop: the input GEMM alone; the bias add beside it sank into
  // the loop's kernel (the loop is its only reader).
  const Stage &pre = r->c.schedule.stages.at(0);
  CHECK_FALSE(pre.loop);
  CHECK(launchKinds(pre) == std::vector<std::string>{"gemm"});
  Stats s = computeStats(r->c);
  CHECK(s.forward.stepLaunches == 2);
  CHECK(s.forward.stepGemms == 1);
  CHECK(s.forward.hoistedGemms == 1);
  CHECK(s.kernels == 3);
}

TEST_CASE("fuse: the MGU loop is gemm, kernel, gemm, kernel", "[passes][fuse]") {
  auto r = compiled(kMgu);
  auto loops = loopStages(r->c);
  REQUIRE(loops.size() == 1);
  const Stage &loop = *loops[0];
  REQUIRE(launchKinds(loop) == std::vector<std::string>{"gemm", "kernel", "gemm", "kernel"});
  const Graph &g = r->g();
  CHECK(g.node(loop.kernels[0].nodes[0]).params == std::vector<std::string>{"U_f"});
  CHECK(g.node(loop.kernels[2].nodes[0]).params == std::vector<std::string>{"U_h"});
  // The second GEMM's operand f * h[t-1] is made by the first kernel.
  NodeId operand = g.node(loop.kernels[2].nodes[0]).inputs[0].src;
  const auto &k1 = loop.kernels[1].nodes;
  CHECK(std::find(k1.begin(), k1.end(), operand) != k1.end());
  CHECK(std::find(k1.begin(), k1.end(), named(g, "f")) != k1.end());
  const auto &k3 = loop.kernels[3].nodes;
  CHECK(std::find(k3.begin(), k3.end(), named(g, "h")) != k3.end());
  CHECK(std::find(k3.begin(), k3.end(), named(g, "n")) != k3.end());
}

TEST_CASE("fuse: a kernel lists its nodes in dependency order", "[passes][fuse]") {
  auto r = compiled(kLstm);
  const Graph &g = r->g();
  for (const Stage &s : r->c.schedule.stages)
    for (const Kernel &k : s.kernels)
      for (size_t i = 0; i < k.nodes.size(); ++i)
        for (Edge e : g.node(k.nodes[i]).inputs) {
          if (e.delay != 0) continue;
          auto at = std::find(k.nodes.begin(), k.nodes.end(), e.src);
          if (at != k.nodes.end()) CHECK(at < k.nodes.begin() + static_cast<long>(i));
        }
}

// ---------------------------------------------------------------------------
// schedule: issue order, streams, events.

TEST_CASE("schedule: a bidirectional layer runs its two loops on two streams", "[passes][schedule]") {
  auto r = compiled(kDims + "cell Bi(x: [I]) -> y {\n"
                            "  param Wf, Wb: [H, I]\n"
                            "  param Uf, Ub: [H, H]\n"
                            "  hf = tanh(Wf @ x + Uf @ hf[t-1])\n"
                            "  hb = tanh(Wb @ x + Ub @ hb[t+1])\n"
                            "  y = concat(hf, hb)\n"
                            "}\n");
  const Schedule &s = r->c.schedule;
  CHECK(s.streams == 2);
  REQUIRE(s.stages.size() == 4);
  // The input products of both directions are one stacked GEMM before the loops.
  CHECK_FALSE(s.stages[0].loop);
  CHECK(r->g().param("Wf")->stackedWith == std::vector<std::string>{"Wf", "Wb"});
  const Stage &fwd = s.stages[1], &bwd = s.stages[2], &post = s.stages[3];
  REQUIRE(fwd.loop);
  REQUIRE(bwd.loop);
  CHECK(fwd.direction == +1);
  CHECK(bwd.direction == -1);
  CHECK(fwd.stream != bwd.stream);
  CHECK(fwd.after == std::vector<int>{0});
  CHECK(bwd.after == std::vector<int>{0});
  // The loop on the new stream waits for stage 0 with an event.
  const Stage &other = fwd.stream == s.stages[0].stream ? bwd : fwd;
  const Stage &same = fwd.stream == s.stages[0].stream ? fwd : bwd;
  CHECK(other.waits == std::vector<int>{0});
  CHECK(same.waits.empty());
  // The concat after both waits for the loop on the other stream.
  CHECK_FALSE(post.loop);
  CHECK(post.after == std::vector<int>{1, 2});
  CHECK(post.waits.size() == 1);
  CHECK(computeStats(r->c).streams == 2);
}

TEST_CASE("schedule: stacked layers keep one stream", "[passes][schedule]") {
  auto r = compiled(kDims + kElman +
                    "model Stack(x: [I]) -> y {\n"
                    "  h1 = Elman(x)\n"
                    "  h2 = Elman(h1)\n"
                    "  y = h2\n"
                    "}\n");
  const Schedule &s = r->c.schedule;
  CHECK(s.streams == 1);
  for (size_t i = 0; i < s.stages.size(); ++i) {
    CHECK(s.stages[i].stream == 0);
    CHECK(s.stages[i].waits.empty());
    for (int a : s.stages[i].after) CHECK(a < static_cast<int>(i));
  }
}

TEST_CASE("schedule: work after a loop continues the loop's stream", "[passes][schedule]") {
  auto r = compiled(kDims + "cell P(x: [I]) -> h, y {\n"
                            "  param W: [H, I]\n"
                            "  param U, V: [H, H]\n"
                            "  h = tanh(W @ x + U @ h[t-1])\n"
                            "  y = sigmoid(V @ h) * 2\n"
                            "}\n");
  const Schedule &s = r->c.schedule;
  REQUIRE(s.stages.size() == 3);
  CHECK(s.stages[2].after == std::vector<int>{1});
  CHECK(s.stages[2].stream == s.stages[1].stream);
}

// ---------------------------------------------------------------------------
// plan-memory: tests/unit/PlanMemoryTest.cpp.

// ---------------------------------------------------------------------------
// -O0: no analysis; one launch per op per step, in time order.

TEST_CASE("-O0: one launch per op, no stacking, no hoisting", "[passes][O0]") {
  auto r = compiled(kLstm, false);
  const Graph &g = r->g();
  CHECK(g.liveCount() == r->loweredLive); // nothing rewritten
  size_t ops = 0;
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead && opKind(g.node(id).op) != OpKind::Leaf) ++ops;
  size_t launches = 0;
  for (const Stage &s : r->c.schedule.stages)
    for (const Kernel &k : s.kernels) {
      CHECK(k.nodes.size() == 1);
      CHECK(k.gemm == (g.node(k.nodes[0]).op == Op::MatMul));
      ++launches;
    }
  CHECK(launches == ops);
  for (NodeId id : liveOfOp(g, Op::MatMul)) CHECK(g.node(id).params.size() == 1);
  for (const GraphParam &p : g.params) CHECK(p.stackedWith.empty());
  CHECK(liveOfOp(g, Op::Sub).empty()); // (the LSTM has none; nothing was added either)
  Stats s = computeStats(r->c);
  CHECK(s.forward.loops == 1);
  CHECK(s.forward.stepLaunches >= 10);
  CHECK(s.forward.stepLaunches == static_cast<int>(ops)); // the input GEMM runs per step too
  CHECK(s.forward.stepGemms == 2);
  CHECK(s.forward.hoistedGemms == 0);
  CHECK(s.streams == 1);
  // The optimized build of the same cell: 2 launches per step.
  CHECK(computeStats(compiled(kLstm)->c).forward.stepLaunches == 2);
}

TEST_CASE("-O0: MGU's products of x are not stacked and subtraction stays", "[passes][O0]") {
  auto r = compiled(kMgu, false);
  const Graph &g = r->g();
  CHECK(liveOfOp(g, Op::MatMul).size() == 4);
  CHECK(liveOfOp(g, Op::Sub).size() == 1);
  for (const GraphParam &p : g.params) CHECK(p.stackedWith.empty());
  for (const Stage &s : r->c.schedule.stages) {
    CHECK(s.stream == 0);
    for (const Kernel &k : s.kernels) CHECK(k.nodes.size() == 1);
  }
}

TEST_CASE("-O0: a bidirectional cell runs as one run per direction on one stream", "[passes][O0]") {
  auto r = compiled(kDims + "cell Bi(x: [I]) -> y {\n"
                            "  param Wf, Wb: [H, I]\n"
                            "  param Uf, Ub: [H, H]\n"
                            "  hf = tanh(Wf @ x + Uf @ hf[t-1])\n"
                            "  hb = tanh(Wb @ x + Ub @ hb[t+1])\n"
                            "  y = concat(hf, hb)\n"
                            "}\n",
                    false);
  const Schedule &s = r->c.schedule;
  CHECK(s.streams == 1);
  std::vector<int> dirs;
  for (const Stage &st : s.stages) {
    CHECK(st.loop);
    dirs.push_back(st.direction);
  }
  // The backward run cannot hold the forward loop's reads, nor the reverse.
  CHECK(std::count(dirs.begin(), dirs.end(), -1) >= 1);
  CHECK(std::count(dirs.begin(), dirs.end(), +1) >= 1);
}

// ---------------------------------------------------------------------------
// The pipeline as a whole.

TEST_CASE("pipeline: the observer sees every pass in order", "[passes][pipeline]") {
  auto r = lowered(kLstm);
  std::vector<std::string> seen;
  REQUIRE(runPipeline(r->c, *r->fe->diags, [&](const std::string &pass, const Compilation &, bool) {
    seen.push_back(pass);
  }));
  std::vector<std::string> expected;
  for (const PassInfo &p : passRegistry())
    if (p.run) expected.push_back(p.name);
  CHECK(seen == expected);
  CHECK(expected.front() == "canonicalize");
  CHECK(std::count(expected.begin(), expected.end(), "plan-time-parallel") == 1);
  auto o0 = lowered(kLstm);
  o0->c.optimize = false;
  seen.clear();
  REQUIRE(runPipeline(o0->c, *o0->fe->diags, [&](const std::string &pass, const Compilation &, bool) {
    seen.push_back(pass);
  }));
  CHECK(seen == std::vector<std::string>{"classify-time", "plan-time-parallel", "fuse-pointwise", "schedule", "plan-memory"});
}

TEST_CASE("pipeline: the registry names each pass once, and what a pass needs comes before it", "[passes][pipeline]") {
  std::set<std::string> names, provided;
  for (const PassInfo &p : passRegistry()) {
    CHECK(names.insert(p.name).second);
    CHECK(findPass(p.name) == &p);
    CHECK(std::string(p.contract).size() > 20);
    for (const char *need : p.needs) CHECK(provided.count(need) == 1);
    for (const char *fact : p.provides) provided.insert(fact);
  }
  CHECK(findPass("no-such-pass") == nullptr);
  CHECK(passRegistry().front().name == std::string("lower"));
}

TEST_CASE("pipeline: each stage's nodes are exactly its kernels' nodes", "[passes][pipeline]") {
  for (bool opt : {true, false}) {
    auto r = compiled(kMgu, opt);
    for (const Stage &s : r->c.schedule.stages) {
      std::multiset<NodeId> a(s.nodes.begin(), s.nodes.end()), b;
      for (const Kernel &k : s.kernels) b.insert(k.nodes.begin(), k.nodes.end());
      CHECK(a == b);
    }
  }
}

namespace {

/// Delayed reads inside one -O0 run that point against the way it runs: a
/// step would read a value of a step not yet done.
std::vector<std::string> readsAhead(const Compiled &r) {
  std::vector<std::string> out;
  const Graph &g = r.c.graph;
  for (const Stage &s : r.c.schedule.stages) {
    std::set<NodeId> in(s.nodes.begin(), s.nodes.end());
    for (NodeId id : s.nodes)
      for (Edge e : g.node(id).inputs)
        if (s.loop && in.count(e.src) && e.delay != 0 && (e.delay > 0) != (s.direction > 0))
          out.push_back(fmt::format("%{} reads %{} at delay {} in a loop of direction {}", id, e.src, e.delay, s.direction));
  }
  return out;
}

} // namespace

TEST_CASE("-O0: a loop does not join a run whose values it reads ahead", "[passes][O0]") {
  // h reads s[t+1] (a look-ahead input; no component mixes directions, so the
  // file is legal): the forward loop must not run in the forward run that
  // computes s step by step.
  auto r = compiled(kDims + "cell C(x: [I]) -> h {\n"
                            "  param U: [I, I]\n"
                            "  s = tanh(x)\n"
                            "  h = tanh(U @ h[t-1] + s[t+1])\n"
                            "}\n",
                    false);
  CHECK(readsAhead(*r).empty());
}

// Found by these tests (fixed in 133fa35): at -O0 a run opened by a
// time-parallel stage ran forward without looking at that stage's reads of
// its own values. Here y reads s one step ahead, both in the one
// time-parallel stage: a loop over t forward would read s[t+1] at step t
// before step t+1 has made it.
TEST_CASE("-O0: a run does not read ahead of itself", "[passes][O0]") {
  auto r = compiled(kDims + "cell C(x: [I]) -> y {\n"
                            "  s = tanh(x)\n"
                            "  y = s[t+1] + x\n"
                            "}\n",
                    false);
  auto ahead = readsAhead(*r);
  CAPTURE(ahead);
  CHECK(ahead.empty());
}

// `loss = l` (a value that already has a name) is still the objective:
// lowering takes the root's binding of `loss`, not a node named so, and
// canonicalize keeps it.
TEST_CASE("lower: a loss that copies a named value is kept", "[passes][lower]") {
  auto r = lowered("dim I = 4\n"
                   "model M(x: [I], y: [I]) -> p {\n"
                   "  p = tanh(x)\n"
                   "  l = mse(p, y)\n"
                   "  loss = l\n"
                   "}\n");
  REQUIRE(r->g().loss.has_value());
  CHECK(r->g().node(*r->g().loss).op == Op::Mse);
}

TEST_CASE("lower: a loss defined by its own expression is kept through the pipeline", "[passes][lower]") {
  auto r = compiled("dim I = 4\n"
                    "model M(x: [I], y: [I]) -> p {\n"
                    "  p = tanh(x)\n"
                    "  loss = mse(p, y) + 0\n"
                    "}\n");
  REQUIRE(r->g().loss.has_value());
  CHECK(r->g().node(*r->g().loss).op == Op::Mse); // + 0 folded away, the loss moved to the mse
  CHECK_FALSE(r->g().node(*r->g().loss).dead);
}

// A loss whose sum folds away to a delayed read keeps its own node (the loss is
// a value of the current step), instead of an internal error in canonicalize.
TEST_CASE("canonicalize: a loss that folds to a delayed read keeps its node", "[passes][canonicalize]") {
  auto r = test::frontend("cell C(x: [4]) -> y {\n  s = sum(x)\n  loss = s[t-1] + 0\n  y = tanh(x)\n}\n");
  REQUIRE(r->ok());
  auto g = lowerToGraph(r->sema.entities[0], *r->diags);
  REQUIRE(g);
  canonicalize(*g);
  REQUIRE(g->loss);
  CHECK(verifyGraph(*g).empty());
  CHECK_FALSE(g->node(*g->loss).dead);
}
