// The CUDA printing of a loop run in parallel over time (ScanIR): the device
// helpers every such stage shares, the kernels of one stage (a chunked scan
// of affine maps: registers, warp shuffles, shared memory, carries between
// chunks; Newton's linearize and solve passes around it), their launchers and
// the stage function that issues them. docs/cuda.md, "Loops in parallel over
// time", describes the decomposition.
#pragma once

#include "codegen/CudaPrinter.h"
#include "codegen/Writer.h"

#include <functional>
#include <string>
#include <vector>

namespace rnnc::codegen {

class CudaScanPrinter : public CudaPrinter {
public:
  /// Prints stage `stage` of p, which must be one `runsInParallel` accepts.
  CudaScanPrinter(const Program &p, const SourceManager &sm, int stage);

  /// Whether the GPU runs stage `stage` in parallel over time: a loop with a
  /// scan or Newton plan whose buffers all keep every step's rows.
  static bool runsInParallel(const Program &p, int stage);
  /// Whether any stage of p does (the bundle then carries `devicePrelude`).
  static bool anyRunsInParallel(const Program &p);
  /// The __global__ functions of stage `stage`, in the order `kernels` prints them.
  static std::vector<std::string> kernelNames(const Program &p, int stage);
  /// Device helpers shared by every such stage: the affine map of K states,
  /// its composition, warp and block scans, the cut into chunks and runs.
  static std::string devicePrelude();

  /// The stage's __global__ functions, each with the comment naming its equations.
  std::string kernels();
  /// One host launcher per kernel; `kernelIndex` gives a kernel's index in kernel_[].
  std::string launchers(const std::function<int(const std::string &)> &kernelIndex) const;
  /// The stage function `stage_<N>`: the cost model's choice, then the
  /// parallel passes, or the loop's own kernels step by step.
  std::string stageFunction() const;

private:
  bool newton() const { return scan_.plan == LoopPlan::Newton; }
  std::string name(const char *pass) const; // "scan_2_steps", "newton_1_solve"
  std::string stepAt(const std::string &j) const;
  std::string header(const char *pass, const std::string &what, const std::string &params);
  void blockLoop(Writer &w, const std::string &blocks) const;
  void initialStates(Writer &w, const std::string &target) const;
  void carryLoad(Writer &w, const std::string &c, const std::string &target) const;
  void chunkStart(Writer &w) const;
  void stateRowsAt(Writer &w, int32_t delay, const std::string &target) const;
  void rowPointers(Writer &w, const Sweep &s, bool stores) const;
  void tangent(Writer &w, bool atGuess);
  void exactStep(Writer &w);
  void stepMap(Writer &w) const;
  void coefficientMap(Writer &w) const;
  void storeMap(Writer &w, const std::string &map, const std::string &base) const;
  void openRun(Writer &w) const;
  void openElements(Writer &w, const char *count) const;
  void openSequenceStates(Writer &w) const;

  std::string chunksKernel();
  std::string carriesKernel();
  std::string stepsKernel();
  std::string guessKernel();
  std::string linearizeKernel();
  std::string solveKernel();
  std::string newtonStepsKernel();
  std::string residualKernel();
  std::string serialKernel();

  int stage_;
  const StageIR &s_;
  const ScanIR &scan_;
  int64_t n_, k_, elements_, groups_; // width, states, elements side by side in a warp, groups of them per row
};

} // namespace rnnc::codegen
