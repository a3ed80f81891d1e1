// Helpers shared by the unit tests: run the frontend on text in memory with
// diagnostics captured, and lex a string.
#pragma once

#include "frontend/Frontend.h"
#include "frontend/Lexer.h"
#include "frontend/Lower.h"

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rnnc::test {

/// The LSTM of DESIGN.md §2 (samples/lstm.rnn without its comment).
inline const std::string kLstmSource = "dim I = 64\ndim H = 128\n"
                                       "cell LSTM(x: [I]) -> h {\n"
                                       "  param W_ih: [4*H, I]\n"
                                       "  param W_hh: [4*H, H]\n"
                                       "  param b_ih, b_hh: [4*H]\n"
                                       "  i, f, g, o = split(W_ih @ x + b_ih + W_hh @ h[t-1] + b_hh, 4)\n"
                                       "  c = sigmoid(f) * c[t-1] + sigmoid(i) * tanh(g)\n"
                                       "  h = sigmoid(o) * tanh(c)\n"
                                       "}\n";

/// torch.nn.GRU's cell (samples/gru.rnn) at I = 4, H = 8.
inline const std::string kGruSource = "dim I = 4\ndim H = 8\n"
                                      "cell GRU(x: [I]) -> h {\n"
                                      "  param W_ih: [3*H, I]\n"
                                      "  param W_hh: [3*H, H]\n"
                                      "  param b_ih, b_hh: [3*H]\n"
                                      "  xr, xz, xn = split(W_ih @ x + b_ih, 3)\n"
                                      "  hr, hz, hn = split(W_hh @ h[t-1] + b_hh, 3)\n"
                                      "  r = sigmoid(xr + hr)\n"
                                      "  z = sigmoid(xz + hz)\n"
                                      "  n = tanh(xn + r * hn)\n"
                                      "  h = (1 - z) * n + z * h[t-1]\n"
                                      "}\n";

inline std::unique_ptr<FrontendResult> frontend(const std::string &text, std::vector<DimOverride> dims = {}) {
  FrontendOptions o;
  o.capture = true;
  o.dims = std::move(dims);
  return runFrontend("test.rnn", o, &text);
}

/// "line:col: message" of each captured error, in order.
inline std::vector<std::string> errors(const FrontendResult &r) {
  std::vector<std::string> out;
  for (const auto &d : r.diags->captured()) {
    if (d.severity != Severity::Error) continue;
    LineCol lc = d.range.valid() ? r.sm.lineCol(d.range.begin) : LineCol{};
    out.push_back(std::to_string(lc.line) + ":" + std::to_string(lc.col) + ": " + d.message);
  }
  return out;
}

struct Lexed {
  SourceManager sm;
  std::unique_ptr<DiagnosticEngine> diags;
  std::vector<Token> tokens;
  std::string kinds() const {
    std::string s;
    for (const auto &t : tokens) s += std::string(s.empty() ? "" : " ") + tokenSpelling(t.kind);
    return s;
  }
};

inline std::unique_ptr<Lexed> lex(const std::string &text) {
  auto l = std::make_unique<Lexed>();
  l->diags = std::make_unique<DiagnosticEngine>(l->sm);
  l->diags->setCapture(true);
  uint32_t id = l->sm.addBuffer("lex.rnn", text);
  Lexer lexer(l->sm, id, *l->diags);
  for (;;) {
    Token t = lexer.next();
    l->tokens.push_back(t);
    if (t.kind == Tok::Eof) break;
  }
  return l;
}

/// The one entity of `text` lowered to a graph; `fe` keeps the source text
/// and diagnostics the graph points into. Any error fails the test.
inline Graph loweredGraph(const std::string &text, std::unique_ptr<FrontendResult> &fe) {
  fe = frontend(text);
  auto errs = errors(*fe);
  INFO(text);
  CAPTURE(errs);
  REQUIRE(errs.empty());
  REQUIRE(fe->sema.entities.size() == 1);
  std::optional<Graph> g = lowerToGraph(fe->sema.entities[0], *fe->diags);
  REQUIRE(g);
  return std::move(*g);
}

} // namespace rnnc::test
