#include "TestSupport.h"

#include <catch2/catch.hpp>

using namespace rnnc;
using rnnc::test::errors;
using rnnc::test::frontend;

namespace {

const Elaboration &only(const FrontendResult &r) {
  REQUIRE(r.sema.entities.size() == 1);
  return r.sema.entities[0];
}

std::string shapeOf(const ElaboratedParam &p) {
  std::string s;
  for (const auto &d : p.shape) s += (s.empty() ? "" : "x") + (d ? std::to_string(*d) : std::string("?"));
  return s;
}

const std::string &kLstm = test::kLstmSource;

} // namespace

TEST_CASE("sema: the LSTM's widths", "[sema]") {
  auto r = frontend(kLstm);
  REQUIRE(errors(*r).empty());
  const auto &e = only(*r);
  CHECK(e.complete);
  CHECK(e.inputs[0].type.width == 64);
  CHECK(e.outputs[0].type.width == 128);
  REQUIRE(e.params.size() == 4);
  CHECK(e.params[0].name == "W_ih");
  CHECK(shapeOf(e.params[0]) == "512x64");
  CHECK(shapeOf(e.params[1]) == "512x128");
  CHECK(shapeOf(e.params[3]) == "512");
}

TEST_CASE("sema: -D overrides a dim, and dims that depend on it", "[sema]") {
  auto r = frontend("dim H = 8\ndim G = 4*H\ncell A(x: [G]) -> y {\n  y = x\n}\n", {{"H", 3}});
  REQUIRE(errors(*r).empty());
  CHECK(r->sema.dims.at("G") == 12);
  CHECK(only(*r).inputs[0].type.width == 12);
}

TEST_CASE("sema: width inference through instances", "[sema]") {
  std::string text = std::string(kLstm) +
                     "dim E = 16\n"
                     "model M(x: [E]) -> y {\n"
                     "  h1 = LSTM(x, H = 32)\n"   // I inferred: 16
                     "  h2 = LSTM(h1)\n"          // I inferred: 32; H from the file: 128
                     "  y = concat(h1, h2, sum(h2))\n"
                     "}\n";
  auto r = frontend(text);
  REQUIRE(errors(*r).empty());
  // The LSTM is instantiated in the file, so only the model is a root.
  const auto &m = only(*r);
  CHECK(m.outputs[0].type.width == 32 + 128 + 1);
  std::map<std::string, std::string> shapes;
  for (const auto &p : m.params) shapes[p.name] = shapeOf(p);
  CHECK(shapes.at("h1.W_ih") == "128x16");
  CHECK(shapes.at("h1.W_hh") == "128x32");
  CHECK(shapes.at("h2.W_ih") == "512x32");
  CHECK(shapes.at("h2.W_hh") == "512x128");
}

TEST_CASE("sema: a cell with no dims in its file is generic", "[sema]") {
  auto r = frontend("cell G(x: [I]) -> h {\n  param W: [H, I]\n  h = tanh(W @ x + h[t-1])\n}\n");
  REQUIRE(errors(*r).empty());
  CHECK_FALSE(only(*r).complete);
  CHECK(only(*r).unboundDims == std::vector<std::string>{"I", "H"});
}

TEST_CASE("sema: a recurrent read above its definition is width-checked", "[sema]") {
  // h's width is only known after line 3; the second pass checks W @ h[t-1].
  auto r = frontend("dim N = 4\ncell A(x: [N]) -> h {\n  param W: [N, 3]\n  z = W @ h[t-1]\n  h = x + z\n}\n");
  auto e = errors(*r);
  REQUIRE(e.size() == 1);
  CHECK(e[0].rfind("4:9: width mismatch in '@'", 0) == 0);
}

TEST_CASE("sema: broadcasting scalars", "[sema]") {
  auto r = frontend("dim N = 4\ncell A(x: [N]) -> y {\n  y = (1 - x) * 0.5 + mean(x) * x / sum(x)\n}\n");
  REQUIRE(errors(*r).empty());
  CHECK(only(*r).outputs[0].type.width == 4);
}

TEST_CASE("sema: split divisibility and counts", "[sema]") {
  auto r = frontend("dim N = 10\ncell A(x: [N]) -> a {\n  a, b, c, d = split(x, 4)\n}\n");
  auto e = errors(*r);
  REQUIRE(e.size() == 1);
  CHECK(e[0] == "3:25: cannot split a vector 10 wide into 4 equal parts");
}

TEST_CASE("sema: embed and cross_entropy take index inputs", "[sema]") {
  auto r = frontend("dim V = 10\ndim E = 3\nmodel M(tok: index[V], y: index[V]) -> logits {\n"
                    "  param emb: [V, E]\n  param W: [V, E]\n"
                    "  logits = W @ embed(emb, tok)\n  loss = cross_entropy(logits, y)\n}\n");
  REQUIRE(errors(*r).empty());
  CHECK(only(*r).inputs[0].type.isIndex);
  CHECK(only(*r).outputs[0].type.width == 10);
}

TEST_CASE("sema: errors name the place", "[sema]") {
  auto r = frontend("dim N = 4\ncell A(x: [N]) -> y {\n  y = x + q\n  z = x[t] \n}\n");
  auto e = errors(*r);
  REQUIRE(e.size() == 2);
  CHECK(e[0] == "4:8: a time offset must be non-zero: [t] is the current step, so leave the index out");
  CHECK(e[1] == "3:11: unknown name 'q'");
}
