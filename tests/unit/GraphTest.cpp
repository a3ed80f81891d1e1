// The graph IR on its own: what GraphBuilder computes, what checkNode rejects,
// the printer's text for a tiny graph, and what the verifier catches in a
// whole graph. Graphs here are built by hand; bad nodes are checked with
// checkNode directly (GraphBuilder::add stops the process on one).
#include "ir/Builder.h"
#include "ir/Graph.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <catch2/catch.hpp>

using namespace rnnc;

namespace {

/// x: [4], idx: index[5]; W: [3, 4], b: [3], E: [5, 2].
struct Tiny {
  Graph g;
  NodeId x = kNoNode, idx = kNoNode;
  Tiny() {
    g.name = "Tiny";
    GraphBuilder b(g);
    b.addParam("W", {3, 4}, {});
    b.addParam("b", {3}, {});
    b.addParam("E", {5, 2}, {});
    x = b.input("x", 4, false, {});
    idx = b.input("idx", 5, true, {});
  }
};

Node node(Op op, int64_t width, std::vector<Edge> inputs, std::vector<std::string> params = {}, int64_t offset = 0) {
  Node n{op, width, false, std::move(inputs), std::move(params), 0, offset, "", {}, false};
  return n;
}

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

} // namespace

TEST_CASE("graph: the builder computes each node's width", "[graph]") {
  Tiny t;
  Graph &g = t.g;
  GraphBuilder b(g);
  NodeId wx = b.matmul({"W"}, {t.x, 0}, {});
  CHECK(g.node(wx).width == 3); // the rows of W
  NodeId bias = b.param("b", {});
  CHECK(g.node(bias).width == 3);
  NodeId sum = b.op(Op::Add, {{wx, 0}, {bias, 0}}, {});
  CHECK(g.node(sum).width == 3);
  NodeId two = b.constant(2, {});
  CHECK(g.node(two).width == 1);
  NodeId scaled = b.op(Op::Mul, {{two, 0}, {sum, 1}}, {}); // a scalar broadcasts
  CHECK(g.node(scaled).width == 3);
  NodeId total = b.op(Op::Sum, {{scaled, 0}}, {});
  CHECK(g.node(total).width == 1);
  NodeId cat = b.op(Op::Concat, {{scaled, 0}, {t.x, 2}, {total, 0}}, {});
  CHECK(g.node(cat).width == 3 + 4 + 1);
  NodeId part = b.slice({cat, 0}, 3, 4, {});
  CHECK(g.node(part).width == 4);
  CHECK(g.node(part).offset == 3);
  NodeId row = b.embed("E", {t.idx, 0}, {});
  CHECK(g.node(row).width == 2); // a row of the table
  NodeId stacked = b.matmul({"W", "W"}, {t.x, 0}, {});
  CHECK(g.node(stacked).width == 6); // stacked params: rows add up
  // ... but only params laid out as one block (stack-gemms' stackedWith).
  CHECK(verifyGraph(g).find("its params W, W are not one stacked block") != std::string::npos);
  g.node(stacked).dead = true;
  CHECK(resultWidth(g, Op::CrossEntropy, {{t.x, 0}, {t.idx, 0}}) == 1);
  CHECK(resultWidth(g, Op::Max, {{two, 0}, {t.x, 0}}) == 4);
  CHECK(verifyGraph(g).empty());
  CHECK(g.liveCount() == g.nodes.size() - 1);
}

TEST_CASE("graph: users lists live readers with their input position", "[graph]") {
  Tiny t;
  GraphBuilder b(t.g);
  NodeId a = b.op(Op::Tanh, {{t.x, 0}}, {});
  NodeId m = b.op(Op::Mul, {{a, 0}, {t.x, 1}}, {});
  NodeId dead = b.op(Op::Neg, {{a, 0}}, {});
  t.g.node(dead).dead = true;
  auto users = t.g.users();
  REQUIRE(users[t.x].size() == 2);
  CHECK(users[t.x][0] == std::make_pair(a, size_t{0}));
  CHECK(users[t.x][1] == std::make_pair(m, size_t{1}));
  REQUIRE(users[a].size() == 1); // the dead neg does not count
  CHECK(users[a][0].first == m);
  CHECK(t.g.liveCount() == t.g.nodes.size() - 1);
}

