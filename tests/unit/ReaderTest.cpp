// The textual IR read back (ir/Reader.h). For every sample, with and without
// its backward pass, optimized and at -O0, after every pass: the printed graph
// reads back to the same graph and prints the same text, and one pass run on
// the graph read back (runPass, as rnnc-opt runs it) prints what the pipeline
// printed after that pass. Then malformed and hostile text: located errors.
#include "TestSupport.h"

#include "driver/Show.h"
#include "frontend/Sema.h"
#include "ir/Printer.h"
#include "ir/Reader.h"
#include "ir/ReaderSyntax.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>

using namespace rnnc;

namespace {

/// A graph's text read into its own source manager, diagnostics captured.
struct Read {
  SourceManager sm;
  std::unique_ptr<DiagnosticEngine> diags;
  std::optional<Graph> graph;
  std::vector<std::string> errors; // "line:col: message"
};

std::unique_ptr<Read> readText(const std::string &text) {
  auto r = std::make_unique<Read>();
  r->diags = std::make_unique<DiagnosticEngine>(r->sm);
  r->diags->setCapture(true);
  uint32_t file = r->sm.addBuffer("test.rnnir", text);
  try {
    r->graph = readGraph(r->sm, file, *r->diags);
  } catch (TooManyErrors &) {}
  for (const Diagnostic &d : r->diags->captured()) {
    LineCol lc = d.range.valid() ? r->sm.lineCol(d.range.begin) : LineCol{};
    r->errors.push_back(fmt::format("{}:{}: {}", lc.line, lc.col, d.message));
  }
  return r;
}

/// The first difference between two graphs in what a pass reads (locations
/// aside, which only print), or "".
std::string difference(const Graph &a, const Graph &b) {
  if (a.name != b.name) return "name";
  if (a.nodes.size() != b.nodes.size()) return fmt::format("{} nodes, read back {}", a.nodes.size(), b.nodes.size());
  for (NodeId id = 0; id < a.nodes.size(); ++id) {
    const Node &x = a.node(id), &y = b.node(id);
    if (x.dead != y.dead) return fmt::format("%{} dead", id);
    if (x.dead) continue;
    bool sameValue = std::memcmp(&x.value, &y.value, sizeof x.value) == 0 || (x.value != x.value && y.value != y.value);
    bool sameInputs = x.inputs.size() == y.inputs.size();
    for (size_t i = 0; sameInputs && i < x.inputs.size(); ++i) sameInputs = x.inputs[i] == y.inputs[i];
    if (x.op != y.op || x.width != y.width || x.isIndex != y.isIndex || !sameInputs || x.params != y.params ||
        !sameValue || x.offset != y.offset || x.name != y.name || x.backward != y.backward)
      return fmt::format("%{}", id);
  }
  for (size_t i = 0; i < a.params.size(); ++i)
    if (i >= b.params.size() || a.params[i].name != b.params[i].name || a.params[i].shape != b.params[i].shape ||
        a.params[i].stackedWith != b.params[i].stackedWith)
      return "param " + a.params[i].name;
  auto samePorts = [](const std::vector<GraphPort> &x, const std::vector<GraphPort> &y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].name != y[i].name || x[i].value != y[i].value) return false;
    return true;
  };
  if (a.params.size() != b.params.size()) return "params";
  if (!samePorts(a.inputs, b.inputs)) return "inputs";
  if (!samePorts(a.outputs, b.outputs)) return "outputs";
  if (a.loss != b.loss) return "loss";
  if (!samePorts(a.grads.seeds, b.grads.seeds) || !samePorts(a.grads.inputs, b.grads.inputs) ||
      a.grads.params != b.grads.params || a.grads.states != b.grads.states)
    return "gradient ports";
  return "";
}

struct Mode {
  bool optimize;
  bool backward;
};

/// Every check of the file comment, on one compilation of one entity.
void checkCompilation(FrontendResult &fe, const Elaboration &e, Mode mode) {
  std::optional<Graph> lowered = lowerToGraph(e, *fe.diags);
  REQUIRE(lowered);
  if (mode.backward) {
    Objective objective = defaultObjective(*lowered);
    if (objective.loss || !objective.outputs.empty()) REQUIRE(differentiate(*lowered, objective, *fe.diags));
  }
  Compilation c;
  c.graph = std::move(*lowered);
  c.optimize = mode.optimize;
  auto roundTrip = [&](const std::string &after) {
    INFO("after " << after);
    std::string printed = printGraph(c.graph, fe.sm);
    auto r = readText(printed);
    CAPTURE(r->errors);
    REQUIRE(r->graph);
    CHECK(printGraph(*r->graph, r->sm) == printed);
    CHECK(difference(c.graph, *r->graph) == "");
    return printed;
  };
  std::string before = roundTrip("lower");
  PassObserver observe = [&](const std::string &name, const Compilation &now, bool) {
    INFO("the pass " << name << " on the graph read back");
    const PassInfo &pass = *findPass(name);
    auto r = readText(before);
    REQUIRE(r->graph);
    Compilation alone;
    alone.graph = std::move(*r->graph);
    alone.optimize = mode.optimize;
    bool changed = false;
    REQUIRE(runPass(pass, alone, *r->diags, changed));
    CHECK(passDumpText(pass.dump, alone, r->sm) == passDumpText(pass.dump, now, fe.sm));
    before = roundTrip(name);
  };
  REQUIRE(runPipeline(c, *fe.diags, observe));
}

