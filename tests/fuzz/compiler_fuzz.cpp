// libFuzzer target for the compiler: the input is the text of a .rnn file,
// taken through everything `rnnc compile` does short of writing files: parse,
// Sema, lowering, autodiff, the pass pipeline, the kernel program, and the
// printed bundle for both targets. Diagnostics are kept in memory; any crash,
// sanitizer report, leak or timeout is a bug. See docs/reliability.md.
#include "codegen/Bundle.h"
#include "codegen/CudaPrinter.h"
#include "codegen/KernelIR.h"
#include "frontend/Frontend.h"
#include "frontend/Lower.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"
#include "support/Crash.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

/// Compiles one elaborated cell or model to both targets; stops at the first error.
void compileEntity(rnnc::FrontendResult &r, const rnnc::Elaboration &e) {
  auto graph = rnnc::lowerToGraph(e, *r.diags);
  if (!graph) return;
  rnnc::Objective objective = rnnc::defaultObjective(*graph);
  if ((objective.loss || !objective.outputs.empty()) && !rnnc::differentiate(*graph, objective, *r.diags)) return;
  rnnc::Compilation c;
  c.graph = std::move(*graph);
  c.optimize = true;
  if (!rnnc::runPipeline(c, *r.diags)) return;
  rnnc::codegen::Program program;
  std::string error;
  if (!rnnc::codegen::buildProgram(c, program, error)) return;
  rnnc::codegen::CudaOptions cuda;
  (void)rnnc::codegen::printBundle(program, r.sm, "cpu");
  (void)rnnc::codegen::printBundle(program, r.sm, "cuda", &cuda);
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
      compileEntity(*r, e);
      if (r->diags->hasErrors()) break;
    }
  } catch (rnnc::TooManyErrors &) {
  }
  return 0;
}
