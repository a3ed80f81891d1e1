// The C++ printing of a loop run in parallel over time (ScanIR): a function
// per such stage, with chunks across OpenMP threads and the carries between
// them on the calling thread; the loop's own kernels run each chunk's steps.
#pragma once

#include "codegen/CppPrinter.h"

#include <set>

namespace rnnc::codegen {

class CppScanPrinter : public CppPrinter {
public:
  CppScanPrinter(const Program &p, const SourceManager &sm);

  /// The name of stage `index`'s function ("scan_2", "newton_3").
  static std::string functionName(const StageIR &s, int index);
  /// `static void scan_2(const Workspace &ws, ..., int64_t T, int64_t B) {...}`
  /// for stage `index` (a scan or Newton plan), with its comment.
  std::string stageFunction(const StageIR &s, int index);

protected:
  bool rowsInParallel(const KernelIR &k) const override;

private:
  std::set<const KernelIR *> inParallelLoops_; // kernels of loops run in parallel over time
  std::string stepCalls(const StageIR &s, const std::string &t, const std::string &indent) const;
  std::string loadPointers(const ScanIR &scan, int direction, bool states, const std::string &indent) const;
  std::string compose(const ScanIR &scan, const std::string &acc, const std::string &indent) const;
  std::string carries(const StageIR &s, const std::string &indent, bool intoState, const std::string &label) const;
  std::string composeChunks(const StageIR &s, const std::string &setup, const std::string &step,
                            const std::string &indent) const;
  std::string chunkSteps(const StageIR &s) const;
  std::string sequentialLoop(const StageIR &s, const std::string &indent) const;
  std::string scanBody(const StageIR &s);
  std::string newtonBody(const StageIR &s, int index);
};

} // namespace rnnc::codegen