TEST_CASE("graph: checkNode accepts good nodes and rejects bad ones", "[graph]") {
  Tiny t;
  const Graph &g = t.g;
  SECTION("slices") {
    CHECK(checkNode(g, node(Op::Slice, 2, {{t.x, 0}}, {}, 2)) == "");
    CHECK(checkNode(g, node(Op::Slice, 4, {{t.x, 0}}, {}, 0)) == "");
    CHECK(checkNode(g, node(Op::Slice, 2, {{t.x, 0}}, {}, 3)) == "slice out of range"); // [3:5] of 4
    CHECK(checkNode(g, node(Op::Slice, 1, {{t.x, 0}}, {}, -1)) == "slice out of range");
    CHECK(checkNode(g, node(Op::Slice, 0, {{t.x, 0}}, {}, 0)) == "slice out of range");
    CHECK(contains(checkNode(g, node(Op::Slice, 1, {{t.x, 0}, {t.x, 0}})), "takes 1..1 inputs"));
  }
  SECTION("matmuls") {
    CHECK(checkNode(g, node(Op::MatMul, 3, {{t.x, 0}}, {"W"})) == "");
    Tiny u;
    GraphBuilder b(u.g);
    NodeId wide = b.op(Op::Concat, {{u.x, 0}, {u.x, 0}}, {}); // 8 wide; W has 4 columns
    std::string why = checkNode(u.g, node(Op::MatMul, 3, {{wide, 0}}, {"W"}));
    CHECK(why == "'W' has 4 columns, its vector is 8 wide");
    CHECK(checkNode(g, node(Op::MatMul, 4, {{t.x, 0}}, {"W"})) == "matmul width is not the rows of its params");
    CHECK(checkNode(g, node(Op::MatMul, 3, {{t.x, 0}}, {"b"})) == "'b' is not a matrix param");
    CHECK(checkNode(g, node(Op::MatMul, 3, {{t.x, 0}}, {"nope"})) == "'nope' is not a matrix param");
    CHECK(checkNode(g, node(Op::MatMul, 0, {{t.x, 0}}, {})) == "matmul without a param");
  }
  SECTION("an index used as a vector") {
    CHECK(checkNode(g, node(Op::Tanh, 5, {{t.idx, 0}})) == "an index is used as a vector");
    CHECK(checkNode(g, node(Op::Add, 5, {{t.idx, 0}, {t.idx, 0}})) == "an index is used as a vector");
    // The index goes where an index belongs.
    CHECK(checkNode(g, node(Op::Embed, 2, {{t.idx, 0}}, {"E"})) == "");
    CHECK(checkNode(g, node(Op::Embed, 2, {{t.x, 0}}, {"E"})) == "embed needs a table [V, E] and an index[V]");
    CHECK(checkNode(g, node(Op::CrossEntropy, 1, {{t.x, 0}, {t.x, 0}})) == "cross_entropy needs logits as wide as its index range");
  }
  SECTION("pointwise widths and arity") {
    CHECK(checkNode(g, node(Op::Tanh, 4, {{t.x, 0}})) == "");
    CHECK(checkNode(g, node(Op::Tanh, 3, {{t.x, 0}})) == "input 0 is 4 wide, the node 3");
    CHECK(contains(checkNode(g, node(Op::Sub, 4, {{t.x, 0}})), "takes 2..2 inputs"));
    CHECK(contains(checkNode(g, node(Op::Neg, 4, {{t.x, 0}, {t.x, 0}})), "takes 1..1 inputs"));
    CHECK(checkNode(g, node(Op::Add, 4, {{t.x, 0}, {t.x, 1}, {t.x, 2}})) == ""); // n-ary
    CHECK(checkNode(g, node(Op::Sum, 4, {{t.x, 0}})) == "a reduction gives a scalar");
    CHECK(checkNode(g, node(Op::Const, 2, {})) == "a constant is a scalar");
    CHECK(checkNode(g, node(Op::Concat, 7, {{t.x, 0}, {t.x, 0}})) == "concat width is not the sum of its inputs");
  }
  SECTION("edges to missing or dead nodes") {
    CHECK(checkNode(g, node(Op::Tanh, 4, {{999, 0}})) == "input %999 does not exist");
    Tiny u;
    GraphBuilder b(u.g);
    NodeId a = b.op(Op::Tanh, {{u.x, 0}}, {});
    u.g.node(a).dead = true;
    CHECK(checkNode(u.g, node(Op::Neg, 4, {{a, 0}})) == "input %" + std::to_string(a) + " is dead");
  }
}

