// What rnnc-inspect reads from an emitted source: its kernels with their
// launch sites, its library calls, and the problems the emitter must never
// produce. inspect() (Inspect.h) fills it from the AST alone; Report.h prints it.
#pragma once

#include <string>
#include <vector>

namespace rnnc::inspect {

struct Parameter {
  std::string type; // as written: "const real *__restrict__"
  std::string name; // "" when unnamed
};

/// Where a kernel is launched: source text of each launch argument. On the
/// CPU a launch is a plain call, and grid, block, stream and shared memory
/// are empty.
struct Launch {
  std::string function; // the enclosing function: "launch_fused_2"
  std::string grid, block, stream, sharedMemory;
  unsigned line = 0;
  bool cooperative = false; // launch_cooperative: all blocks live at once (a persistent loop)
};

struct Kernel {
  std::string name;
  unsigned line = 0;
  std::vector<Parameter> parameters;
  std::string launchBounds;           // "256", "256, 2"; "" when none
  std::vector<std::string> equations; // "lstm.rnn:9", as the comment names them
  bool helper = false;                // the comment above starts "rnnc helper:"
  std::vector<Launch> launches;
};

/// A call of the CUDA runtime, cuBLAS, NVRTC or the driver API (anything
/// returning one of their status types), or of CBLAS on the CPU.
struct LibraryCall {
  std::string callee;   // "cudaMemsetAsync", "gemm"
  std::string function; // the enclosing function
  std::string status;   // "cudaError_t", "cublasStatus_t", ...; "" when it returns none (CBLAS)
  bool checked = true;  // the status is used (always true without one)
  std::vector<std::string> equations; // named by the comment above the enclosing function ("lstm.rnn:9")
  unsigned line = 0;
};

struct Problem {
  std::string kind; // "never-launched", "unchecked-status", "no-equation", "unknown-kernel", "launch-name-mismatch"
  std::string message;
  unsigned line = 0;
};

struct Inspection {
  std::string file;
  std::string language;     // "cuda" or "c++"
  std::string kernelString; // a --jit host part: the variable whose string holds the kernels; else ""
  std::vector<Kernel> kernels;
  std::vector<LibraryCall> libraryCalls;
  std::vector<Problem> problems;
};

} // namespace rnnc::inspect
