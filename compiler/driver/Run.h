// `rnnc run` and `rnnc init`: run a compiled graph on arrays from files with
// the reference interpreter, and write initial params. Every input is checked
// (names, shapes, dtypes, T and B, index ranges) before anything is computed,
// and nothing is written until everything is computed.
#pragma once

#include "codegen/CudaPrinter.h"

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
  std::string out;                           // DIR
  bool f64 = false;
  bool compiled = false;              // the compiled engine (else the interpreter)
  std::string device = "cpu";         // the compiled engine's device: cpu or cuda
  codegen::CudaOptions cuda;          // --tf32, --cuda-graphs
  bool optimize = true;               // false: -O0
  TimeParallelOptions timeParallel;   // --time-parallel, --newton-iterations
  int64_t maxMemory = 0;              // --max-memory in bytes; 0: the machine's physical memory
  const SourceManager *sm = nullptr;  // for the equations comments of generated code
};

/// Runs `g` (lowered, not yet differentiated); prints one-line errors; returns
/// the exit code.
int runGraph(Graph g, const RunOptions &o);

/// How `rnnc init` draws a param: N(0, scale²) when normal, else U(±scale).
struct InitRule {
  bool normal = false;
  double scale = 0;
};

/// The rule of every param of e, by full name (see initialParams).
std::map<std::string, InitRule> initRules(const Elaboration &e);

/// What a bundle's manifest and param table say beyond the graph: the file's
/// dims and how `rnnc init` draws each param.
void describeForBundle(const std::map<std::string, int64_t> &dims, const Elaboration &e, codegen::Program &p);

/// Params drawn with `seed`, in declaration order (float32): cell params
/// U(±1/sqrt(H)), embedding tables N(0, 1), a model's other params by fan-in.
std::vector<io::Tensor> initialParams(const Elaboration &e, uint64_t seed);

/// The number of param values of e (a double: a product of dims may overflow int64).
double paramElements(const Elaboration &e);

/// Writes params drawn with `seed` to `path` (safetensors); returns the exit
/// code. Refused first when they need more than `maxMemory` (0: the machine's).
int initParams(const Elaboration &e, uint64_t seed, const std::string &path, int64_t maxMemory = 0);

} // namespace rnnc
