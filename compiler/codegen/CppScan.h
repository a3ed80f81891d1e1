// The C++ printing of a loop run in parallel over time (ScanIR): a function
// per such stage, with chunks across OpenMP threads and the carries between
// them on the calling thread; the loop's own kernels run each chunk's steps.
#pragma once

#include "codegen/CppPrinter.h"
#include "codegen/Writer.h"

#include <functional>
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
  void stepCalls(Writer &w, const StageIR &s, const std::string &t) const;
  void loadPointers(Writer &w, const ScanIR &scan, int direction, bool states) const;
  void compose(Writer &w, const ScanIR &scan, const std::string &acc) const;
  void openElements(Writer &w, int64_t n) const;
  void carries(Writer &w, const StageIR &s, bool intoState, const std::string &label) const;
  void composeChunks(Writer &w, const StageIR &s, const std::function<void(Writer &)> &setup,
                     const std::function<void(Writer &)> &step) const;
  void chunkSteps(Writer &w, const StageIR &s) const;
  void lastSteps(Writer &w, const StageIR &s) const;
  void sequentialLoop(Writer &w, const StageIR &s) const;
  void scanBody(Writer &w, const StageIR &s);
  void newtonBody(Writer &w, const StageIR &s, int index);
};

} // namespace rnnc::codegen
