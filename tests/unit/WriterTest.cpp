// codegen::Writer, the indenting writer the host printers use: lines at the
// current depth, blocks opened and closed, statements under an `if`, and text
// from another printer kept as it is.
#include "codegen/Writer.h"

#include <catch2/catch.hpp>

using rnnc::codegen::Writer;

TEST_CASE("writer: blocks indent two spaces a level, blank lines carry none", "[writer]") {
  Writer w;
  w.open("int f(int n) {{").line("int s = 0;").open("for (int i = 0; i < {}; ++i) {{", 3).line("s += i;").close();
  w.blank().line("return s;").close();
  CHECK(w.str() == "int f(int n) {\n  int s = 0;\n  for (int i = 0; i < 3; ++i) {\n    s += i;\n  }\n\n  return s;\n}\n");
}

TEST_CASE("writer: a statement under an if, a closing line of one's own, raw text", "[writer]") {
  Writer w(1);
  w.line("if (x)").indent().line("y();").dedent();
  w.open("const int a[] = {{").line("1,").close("}};");
  CHECK(w.pad() == "  ");
  w.raw("// as printed\n");
  CHECK(w.depth() == 1);
  CHECK(w.take() == "  if (x)\n    y();\n  const int a[] = {\n    1,\n  };\n// as printed\n");
}