std::vector<std::string> samples() {
  std::vector<std::string> paths;
  for (const auto &entry : std::filesystem::directory_iterator(RNNC_SAMPLES_DIR))
    if (entry.path().extension() == ".rnn") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

} // namespace

TEST_CASE("reader: every sample's graph after every pass reads back and prints the same", "[reader][samples]") {
  std::vector<std::string> paths = samples();
  REQUIRE(paths.size() >= 19);
  for (const std::string &path : paths) {
    DYNAMIC_SECTION(std::filesystem::path(path).filename().string()) {
      FrontendOptions options;
      options.capture = true;
      if (std::filesystem::path(path).filename() == "gru.rnn")
        options.dims = {{"I", 8}, {"H", 16}}; // a library: no dims
      auto fe = runFrontend(path, options);
      REQUIRE(fe->ok());
      for (const Elaboration &e : fe->sema.entities) {
        if (!e.complete) continue;
        for (Mode mode : {Mode{true, false}, Mode{true, true}, Mode{false, false}, Mode{false, true}}) {
          INFO(e.decl->name.name << (mode.optimize ? "" : " -O0") << (mode.backward ? " with backward" : ""));
          checkCompilation(*fe, e, mode);
        }
      }
    }
  }
}

TEST_CASE("reader: a hand-written graph", "[reader]") {
  auto r = readText("// an LSTM-like step, by hand\n"
                    "graph G {\n"
                    "  param W: [8, 4] stacked with U\n"
                    "  param U: [8, 4]\n"
                    "  param b: [8]\n"
                    "\n"
                    "  %0 = input x : [4]   // a port\n"
                    "  %3 = matmul W, U, %0 : [16]  # wu @cell.rnn:3,4 @\"my cell.rnn\":7\n"
                    "  %4 = slice %3[8:16] : [8]\n"
                    "  %5 = param b : [8]\n"
                    "  %7 = add %4, %5, %9[t-2] : [8]  # h\n"
                    "  %8 = const -0.5 : [1]\n"
                    "  %9 = mul %7, %8 : [8]\n"
                    "  %10 = input i : index[8]\n"
                    "  %11 = cross_entropy %7, %10 : [1]\n"
                    "  %12 = neg %11 : [1] bwd\n"
                    "  next %14\n"
                    "  output h = %7[t+1]\n"
                    "  loss = %11\n"
                    "}\n");
  CAPTURE(r->errors);
  REQUIRE(r->graph);
  const Graph &g = *r->graph;
  CHECK(g.name == "G");
  REQUIRE(g.nodes.size() == 14);
  CHECK(g.node(13).dead);
  CHECK(g.node(1).dead);
  CHECK(g.node(3).params == std::vector<std::string>{"W", "U"});
  CHECK(g.param("W")->stackedWith == std::vector<std::string>{"W", "U"});
  CHECK(g.node(4).offset == 8);
  CHECK(g.node(5).name == "b");
  CHECK(g.node(7).inputs[2] == Edge(9, 2));
  CHECK(g.node(7).name == "h");
  CHECK(g.node(8).value == -0.5);
  CHECK(g.node(12).backward);
  CHECK(g.node(10).isIndex);
  REQUIRE(g.inputs.size() == 2);
  CHECK(g.inputs[1].name == "i");
  CHECK(g.outputs[0].value == Edge(7, -1));
  CHECK(g.loss == NodeId{11});
  REQUIRE(g.node(3).locs.size() == 3);
  CHECK(locText(r->sm, g.node(3).locs[1]) == "cell.rnn:4");
  CHECK(locText(r->sm, g.node(3).locs[2]) == "my cell.rnn:7");
  // An edge points at where it is written.
  CHECK(r->sm.lineCol(g.node(7).inputs[2].loc.begin).line == 11);
  CHECK(r->sm.lineCol(g.node(7).inputs[2].loc.begin).col == 20);
  CHECK(printGraph(g, r->sm) == "graph G {\n"
                                "  param W: [8, 4] stacked with U\n"
                                "  param U: [8, 4]\n"
                                "  param b: [8]\n"
                                "  %0 = input x : [4]\n"
                                "  %3 = matmul W, U, %0 : [16]  # wu @cell.rnn:3,4 @\"my cell.rnn\":7\n"
                                "  %4 = slice %3[8:16] : [8]\n"
                                "  %5 = param b : [8]\n"
                                "  %7 = add %4, %5, %9[t-2] : [8]  # h\n"
                                "  %8 = const -0.5 : [1]\n"
                                "  %9 = mul %7, %8 : [8]\n"
                                "  %10 = input i : index[8]\n"
                                "  %11 = cross_entropy %7, %10 : [1]\n"
                                "  %12 = neg %11 : [1] bwd\n"
                                "  next %14\n"
                                "  output h = %7[t+1]\n"
                                "  loss = %11\n"
                                "}\n");
}

