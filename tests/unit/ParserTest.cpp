#include "TestSupport.h"

#include "frontend/ASTDump.h"
#include "frontend/Parser.h"

#include <catch2/catch.hpp>

using namespace rnnc;

namespace {

struct Parsed {
  SourceManager sm;
  std::unique_ptr<DiagnosticEngine> diags;
  Module module;
  ExprPtr expr;
};

std::unique_ptr<Parsed> parseFile(const std::string &text) {
  auto p = std::make_unique<Parsed>();
  p->diags = std::make_unique<DiagnosticEngine>(p->sm);
  p->diags->setCapture(true);
  Parser parser(p->sm, p->sm.addBuffer("p.rnn", text), *p->diags);
  p->module = parser.parseFile();
  return p;
}

std::string parseExpr(const std::string &text) {
  Parsed p;
  p.diags = std::make_unique<DiagnosticEngine>(p.sm);
  p.diags->setCapture(true);
  Parser parser(p.sm, p.sm.addBuffer("e.rnn", text), *p.diags);
  ExprPtr e = parser.parseExpressionOnly();
  return e ? exprToString(*e) : "<error>";
}

} // namespace

TEST_CASE("parser: precedence and associativity", "[parser]") {
  CHECK(parseExpr("a + b * c") == "a + b*c");
  CHECK(parseExpr("(a + b) * c") == "(a + b)*c");
  CHECK(parseExpr("a - b - c") == "a - b - c");
  CHECK(parseExpr("a - (b - c)") == "a - (b - c)");
  // '@' binds like '*' and associates to the left.
  CHECK(parseExpr("W @ x + b") == "W @ x + b");
  CHECK(parseExpr("u * W @ x") == "u*W @ x");
  CHECK(parseExpr("u * (W @ x)") == "u*(W @ x)");
  CHECK(parseExpr("-a * b") == "-a*b");
  CHECK(parseExpr("-(a + b)") == "-(a + b)");
}

TEST_CASE("parser: time offsets", "[parser]") {
  CHECK(parseExpr("h[t-1] + h[t+2]") == "h[t-1] + h[t+2]");
  CHECK(parseExpr("h[t]") == "<error>");
  CHECK(parseExpr("h[t-0]") == "<error>");
  CHECK(parseExpr("h[t-k]") == "<error>");
  CHECK(parseExpr("h[s-1]") == "<error>");
  CHECK(parseExpr("(a + b)[t-1]") == "<error>");
}

TEST_CASE("parser: calls and keyword arguments", "[parser]") {
  CHECK(parseExpr("LSTM(x, H = 2*K)") == "LSTM(x, H = 2*K)");
  CHECK(parseExpr("split(W @ x, 4)") == "split(W @ x, 4)");
  CHECK(parseExpr("f(H = 1, x)") == "<error>");
}

TEST_CASE("parser: the DESIGN.md LSTM", "[parser]") {
  auto p = parseFile("dim I = 64\ndim H = 128\n"
                     "cell LSTM(x: [I]) -> h {\n"
                     "  param W_ih: [4*H, I]\n"
                     "  param b_ih, b_hh: [4*H]\n"
                     "  i, f, g, o = split(W_ih @ x + b_ih, 4)\n"
                     "}\n");
  REQUIRE_FALSE(p->diags->hasErrors());
  REQUIRE(p->module.decls.size() == 3);
  const auto &cell = static_cast<const CellDecl &>(*p->module.decls[2]);
  CHECK(cell.name.name == "LSTM");
  REQUIRE(cell.ports.size() == 1);
  CHECK(exprToString(*cell.ports[0].size) == "I");
  REQUIRE(cell.body.size() == 3);
  const auto &biases = static_cast<const ParamDecl &>(*cell.body[1]);
  CHECK(biases.names.size() == 2);
  const auto &split = static_cast<const AssignStmt &>(*cell.body[2]);
  CHECK(split.targets.size() == 4);
  LineCol lc = p->sm.lineCol(split.value->range.begin);
  CHECK(lc.line == 6);
  CHECK(lc.col == 16);
}

TEST_CASE("parser: recovers at the next statement", "[parser]") {
  auto p = parseFile("cell A(x: [4]) -> y {\n"
                     "  a = x +\n"
                     "  b = )\n"
                     "  y = x\n"
                     "}\n");
  CHECK(p->diags->errorCount() == 2);
  const auto &cell = static_cast<const CellDecl &>(*p->module.decls[0]);
  // Statements in error still define their names, with a value in error.
  REQUIRE(cell.body.size() == 3);
  CHECK(static_cast<const AssignStmt &>(*cell.body[0]).value->kind == ExprKind::Error);
  CHECK(static_cast<const AssignStmt &>(*cell.body[1]).value->kind == ExprKind::Error);
  const auto &y = static_cast<const AssignStmt &>(*cell.body[2]);
  CHECK(y.targets[0].name == "y");
  CHECK(y.value->kind == ExprKind::Name);
}

TEST_CASE("parser: nesting is bounded", "[parser]") {
  std::string deep(100000, '(');
  CHECK(parseExpr(deep + "a" + std::string(100000, ')')) == "<error>");
  std::string chain = "a";
  for (int i = 0; i < 5000; ++i) chain += " + a";
  CHECK(parseExpr(chain) == "<error>");
  std::string ok = "a";
  for (int i = 0; i < 500; ++i) ok += " + a";
  CHECK(parseExpr(ok) != "<error>");
}

TEST_CASE("parser: a missing brace is reported at the end of the file", "[parser]") {
  auto p = parseFile("cell A(x: [4]) -> y {\n  y = x\n");
  REQUIRE(p->diags->errorCount() == 1);
  CHECK(p->diags->captured()[0].message == "expected '}' to end cell 'A'");
}
