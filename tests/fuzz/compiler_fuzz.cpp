// libFuzzer target for the compiler: the input is the text of a .rnn file,
// taken through everything `rnnc compile` does short of writing files: parse,
// Sema, lowering, autodiff, the pass pipeline (inputs of odd length at -O0),
// the kernel program, and the printed bundle for both targets; and, when small
// enough, the reference interpreter runs the differentiated graph on 3 steps
// of 2 sequences.
// Diagnostics are kept in memory; any crash, sanitizer report, leak or timeout
// is a bug. See docs/reliability.md.
#include "codegen/Bundle.h"
#include "codegen/CudaPrinter.h"
#include "driver/Compiler.h"
#include "frontend/Frontend.h"
#include "frontend/Lower.h"
#include "interp/Interpreter.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"
#include "support/Crash.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace {

/// Runs the interpreter (forward and the objective's backward) on random
/// values for 3 steps of 2 sequences, unless that needs more than 16 MiB or
/// the params have more than 20,000 values.
void interpretSmall(const rnnc::Graph &g, const rnnc::Objective &objective) {
  constexpr int64_t T = 3, B = 2;
  if (rnnc::interpreterBytes(g, T, B) > (16 << 20)) return;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> value(-1, 1);
  auto randoms = [&](double n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double &x : v) x = value(rng);
    return v;
  };
  rnnc::InterpInputs in;
  in.T = T;
  in.B = B;
  double paramValues = 0;
  for (const rnnc::GraphParam &p : g.params) {
    double n = 1;
    for (int64_t d : p.shape) n *= static_cast<double>(d);
    if ((paramValues += n) > 2e4) return;  // keeps an execution well under a second
    in.params[p.name] = randoms(n);
  }
  for (const rnnc::GraphPort &p : g.inputs) {
    const rnnc::Node &n = g.node(p.value.src);
    if (n.isIndex) {
      std::vector<double> v(T * B);
      for (double &x : v) x = static_cast<double>(rng() % static_cast<uint64_t>(std::max<int64_t>(n.width, 1)));
      in.inputs[p.name] = v;
    } else {
      in.inputs[p.name] = randoms(static_cast<double>(T * B * n.width));
    }
  }
  for (const std::string &name : objective.outputs)
    for (const rnnc::GraphPort &o : g.outputs)
      if (o.name == name) in.seeds[name] = randoms(static_cast<double>(T * B * g.node(o.value.src).width));
  (void)rnnc::interpret(g, in);
}

/// Compiles one elaborated cell or model to both targets; stops at the first error.
void compileEntity(rnnc::FrontendResult &r, const rnnc::Elaboration &e, bool optimize) {
  auto graph = rnnc::lowerToGraph(e, *r.diags);
  if (!graph) return;
  rnnc::Objective objective = rnnc::defaultObjective(*graph);
  if ((objective.loss || !objective.outputs.empty()) && !rnnc::differentiate(*graph, objective, *r.diags)) return;
  interpretSmall(*graph, objective);
  rnnc::CompileOptions o;
  o.optimize = optimize;
  auto c = rnnc::compileGraph(std::move(*graph), o, *r.diags);
  if (!c) return;
  std::string error;
  for (rnnc::codegen::Target target : {rnnc::codegen::Target::Cpu, rnnc::codegen::Target::Cuda}) {
    rnnc::BundleOptions b;
    b.target = target;
    if (!rnnc::bundleOf(*c, nullptr, r.sm, b, error)) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  rnnc::abortOnInternalError();  // an internal compiler error is a crash the fuzzer keeps
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  rnnc::FrontendOptions options;
  options.capture = true;
  try {
    auto r = rnnc::runFrontend("fuzz.rnn", options, &text);
    if (!r->ok()) return 0;
    // A file may declare many entities; the first few cover every path.
    int compiled = 0;
    for (const rnnc::Elaboration &e : r->sema.entities) {
      if (!e.complete) continue;
      if (++compiled > 3) break;
      compileEntity(*r, e, /*optimize=*/size % 2 == 0);  // odd lengths: -O0, the baseline pipeline
      if (r->diags->hasErrors()) break;
    }
  } catch (rnnc::TooManyErrors &) {
  }
  return 0;
}
