// The C++ target: the shared C-like printer with rows mapped to an OpenMP
// loop (parallel when a launch has enough work), elements to an inner loop
// the compiler vectorizes, and GEMMs to CBLAS through runtime/include/rnnc/cpu.h.
#pragma once

#include "codegen/CPrinter.h"

namespace rnnc::codegen {

class CppPrinter : public CPrinter {
public:
  using CPrinter::CPrinter;

protected:
  std::string fusedKernel(const KernelIR &k) override;
  std::string libraryKernel(const KernelIR &k) override;
  std::string elementLoop(int64_t n, const std::string &indent, const std::string &reduction = "") const override;
  std::string math(const char *name) const override;
  bool drawsMasksByRow() const override { return true; }
  /// Whether a fused kernel splits its rows across a thread team (when it has
  /// the work for one); a loop run in parallel over time runs its chunks at
  /// once instead.
  virtual bool rowsInParallel(const KernelIR &k) const {
    (void)k;
    return true;
  }

private:
  std::string packedLibraryKernel(const KernelIR &k);
};

/// The whole <model>.cpp: kernels, workspace layout, forward, backward and
/// the C ABI table (runtime/include/rnnc/model.h).
std::string printCppModule(const Program &p, const SourceManager &sm);

} // namespace rnnc::codegen
