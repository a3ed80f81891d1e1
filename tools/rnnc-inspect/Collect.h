// collect(): one walk over the main file's AST that lists what clang sees
// there: kernel definitions, call sites (launches, library calls, direct calls
// of CPU kernels, each with whether its value is dropped) and kernel strings.
// It resolves each launch to a kernel name, but ties nothing together and
// names no problem: that is assemble()'s (Problems.h).
#pragma once

#include "Comment.h"
#include "Inspection.h"

#include <clang/AST/ASTContext.h>

#include <string>
#include <vector>

namespace rnnc::inspect {

/// What a call site was found to be, before launches are tied to kernels.
struct Site {
  enum class Kind { Launch, Library } kind = Kind::Launch;
  std::string function; // the enclosing named function ("" at file scope)
  std::string status;   // the type of what the call returns, when it is a status; "bool" for rnnc's launch()
  unsigned line = 0;
  bool dropped = false; // the call's value is dropped
  // Library calls:
  std::string callee;
  unsigned functionLine = 0; // where the enclosing function's definition begins
  Comment functionComment;   // the comment above the enclosing function
  // Launches:
  std::string kernel; // resolved kernel name, "" when it cannot be told
  std::string what;   // launch()'s name for the error message, "" when none
  std::string grid, block, stream, sharedMemory;
  bool cooperative = false; // rnnc::cuda::launch_cooperative or cudaLaunchCooperativeKernel
};

/// A string variable holding __global__ code: a --jit bundle's kernels.
struct KernelString {
  std::string variable, text;
  unsigned line = 0; // of the literal's first character
};

/// What one parse found.
struct Parsed {
  std::vector<Kernel> kernels;
  std::vector<Site> sites;
  std::vector<KernelString> kernelStrings;
};

/// Walks the main file of `ctx`. `cuda`: kernels are __global__ functions (else
/// the CPU target's `static void NAME(const Workspace &, ...)`). Lines are
/// 1-based, shifted by `lineOffset` (a kernel string's lines in its .cpp).
Parsed collect(clang::ASTContext &ctx, bool cuda, unsigned lineOffset);

} // namespace rnnc::inspect
