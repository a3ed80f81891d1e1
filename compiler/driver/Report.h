// The page `rnnc show FILE --html -o report.html` writes: one self-contained
// HTML file (inline CSS and SVG, no script, nothing fetched) with the source's
// equations linked to the kernels that compute them and back, the graph drawn
// by Graphviz, the schedule as a timeline of stages per stream, the stats and
// the emitted code. The caller compiles; this file lays out and escapes.
#pragma once

#include "codegen/Bundle.h"
#include "passes/Compilation.h"
#include "support/SourceManager.h"

#include <nlohmann/json.hpp>
#include <string>

namespace rnnc {

/// What one page shows, all of it computed before the page is laid out.
struct ReportInput {
  const SourceManager *sm = nullptr;
  uint32_t mainFile = 0;        // the file given on the command line
  const Compilation *drawn = nullptr; // the graph drawn (forward, or with --backward the full graph)
  const codegen::Program *program = nullptr; // forward and backward kernels and stages
  const codegen::Bundle *bundle = nullptr;   // the emitted code shown
  nlohmann::json stats;         // statsJson of the compilation with backward
  std::string svg;              // the drawn graph, from graphSvg
  std::string title;            // the model's name
};

/// The page's id for a source line: `line-9` in the main file, `f2-line-9` in
/// an imported one (file id 2). Graph nodes link to these.
std::string sourceLineId(uint32_t file, uint32_t line, uint32_t mainFile);

/// The whole page.
std::string reportHtml(const ReportInput &in);

} // namespace rnnc
