// The rows past a sequence's end (--lengths): what a fused kernel must still
// compute there. A row of step t is stopped when t >= len[b]; there every
// `active` of that step or a later one is 0, so the kernel's sweeps fold to
// the carries (`s' = s'[t - d]`), zeros, and nothing else that anything reads.
#pragma once

#include "codegen/KernelIR.h"

#include <functional>

namespace rnnc::codegen {

/// Gives each fused kernel of a --lengths program that can take them its
/// `stopped` sweeps (KernelIR::stopped): its sweeps with `active` = 0 folded
/// through, keeping only the stores some reader of a stopped row needs. A
/// value stays needed where a library call, a time-parallel loop, the host
/// (ports) or a kernel's full rows may read it; constants reach the kernels
/// that read them in the same row. Nothing changes without --lengths.
/// `folds` says which fused kernels the target can fold (CUDA: not those
/// that load four elements a thread).
void foldStoppedRows(Program &p, const std::function<bool(const KernelIR &)> &folds);

} // namespace rnnc::codegen