TEST_CASE("graph: the printer's text for a tiny graph", "[graph][printer]") {
  SourceManager sm;
  uint32_t file = sm.addBuffer("dir/tiny.rnn", "line one\nline two\nline three\n");
  SourceRange line2{SourceLoc{file, 9}}, line3{SourceLoc{file, 18}};
  Graph g;
  g.name = "Tiny";
  GraphBuilder b(g);
  b.addParam("W", {3, 2}, {});
  b.addParam("b", {3}, {});
  NodeId x = b.input("x", 2, false, line2);
  NodeId wx = b.matmul({"W"}, {x, 0}, line3);
  NodeId bias = b.param("b", {});
  NodeId h = b.op(Op::Add, {{wx, 0}, {bias, 0}, {wx, 2}}, line3);
  g.node(h).name = "h";
  NodeId gone = b.op(Op::Neg, {{h, 0}}, line3);
  g.node(gone).dead = true; // dead nodes are not printed
  NodeId half = b.constant(0.5, {});
  NodeId y = b.op(Op::Mul, {{h, -1}, {half, 0}}, {});
  NodeId part = b.slice({y, 0}, 1, 2, {});
  for (NodeId id : {bias, half, y, part}) g.node(id).locs.clear(); // no location: no note
  g.outputs.push_back({"y", {part, 0}, {}});
  g.outputs.push_back({"h", {h, 1}, {}});
  const std::string expected = "graph Tiny {\n"
                               "  param W: [3, 2]\n"
                               "  param b: [3]\n"
                               "  %0 = input x : [2]  # @tiny.rnn:2\n"
                               "  %1 = matmul W, %0 : [3]  # @tiny.rnn:3\n"
                               "  %2 = param b : [3]\n"
                               "  %3 = add %1, %2, %1[t-2] : [3]  # h @tiny.rnn:3\n"
                               "  %5 = const 0.5 : [1]\n"
                               "  %6 = mul %3[t+1], %5 : [3]\n"
                               "  %7 = slice %6[1:3] : [2]\n"
                               "  output y = %7\n"
                               "  output h = %3[t-1]\n"
                               "}\n";
  CHECK(printGraph(g, sm) == expected);
  CHECK(edgeText({7, 0}) == "%7");
  CHECK(edgeText({7, 3}) == "%7[t-3]");
  CHECK(edgeText({7, -2}) == "%7[t+2]");
  CHECK(locText(sm, line3) == "tiny.rnn:3");
  CHECK(locText(sm, SourceRange{}) == "");
}

TEST_CASE("graph: the printer marks stacked params and index inputs", "[graph][printer]") {
  SourceManager sm;
  Graph g;
  g.name = "S";
  GraphBuilder b(g);
  b.addParam("A", {2, 3}, {});
  b.addParam("B", {4, 3}, {});
  b.addParam("E", {5, 3}, {});
  NodeId i = b.input("i", 5, true, {});
  NodeId e = b.embed("E", {i, 0}, {});
  NodeId ab = b.matmul({"A", "B"}, {e, 0}, {});
  for (Node &n : g.nodes) n.locs.clear();
  g.params[0].stackedWith = {"A", "B"};
  g.outputs.push_back({"y", {ab, 0}, {}});
  g.loss = ab;
  const std::string expected = "graph S {\n"
                               "  param A: [2, 3] stacked with B\n"
                               "  param B: [4, 3]\n"
                               "  param E: [5, 3]\n"
                               "  %0 = input i : index[5]\n"
                               "  %1 = embed E, %0 : [3]\n"
                               "  %2 = matmul A, B, %1 : [6]\n"
                               "  output y = %2\n"
                               "  loss = %2\n"
                               "}\n";
  CHECK(printGraph(g, sm) == expected);
}

// A node made by the builder with an invalid location (as the builder's own
// callers do when there is no place to name) prints no "# @" note.
TEST_CASE("graph: a node with an invalid location prints no note", "[graph][printer]") {
  SourceManager sm;
  Graph g;
  g.name = "N";
  GraphBuilder b(g);
  NodeId c = b.constant(1, SourceRange{});
  g.outputs.push_back({"c", {c, 0}, {}});
  CHECK(printGraph(g, sm) == "graph N {\n  %0 = const 1 : [1]\n  output c = %0\n}\n");
}

