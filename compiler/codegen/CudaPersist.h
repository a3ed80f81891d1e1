// Persistent loops on the GPU (docs/cuda.md#persistent-loops): a recurrent
// loop stage as one cooperative kernel for all T steps. Each block keeps its
// slice of every product's weights (rows of W for a Gemm, columns for a
// GemmT) in shared memory, loaded once. Where the step is local to units
// (unitWidth) a block owns a slice of the hidden units: every product's rows
// that feed them (an LSTM's i, f, g, o rows of unit j), the fused kernels'
// elements of them (<name>_units), a grid barrier before each product only.
// Elsewhere it computes its slice of each product's outputs, runs the fused
// kernels' bodies (<name>_step) over the step's rows like any block of their
// grid, and the blocks meet at a grid barrier after each kernel. Loops local to
// units also get a fused variant: a kernel a step per product (step_<stage>_<j>),
// its blocks' rows of the product read from global memory, then the cell for their
// units. The host picks one of these or the step-by-step launches at run time
// (rnnc/persistent.h's cost model). The products are FMA, or on tensor cores
// (mma.sync) for 16-bit models and float ones built with --tf32.
#pragma once

#include "codegen/CudaPrinter.h"
#include "codegen/KernelIR.h"
#include "codegen/Writer.h"
#include "rnnc/persistent.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rnnc::codegen {

class CudaPersistPrinter {
public:
  CudaPersistPrinter(const Program &p, const SourceManager &sm, int stage);

  /// Whether stage `stage` has a persistent variant; if not and `why` is
  /// given, why not (what `show --schedule` prints).
  static bool persistent(const Program &p, int stage, std::string *why = nullptr);
  static bool anyPersistent(const Program &p);
  /// Whether fused kernel `kernel` runs in a stage that has a persistent
  /// variant (it is then printed as a <name>_step device function too).
  static bool inPersistentStage(const Program &p, int kernel);
  /// U where the loop's step is local to units (each element i of its sweeps
  /// reads what the loop writes only at elements of unit i mod U, and no two
  /// of its values share memory): each block then owns a slice of the units,
  /// their rows of every product, and meets the others only before a product.
  /// 0 where not (or U < 16), and `why`.
  static int64_t unitWidth(const Program &p, int stage, std::string *why = nullptr);
  /// "persist_<stage>".
  static std::string kernelName(int stage);
  /// The device helpers every persistent kernel uses: the block's slice of a
  /// product, the weights' load, the product, the grid barrier.
  static std::string devicePrelude(const Program &p);
  /// A loop stage as rnnc/persistent.h's choice, the stage function and the
  /// reports see it, computed once (shape()).
  struct Shape {
    std::vector<persist::Product> products; // {outputs, reduce} of each product
    int launches = 0;                        // kernels a step, step by step
    int64_t realBytes = 0;                   // of a weight: 2 in a 16-bit model
    int64_t chipBytes = 0;                   // of a value on chip and of a state: float's in a 16-bit model
    bool tensorCores = false;                // a 16-bit model's products: mma.sync tiles (persist::Loop)
    std::string whyNot;                      // why no persistent variant; empty where there is one
    int64_t unit = 0;                        // unitWidth; 0 where blocks own slices of each product
    std::string whyNotUnits;
    int barriers = 0; // grid barriers a step: one a product by units, one a kernel not
    int64_t widest = 0; // the widest row a fused kernel sweeps (persist::Loop::widest)
    int fused = 0;      // the fused variant's launches a step (its kernels); 0 where the loop has none (no units)
    OnChip chip;        // the values a block keeps in shared memory (onChip), in the order of their regions
    int64_t chipPieces = 0; // their widths over U, summed (persist::Loop::onChip)
    bool persistent() const { return whyNot.empty(); }
    /// The weights one step reads from global memory step by step (each product's W).
    int64_t stepwiseWeightBytes() const;
    /// What the cost model reads; points into `products`.
    persist::Loop loop() const;
  };
  static Shape shape(const Program &p, int stage);
  /// The values of a loop local to units (U = `unit`) that never leave a block:
  /// one step's rows (step-local), written by a product or the block's units and
  /// read only by its units, all in the same launch of the fused variant (the
  /// kernels from one product to the next, or those before the first). The
  /// persistent and fused kernels keep them in shared memory (a product's
  /// output, an LSTM's gate pre-activations); step by step they stay in the
  /// workspace.
  static OnChip onChip(const Program &p, int stage, int64_t unit);

  /// The fused variant of a loop: a launch a step per product, the product and
  /// the fused kernels after it (`launches`, "step_<stage>_<j>"). The fused
  /// kernels before the step's first product (`lead`) run at the end of the
  /// step before's last launch, and alone before the first step
  /// ("step_<stage>_start"). A loop without products: one launch a step.
  struct FusedPlan {
    std::vector<int> lead;
    std::vector<std::vector<int>> launches;
    std::vector<std::string> names; // "step_<stage>_start" first where there is a lead, then a launch's each
  };
  static FusedPlan fusedPlan(const Program &p, int stage);
  /// fusedPlan's kernel names; none where the loop's step is not local to units.
  static std::vector<std::string> fusedKernelNames(const Program &p, int stage);

  /// The __global__ persist_<stage>, with the comment naming its equations.
  std::string kernel() const;
  /// The __global__ step_<stage>_<j> of the fused variant (empty where it has none).
  std::string fusedKernels() const;
  /// The stage function: the choice at run time, then the one cooperative
  /// launch, the fused kernels a step, or the loop's kernels step by step.
  /// `names`: kernel_[]'s (cudaKernelNames).
  void stageFunction(Writer &w, const std::vector<std::string> &names) const;

  /// What `rnnc show --schedule --target cuda` says of every loop stage:
  /// launches and weight bytes a step each way, and which way rnnc/persistent.h
  /// picks on an H100 for B in 1, 4, 16, 64, 256, and why. `--stats --json`'s "cuda_loops".
  static std::string loopsText(const Program &p);
  static nlohmann::json loopsJson(const Program &p);

private:
  /// Where a product's operands and weights are, at step rows r0 .. r0 + B.
  struct Operands {
    std::string in, out, weights;
    const char *onChip = "false"; // out is the block's rows in its shared memory (onChip)
    int64_t outputs = 0, reduce = 0;
    bool transposed = false; // a GemmT: W [reduce][outputs], the block keeps columns
  };
  Operands operands(const KernelIR &k) const;
  /// The values on chip, by name: "matmul_5, add_8".
  std::string chipNames() const;
  /// ", chip" where fused kernel `k` touches a value on chip (its <name>_units' last argument), else "".
  std::string chipArgument(const KernelIR &k) const;

  const Program &p_;
  const SourceManager &sm_;
  int stage_;
  const StageIR &s_;
  Shape shape_;
};

} // namespace rnnc::codegen
