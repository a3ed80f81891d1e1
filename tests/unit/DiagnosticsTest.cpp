#include "support/Diagnostics.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

using namespace rnnc;

namespace {

std::string render(const std::string &text, uint32_t begin, uint32_t end, const std::string &msg) {
  SourceManager sm;
  uint32_t id = sm.addBuffer("d.rnn", text);
  char *buf = nullptr;
  size_t size = 0;
  std::FILE *out = open_memstream(&buf, &size);
  {
    DiagnosticEngine d(sm, out);
    d.error({{id, begin}, {id, end}}, msg);
  }
  std::fclose(out);
  std::string s(buf, size);
  std::free(buf);
  return s;
}

} // namespace

TEST_CASE("diagnostics: clang style with caret and range", "[diagnostics]") {
  CHECK(render("a = b\n  c = dd + 1\n", 12, 14, "unknown name 'dd'") ==
        "d.rnn:2:7: error: unknown name 'dd'\n"
        "  c = dd + 1\n"
        "      ^~\n");
}

TEST_CASE("diagnostics: CR of a CRLF line is not printed", "[diagnostics]") {
  CHECK(render("x = $\r\n", 4, 5, "bad") == "d.rnn:1:5: error: bad\nx = $\n    ^\n");
}

TEST_CASE("diagnostics: control bytes print as escapes and the caret follows", "[diagnostics]") {
  std::string text("a\x01 b", 4);
  CHECK(render(text, 3, 4, "m") == "d.rnn:1:4: error: m\na\\x01 b\n      ^\n");
}

TEST_CASE("diagnostics: a long line is shown as a window around the caret", "[diagnostics]") {
  std::string line(100000, 'a');
  line[60000] = '$';
  std::string out = render(line, 60000, 60001, "bad");
  CHECK(out.rfind("d.rnn:1:60001: error: bad\n...", 0) == 0);
  CHECK(out.size() < 400);
}

TEST_CASE("diagnostics: the same error at the same place is reported once", "[diagnostics]") {
  SourceManager sm;
  uint32_t id = sm.addBuffer("d.rnn", "abc");
  DiagnosticEngine d(sm);
  d.setCapture(true);
  d.error(SourceLoc{id, 1}, "x");
  d.error(SourceLoc{id, 1}, "x");
  d.error(SourceLoc{id, 2}, "x");
  CHECK(d.errorCount() == 2);
}

TEST_CASE("diagnostics: the error limit stops processing", "[diagnostics]") {
  SourceManager sm;
  uint32_t id = sm.addBuffer("d.rnn", std::string(100, 'x'));
  DiagnosticEngine d(sm);
  d.setCapture(true);
  d.setErrorLimit(5);
  for (uint32_t i = 0; i < 4; ++i) d.error(SourceLoc{id, i}, "x");
  CHECK_THROWS_AS(d.error(SourceLoc{id, 50}, "x"), TooManyErrors);
}

TEST_CASE("diagnostics: did you mean", "[diagnostics]") {
  CHECK(closestName("sigmod", {"sigmoid", "tanh"}) == "sigmoid");
  CHECK(closestName("xyz", {"sigmoid", "tanh"}).empty());
  CHECK(closestName("W_hi", {"W_ih", "W_hh"}) == "W_hh");
}