TEST_CASE("reader: names that are words of the grammar", "[reader]") {
  const std::string text = "graph graph {\n"
                           "  param at: [4, 4] stacked with with\n"
                           "  param with: [4, 4]\n"
                           "  param index: [4]\n"
                           "  %0 = input index : [4]\n"
                           "  %1 = matmul at, with, %0 : [8]  # bwd\n"
                           "  %2 = slice %1[0:4] : [4]  # next\n"
                           "  %3 = param index : [4]\n"
                           "  %4 = pad %3 at 0 : [8]  # at @at:1\n"
                           "  output loss = %4\n"
                           "  output grad = %2\n"
                           "}\n";
  auto r = readText(text);
  CAPTURE(r->errors);
  REQUIRE(r->graph);
  CHECK(r->graph->node(1).name == "bwd");
  CHECK(!r->graph->node(1).backward);
  CHECK(printGraph(*r->graph, r->sm) == text);
}

TEST_CASE("reader: consts print and read back bit for bit", "[reader]") {
  for (double v : {0.1, -0.0, 1e-300, 6.02214076e23, 1.0 / 3, 5e-324, HUGE_VAL, -HUGE_VAL}) {
    std::string text = fmt::format("graph C {{\n  %0 = const {} : [1]\n  output c = %0\n}}\n", v);
    auto r = readText(text);
    CAPTURE(text, r->errors);
    REQUIRE(r->graph);
    CHECK(std::memcmp(&r->graph->node(0).value, &v, sizeof v) == 0);
    CHECK(printGraph(*r->graph, r->sm) == text);
  }
}

