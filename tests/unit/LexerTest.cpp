#include "TestSupport.h"

#include <catch2/catch.hpp>

using namespace rnnc;
using rnnc::test::lex;

TEST_CASE("lexer: punctuation, keywords and names", "[lexer]") {
  auto l = lex("cell A(x: [I]) -> h { }");
  CHECK(l->kinds() == "'cell' name '(' name ':' '[' name ']' ')' '->' name '{' '}' newline end of file");
  CHECK(l->tokens[1].text == "A");
  CHECK_FALSE(l->diags->hasErrors());
}

TEST_CASE("lexer: t is an ordinary name and keywords are reserved", "[lexer]") {
  auto l = lex("t index dim param import model indexed");
  CHECK(l->kinds() == "name 'index' 'dim' 'param' 'import' 'model' name newline end of file");
}

TEST_CASE("lexer: numbers", "[lexer]") {
  auto l = lex("3 0.5 1e-5 2.5E+3 18446744073709551616");
  REQUIRE(l->tokens.size() == 7);
  CHECK(l->tokens[0].isInteger);
  CHECK(l->tokens[0].intValue == 3);
  CHECK_FALSE(l->tokens[1].isInteger);
  CHECK(l->tokens[1].value == 0.5);
  CHECK(l->tokens[2].value == Approx(1e-5));
  CHECK(l->tokens[3].value == 2500.0);
  CHECK(l->tokens[4].intOverflow); // 2^64 does not fit
  CHECK_FALSE(l->diags->hasErrors());
}

TEST_CASE("lexer: malformed numbers are reported", "[lexer]") {
  CHECK(lex("1.")->diags->errorCount() == 1);
  CHECK(lex("2e")->diags->errorCount() == 1);
  CHECK(lex("3x")->diags->errorCount() == 1);
}

TEST_CASE("lexer: newlines end statements except inside ( ) and [ ]", "[lexer]") {
  auto l = lex("a = f(b,\n c)\n\n\nd = [1,\n2]\n");
  CHECK(l->kinds() == "name '=' name '(' name ',' name ')' newline name '=' '[' number ',' number ']' newline "
                      "end of file");
}

TEST_CASE("lexer: comments and CRLF", "[lexer]") {
  auto l = lex("a = b # a comment with bytes \xff\xfe\r\nc = d\r\n");
  CHECK(l->kinds() == "name '=' name newline name '=' name newline end of file");
  CHECK_FALSE(l->diags->hasErrors());
}

TEST_CASE("lexer: a brace closes a group left open", "[lexer]") {
  auto l = lex("a = f(b\n}\nc");
  CHECK(l->kinds() == "name '=' name '(' name '}' newline name newline end of file");
}

TEST_CASE("lexer: invalid bytes are one error per run", "[lexer]") {
  auto l = lex(std::string("a $$$ b \0\0 c \xc3\xa9", 15));
  CHECK(l->diags->errorCount() == 3);
  CHECK(l->kinds() == "name name name newline end of file");
}

TEST_CASE("lexer: strings", "[lexer]") {
  auto l = lex("import \"dir/a \\\"b\\\".rnn\"");
  REQUIRE(l->tokens[1].kind == Tok::String);
  CHECK(l->tokens[1].stringBody == "dir/a \\\"b\\\".rnn");
  CHECK(lex("import \"abc\n")->diags->errorCount() == 1);
}

TEST_CASE("lexer: locations are byte offsets", "[lexer]") {
  auto l = lex("ab\n  cd");
  CHECK(l->tokens[0].range.begin.offset == 0);
  CHECK(l->tokens[0].range.end.offset == 2);
  CHECK(l->tokens[2].range.begin.offset == 5);
  LineCol lc = l->sm.lineCol(l->tokens[2].range.begin);
  CHECK(lc.line == 2);
  CHECK(lc.col == 3);
}
