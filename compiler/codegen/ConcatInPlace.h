// Concatenated pieces stored in place: where a fused kernel computes the
// pieces of a concat in one sweep only to copy them into the concat's buffer
// in the next (the LSTM's backward: dgates = concat(di, df, dg, do), read by
// the dW GEMM), each piece's store goes straight to its place in that buffer
// (Instr::storeShift) and the copying sweep is dropped.
#pragma once

#include "codegen/KernelIR.h"

namespace rnnc::codegen {

/// Rewrites every fused kernel of `p` whose sweep is one concat of pieces that
/// the kernel itself stored, each piece read by nothing else anywhere; the
/// pieces' buffers stay in the plan, unused. Kernels of loops run in parallel
/// over time are left as they are (their step is rebuilt from the sweeps).
/// Returns how many copying sweeps it removed.
int storeConcatPiecesInPlace(Program &p);

} // namespace rnnc::codegen
