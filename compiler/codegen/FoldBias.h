// Biases folded into the product before the loop (CUDA): where a product run
// for all steps at once (`W_ih·x`) is read only by sums that add it to whole
// bias vectors (`+ b_ih + b_hh`), its GEMM adds them as its epilogue
// (cuBLASLt's bias epilogue: rnnc/cuda.h's gemm_bias) and the sums lose them,
// so no step loads a bias or adds it again.
#pragma once

#include "codegen/KernelIR.h"

namespace rnnc::codegen {

/// Rewrites every Gemm kernel of `p` that runs for all rows at once (not a
/// loop's per-step product) whose output is read only by Add instructions of
/// map sweeps as wide as a row, at delay 0, each adding the same one or two
/// params: they move to KernelIR::biases (more stay in the sums). A sum of
/// two is made where rnnc/cuda.h keeps it, so a product's rows fit there.
/// 16-bit models are left as they are: cuBLASLt's bias is of the output's type,
/// so their biases would be rounded to 16 bits before the add. Returns how
/// many products it changed.
int foldBiasesIntoProducts(Program &p);

/// rnnc/cuda.h's Context::kBiasSpace: the end of each stream's cuBLAS
/// workspace, where a product's two biases are summed before its GEMM.
constexpr int64_t kBiasSpaceBytes = int64_t(1) << 20;

} // namespace rnnc::codegen