TEST_CASE("reader: syntax errors name their line and column", "[reader][errors]") {
  using V = std::vector<std::string>;
  auto errors = [](const std::string &body) { return readText("graph G {\n" + body + "}\n")->errors; };
  CHECK(readText("")->errors == V{"1:1: expected 'graph NAME {': the file holds no graph"});
  CHECK(readText("graph G {\n  %0 = input x : [4]\n")->errors == V{"3:1: expected '}' to close the graph"});
  CHECK(readText("grahp G {\n}\n")->errors == V{"1:1: expected 'graph' to begin the file (graph NAME {)"});
  CHECK(readText("graph G {\n}\n}\n")->errors == V{"3:1: unexpected text after the graph's closing '}'"});
  CHECK(errors("  %0 = tanhh %1 : [4]\n") == V{"2:8: unknown op 'tanhh'; did you mean 'tanh'?"});
  CHECK(errors("  %0 = input x : [4\n") == V{"2:20: expected ']' to close the node's width"});
  CHECK(errors("  %0 = input x : [0]\n") == V{"2:19: a width 0 is below 1"});
  CHECK(errors("  %0 = input x : [2147483648]\n") ==
        V{"2:19: a width 2147483648 is too large (the limit is 2147483647)"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = tanh %0[t-16777217] : [4]\n") ==
        V{"3:18: delay 16777217 is too large (the limit is 16777216)"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = tanh %0[t*1] : [4]\n") ==
        V{"3:17: expected '-' or '+' after 't' in a delay, found '*'"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = slice %0 : [2]\n") ==
        V{"3:17: a slice says which elements it takes: slice %3[first:end]"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = tanh %0[0:2] : [2]\n") ==
        V{"3:15: only a slice takes a range [first:end]"});
  CHECK(errors("  %0 = const 1.5x : [1]\n") == V{"2:14: expected a number, found '1.5x'"});
  CHECK(errors("  # a comment\n") ==
        V{"2:3: expected a statement: comments begin with '//' (a '#' note ends a node's line)"});
  CHECK(errors("  param W: [2, 3, 4]\n") == V{"2:12: a param is a vector [n] or a matrix [rows, cols]"});
  CHECK(errors("  %0 = input x : [4] # @a.rnn:0\n") == V{"2:31: a line 0 is below 1"});
  CHECK(errors("  %0 = input x : [4] # @\"a.rnn:3\n") == V{"2:33: the file name's closing '\"' is missing"});
  CHECK(errors("  foo\n") ==
        V{"2:3: expected a statement (param, %N = op ..., output, loss, grad, next or '}'), found 'foo'"});
  CHECK(errors("  output y = %0 junk\n") == V{"2:17: unexpected 'junk' after the value"});
  // One error per bad line; the others are still read.
  CHECK(errors("  %0 = foo : [1]\n  %1 = input x : [4]\n  %2 = bar : [1]\n").size() == 2);
}

TEST_CASE("reader: what the text names must exist and fit", "[reader][errors]") {
  using V = std::vector<std::string>;
  auto errors = [](const std::string &body) { return readText("graph G {\n" + body + "}\n")->errors; };
  CHECK(errors("  %0 = input x : [4]\n  %1 = tanh %7 : [4]\n") == V{"3:13: %7 is not defined"});
  CHECK(errors("  %0 = input x : [4]\n  %0 = input y : [4]\n") == V{"3:3: %0 is defined twice"});
  CHECK(errors("  param W_ih: [4, 4]\n  %0 = input x : [4]\n  %1 = matmul W_hi, %0 : [4]\n") ==
        V{"4:15: unknown param 'W_hi'; did you mean 'W_ih'?"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = add W, %0 : [4]\n") == V{"3:12: add takes no names"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = tanh %0 : index[4]\n") == V{"3:18: only an input is an index"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = slice %0[1:3] : [3]\n") ==
        V{"3:16: the slice [1:3] takes 2 elements, its type says 3"});
  CHECK(errors("  param A: [2, 3]\n  param B: [2, 3]\n  %0 = input x : [3]\n  %1 = matmul A, B, %0 : [4]\n") ==
        V{"5:3: a matmul of several params reads one block, in its order: declare `param A: [...] stacked with B`"});
  CHECK(errors("  param A: [2, 3] stacked with B\n  param B: [2, 4]\n") ==
        V{"2:32: a block stacks matrices with as many columns by rows: 'A' is [2, 3], 'B' is [2, 4]"});
  CHECK(errors("  param A: [2, 3] stacked with B\n  param B: [2, 3] stacked with A\n") ==
        V{"3:9: 'B' is already in the block of 'A' (a param lies in one block)"});
  CHECK(errors("  %0 = input x : [4]\n  loss = %0[t-1]\n") == V{"3:10: the loss is a node (%0), not a delayed read"});
  CHECK(errors("  %0 = input x : [4]\n  grad param W = %0\n") == V{"3:14: unknown param 'W'"});
  // The verifier's problems are user errors at the node they name.
  CHECK(errors("  %0 = input x : [4]\n  %1 = input y : [8]\n  %2 = add %0, %1 : [4]\n") ==
        V{"4:3: invalid graph: %2 (add): input 1 is 8 wide, the node 4"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = add %0, %2 : [4]\n  %2 = tanh %1 : [4]\n") ==
        V{"3:3: invalid graph: a cycle of delay-0 edges through %1"});
  CHECK(errors("  %0 = input x : [4]\n  %1 = tanh %0 : [4] bwd\n  %2 = tanh %1 : [4]\n") ==
        V{"4:3: invalid graph: %2 (tanh) is forward but reads the backward value %1"});
}

TEST_CASE("reader: hostile sizes are refused before anything is allocated", "[reader][errors]") {
  // A node id may not exceed 16 per byte of the file: this file is 38 bytes.
  auto r = readText("graph G {\n  %9999 = const 1 : [1]\n}\n");
  CHECK(r->errors == std::vector<std::string>{"2:4: node id 9999 is too large (the limit is 576)"});
  // Lines of locations are bounded in all.
  std::string many = "graph G {\n";
  for (int i = 0; i < 3; ++i) many += fmt::format("  %{} = const 1 : [1]  # @f{}.rnn:16000000\n", i, i);
  r = readText(many + "}\n");
  REQUIRE(r->errors.size() == 1);
  CHECK(r->errors[0] == "3:26: the notes' locations span more than 16777216 lines in all");
  // The error limit stops a file of errors.
  std::string bad = "graph G {\n";
  for (int i = 0; i < 100; ++i) bad += "  %0 = ?\n";
  r = readText(bad + "}\n");
  CHECK(r->errors.size() == DiagnosticEngine::kDefaultErrorLimit);
  STATIC_REQUIRE(ReadLimits::kMaxWidth == kMaxSize); // the frontend's bound on a size
}