TEST_CASE("graph: the verifier accepts a recurrent graph", "[graph][verifier]") {
  Tiny t;
  GraphBuilder b(t.g);
  NodeId a = b.op(Op::Tanh, {{t.x, 0}}, {});
  NodeId h = b.op(Op::Add, {{a, 0}, {a, 0}}, {});
  t.g.node(h).inputs[1] = {h, 1}; // h = a + h[t-1]: a cycle through a delay
  t.g.outputs.push_back({"h", {h, 0}, {}});
  CHECK(verifyGraph(t.g) == "");
}

TEST_CASE("graph: the verifier catches dead inputs", "[graph][verifier]") {
  SECTION("an edge to a dead node") {
    Tiny t;
    GraphBuilder b(t.g);
    NodeId a = b.op(Op::Tanh, {{t.x, 0}}, {});
    NodeId y = b.op(Op::Neg, {{a, 0}}, {});
    t.g.outputs.push_back({"y", {y, 0}, {}});
    REQUIRE(verifyGraph(t.g) == "");
    t.g.node(a).dead = true;
    CHECK(verifyGraph(t.g) == "%" + std::to_string(y) + " (neg): input %" + std::to_string(a) + " is dead");
  }
  SECTION("a delayed edge to a dead node") {
    Tiny t;
    GraphBuilder b(t.g);
    NodeId a = b.op(Op::Tanh, {{t.x, 0}}, {});
    NodeId y = b.op(Op::Neg, {{a, 2}}, {});
    t.g.outputs.push_back({"y", {y, 0}, {}});
    t.g.node(a).dead = true;
    CHECK(contains(verifyGraph(t.g), "is dead"));
  }
  SECTION("a dead input port") {
    Tiny t;
    t.g.outputs.push_back({"x", {t.x, 0}, {}});
    REQUIRE(verifyGraph(t.g) == "");
    t.g.node(t.idx).dead = true;
    CHECK(verifyGraph(t.g) == "input 'idx' is not a live input node");
  }
  SECTION("an input node that is no port") {
    Tiny t;
    t.g.inputs.pop_back();
    CHECK(verifyGraph(t.g) == "%" + std::to_string(t.idx) + " is an input node that is no input port");
  }
  SECTION("an output or loss on a dead node") {
    Tiny t;
    GraphBuilder b(t.g);
    NodeId a = b.op(Op::Sum, {{t.x, 0}}, {});
    t.g.outputs.push_back({"a", {a, 0}, {}});
    t.g.loss = a;
    REQUIRE(verifyGraph(t.g) == "");
    t.g.node(a).dead = true;
    CHECK(verifyGraph(t.g) == "output 'a' is not a live node");
    t.g.outputs.clear();
    CHECK(verifyGraph(t.g) == "the loss is not a live node");
  }
  SECTION("params") {
    Tiny t;
    t.g.params.push_back(t.g.params[0]);
    CHECK(verifyGraph(t.g) == "param 'W' listed twice");
  }
}

TEST_CASE("graph: the verifier catches a cycle of delay-0 edges", "[graph][verifier]") {
  Tiny t;
  GraphBuilder b(t.g);
  NodeId a = b.op(Op::Tanh, {{t.x, 0}}, {});
  NodeId c = b.op(Op::Sigmoid, {{a, 0}}, {});
  NodeId d = b.op(Op::Add, {{c, 0}, {t.x, 0}}, {});
  t.g.outputs.push_back({"d", {d, 0}, {}});
  SECTION("through three nodes") {
    t.g.node(a).inputs[0] = {d, 0}; // a = tanh(d), d = sigmoid(a) + x
    std::string why = verifyGraph(t.g);
    CHECK(contains(why, "a cycle of delay-0 edges through %"));
    // The same cycle with one delayed edge is a recurrence, not an error.
    t.g.node(a).inputs[0] = {d, 1};
    CHECK(verifyGraph(t.g) == "");
  }
  SECTION("a node reading itself") {
    t.g.node(d).inputs[1] = {d, 0};
    CHECK(verifyGraph(t.g) == "a cycle of delay-0 edges through %" + std::to_string(d));
  }
  SECTION("delays that cancel still make a delayed edge each") {
    // d reads c one step back, c reads d one step ahead: no edge has delay 0.
    t.g.node(a).inputs[0] = {d, -1};
    t.g.node(d).inputs[0] = {c, 1};
    CHECK(verifyGraph(t.g) == "");
  }
}
