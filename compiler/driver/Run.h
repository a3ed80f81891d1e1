// `rnnc run` and `rnnc init`: run a compiled graph on arrays from files with
// the reference interpreter, and write initial params. Every input is checked
// (names, shapes, dtypes, T and B, index ranges) before anything is computed,
// and nothing is written until everything is computed.
#pragma once

#include "codegen/CudaPrinter.h"
#include "driver/Compiler.h"

#include "frontend/ParamInit.h"
#include "frontend/Sema.h"
#include "codegen/KernelIR.h"
#include "io/Array.h"
#include "ir/Graph.h"

#include <map>
#include <string>
#include <vector>

namespace rnnc {

struct RunOptions {
  std::string params;                       // P.safetensors
  std::map<std::string, std::string> inputs; // NAME -> X.npy
  std::map<std::string, std::string> states; // NAME -> S.npy
  bool grad = false;                         // --grad given
  bool paramGradsOnly = false;               // --param-grads-only: no input or initial-state gradients
  std::map<std::string, std::string> seeds;  // output NAME -> DY.npy
  std::map<std::string, std::string> finalSeeds; // --final-grad: state NAME -> DS.npy
  std::string out;                           // DIR
  bool f64 = false;
  bool compiled = false;              // the compiled engine (else the interpreter)
  codegen::Target device = codegen::Target::Cpu; // the compiled engine's device
  codegen::CudaOptions cuda;          // --tf32, --cuda-graphs
  CompileOptions compile;             // -O0, --time-parallel, --newton-iterations
  int64_t maxMemory = 0;              // --max-memory in bytes; 0: the machine's physical memory
  bool train = false;                 // --mode train: dropout and zoneout draw masks
  uint64_t seed = 0;                  // --seed: the masks' key
  std::string lengths;                // --lengths L.npy (the graph was built with them: passes/ApplyLengths.h)
  const SourceManager *sm = nullptr;  // for the equations comments of generated code
};

/// Runs `g` (lowered, not yet differentiated); prints one-line errors; returns
/// the exit code.
int runGraph(Graph g, const RunOptions &o);

/// Writes params drawn with `seed` to `path` (safetensors); returns the exit
/// code. Refused first when they need more than `maxMemory` (0: the machine's).
int initParams(const Elaboration &e, uint64_t seed, const std::string &path, int64_t maxMemory = 0);

} // namespace rnnc
