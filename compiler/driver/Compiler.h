// The one way through the compiler: a .rnn source and its options become a
// checked program, a graph (differentiated when asked), the registry's passes,
// kernels and a bundle. Every command, the tests and the Python package compile
// through these calls; each stage can also be entered alone.
#pragma once

#include "codegen/Bundle.h"
#include "codegen/CudaPrinter.h"
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rnnc {

/// What backward computes: nothing (forward only), the params' gradients
/// (training), or those and the inputs' and initial states' (`rnnc run --grad`).
/// The objective is the file's loss, else every output's <y, dy>.
enum class Gradients : uint8_t { None, Params, All };

struct CompileOptions {
  std::vector<DimOverride> dims;         // -D NAME=VALUE
  std::string entry;                     // --entry; empty: the file's only model, else its only root cell
  bool color = false;                    // diagnostics in color
  bool optimize = true;                  // false: -O0
  TimeParallelOptions timeParallel;      // --time-parallel, --newton-iterations
  Gradients gradients = Gradients::None;
  bool lengths = false;                  // --lengths: runs take each sequence's length (passes/ApplyLengths.h)
  DType dtype = DType::F32;              // --dtype (docs/precision.md)
};

/// The --dtype a name gives (f32, f64, bf16, f16), or nullopt.
std::optional<DType> parseDType(std::string_view name);

/// The mode `--time-parallel NAME` names (off, scan, newton; anything else: auto).
TimeParallelMode timeParallelMode(std::string_view name);

/// A file read and checked, and the cell or model chosen from it.
struct CheckedProgram {
  std::unique_ptr<FrontendResult> file;
  const Elaboration *entity = nullptr;
  std::string path;
};

/// Reads and checks `path` (or `text` in its place, under that name) and picks
/// o.entry. Diagnostics print as they come; on an error, with their summary,
/// and nullopt. `pickEntity` false: only the file (`rnnc check` compiles every
/// complete root itself).
std::optional<CheckedProgram> checkProgram(const std::string &path, const CompileOptions &o,
                                           const std::string *text = nullptr, bool pickEntity = true);

/// p's entity lowered, differentiated as o.gradients asks, and through the
/// passes (observe sees "lower" and each pass). Null after the diagnostics
/// (not their summary: see finishDiagnostics).
std::unique_ptr<Compilation> compileProgram(const CheckedProgram &p, const Elaboration &entity, const CompileOptions &o,
                                            const PassObserver &observe = {});
inline std::unique_ptr<Compilation> compileProgram(const CheckedProgram &p, const CompileOptions &o,
                                                   const PassObserver &observe = {}) {
  return compileProgram(p, *p.entity, o, observe);
}

/// A graph already lowered (and differentiated by its caller) through the
/// passes; o.gradients is not read. Null after reporting to `diags`.
std::unique_ptr<Compilation> compileGraph(Graph g, const CompileOptions &o, DiagnosticEngine &diags,
                                          const PassObserver &observe = {});

/// "2 warnings and 1 error generated." for p's file (nothing when clean).
void finishDiagnostics(const CheckedProgram &p);

struct BundleOptions {
  codegen::Target target = codegen::Target::Cpu;
  codegen::CudaOptions cuda; // --jit, --tf32, --cuda-graphs
};

/// The kernel IR of c, with what a bundle says beyond the graph when `entity`
/// is given (the file's dims, how each param is drawn). False with `error`.
bool kernelsOf(const Compilation &c, const CheckedProgram *entity, codegen::Program &program, std::string &error);

/// c's bundle for o.target. nullopt with `error`.
std::optional<codegen::Bundle> bundleOf(const Compilation &c, const CheckedProgram *entity, const SourceManager &sm,
                                        const BundleOptions &o, std::string &error);

/// The whole way, source to bundle: checkProgram, compileProgram, bundleOf.
/// Diagnostics and errors print to stderr; nullopt after them.
std::optional<codegen::Bundle> compileToBundle(const std::string &path, const CompileOptions &o, const BundleOptions &b,
                                               const std::string *text = nullptr);

} // namespace rnnc
