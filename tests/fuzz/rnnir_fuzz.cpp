// libFuzzer target for the textual IR (ir/Reader.h): the input is a graph's
// text, as rnnc-opt reads it. Reading never crashes; a graph that reads prints
// as text that reads again and prints the same (print(read(print(read(x)))) ==
// print(read(x))); and it runs the passes rnnc-opt runs on it, -O0 for inputs
// of odd length. Diagnostics are kept in memory; any crash, sanitizer report,
// leak, timeout or broken round trip is a bug. See docs/reliability.md.
#include "ir/Printer.h"
#include "ir/Reader.h"
#include "passes/Pipeline.h"
#include "support/Crash.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace {

/// The graph in `text`, or nullopt; `sm` keeps what it points into.
std::optional<rnnc::Graph> read(rnnc::SourceManager &sm, const std::string &text) {
  rnnc::DiagnosticEngine diags(sm);
  diags.setCapture(true);
  try {
    return rnnc::readGraph(sm, sm.addBuffer("fuzz.rnnir", text), diags);
  } catch (rnnc::TooManyErrors &) {
    return std::nullopt;
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  rnnc::abortOnInternalError(); // an internal compiler error is a crash the fuzzer keeps
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rnnc::SourceManager sm;
  std::optional<rnnc::Graph> g = read(sm, std::string(reinterpret_cast<const char *>(data), size));
  if (!g) return 0;
  std::string printed = rnnc::printGraph(*g, sm);
  rnnc::SourceManager again;
  std::optional<rnnc::Graph> back = read(again, printed);
  if (!back || rnnc::printGraph(*back, again) != printed) std::abort();
  // Each pass on a fresh copy, as `rnnc-opt --pass NAME` runs it.
  for (const rnnc::PassInfo &pass : rnnc::passRegistry()) {
    if (!pass.run || (size % 2 == 1 && !pass.atO0)) continue;
    rnnc::Compilation c;
    c.graph = *g;
    c.optimize = size % 2 == 0;
    rnnc::DiagnosticEngine diags(sm);
    diags.setCapture(true);
    bool changed = false;
    try {
      (void)rnnc::runPass(pass, c, diags, changed);
    } catch (rnnc::TooManyErrors &) {
    }
  }
  return 0;
}
