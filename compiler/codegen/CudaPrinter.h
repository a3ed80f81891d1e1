// The CUDA target: the shared C-like printer with rows mapped to blocks and
// elements to threads. A kernel of one map sweep is a flat grid-stride loop
// over rows × elements; a kernel of several sweeps (or a reduction) gives
// each row a block, with __syncthreads() between sweeps and warp-shuffle
// block reductions. GEMMs are cuBLAS calls (runtime/include/rnnc/cuda.h).
#pragma once

#include "codegen/CPrinter.h"

#include <map>

namespace rnnc::codegen {

/// Where a loop's value kept on chip lives in a block's shared memory (CudaPersist.h's onChip):
/// from `offset` pieces of the block's units per sequence, `pieces` of them (its width over U)
/// per sequence, a step's rows one after another.
struct ChipRegion {
  int64_t offset = 0, pieces = 0;
};
using OnChip = std::map<int, ChipRegion>; // buffer -> its region

/// Whether fused kernel `k` reads or writes a value kept on chip.
bool touchesChip(const KernelIR &k, const OnChip &chip);

struct CudaOptions {
  bool jit = false;        // kernels as a string for NVRTC, host code as plain C++
  bool tf32 = false;       // cuBLAS may use TF32 tensor cores for float GEMMs
  bool cudaGraphs = false; // each loop stage captured once as a CUDA graph and replayed
};

class CudaPrinter : public CPrinter {
public:
  using CPrinter::CPrinter;

  /// Threads per block of a fused kernel, and whether it is one flat sweep.
  static int threadsOf(const KernelIR &k, const Program &p);
  static bool isFlat(const KernelIR &k);
  /// Elements per thread of a map sweep: 4 when every row it touches and
  /// every offset it reads at is a multiple of 4 elements (16-byte loads and
  /// stores for float), else 1. A flat kernel's (its rows offset by the
  /// thread's elements) also reads no slice, no row both as a vector and as
  /// a broadcast element and stores at no shift; a row's sweep reads a slice
  /// of a row at its offset and stores a concatenation's pieces in place.
  static int sweepElementsPerThread(const Sweep &s, const Program &p, bool flat);
  /// Elements per thread of a fused kernel: its sweep's where it is flat, else 1.
  static int elementsPerThread(const KernelIR &k, const Program &p);
  /// A fused kernel of a loop that also runs persistent (CudaPersist.h): its
  /// body as the __device__ function <name>_step, which the persistent kernel
  /// calls every step, and the __global__ <name> that calls it once.
  std::string stepKernel(const KernelIR &k);
  /// The same kernel's step for one block of a persistent loop whose blocks
  /// own units of width `unit` (CudaPersist.h's unitWidth): the __device__
  /// <name>_units, every row's elements of the block's units; the values in
  /// `chip` are read and written in the block's shared memory (its `chip`
  /// argument, where the kernel touches one) instead of the workspace.
  std::string unitsKernel(const KernelIR &k, int64_t unit, const OnChip &chip);

protected:
  std::string fusedKernel(const KernelIR &k) override;
  std::string libraryKernel(const KernelIR &k) override;
  std::string elementLoop(int64_t n, const std::string &indent, const std::string &reduction = "") const override;
  std::string combine(const std::string &var, char op, const std::string &indent) const override;
  std::string math(const char *name) const override;
  std::string elementIndex() const override { return vector_ > 1 ? "i0 + i" : "i"; }
  std::string operand(const Operand &o, const std::string &index) const override;
  std::string storeTarget(int buffer, int64_t shift) const override;

private:
  std::string vectorName(const Operand &o) const;
  std::string storeName(int buffer, int64_t shift) const;
  /// Map sweep `s` on four consecutive elements from `from` ("": the rows are
  /// offset already): each operand one load4 into registers, the body unrolled
  /// over them, each store one store4. vector_ is 4 while it prints.
  std::string fourElements(const Sweep &s, const std::string &indent, const std::string &from);
  /// "const real *__restrict__ <row pointer> = ws.<buffer> + <row offset><plus>;" (no const where stored).
  std::string rowDeclaration(int buffer, int32_t delay, bool store, const std::string &plus) const;
  bool flat_ = false; // printing a flat kernel: i is the thread's element
  bool step_ = false; // printing the body as a __device__ function (stepKernel)
  int vector_ = 1;    // elements per thread of the flat kernel being printed
  int64_t unit_ = 0;  // printing a <name>_units: the unit width
  std::string unitRows_; // ... and the row pointers of the sweep being printed
  const OnChip *chip_ = nullptr; // ... and the values it keeps in shared memory
};

/// The device code of a program: the prelude (real, math, block reductions,
/// the helper kernels), the Workspace struct and every fused kernel. The
/// same text is the body of a .cu bundle and the NVRTC string of --jit.
std::string printCudaKernels(const Program &p, const SourceManager &sm);

/// Whether a product of p adds biases as its epilogue (FoldBias.h): the
/// prelude then has the `bias_rows` helper.
bool foldsBiases(const Program &p);

/// The Workspace struct of a CUDA model: HostCode's, with the ones the bias
/// gradients multiply and, --lengths, the host copy of the lengths.
std::string cudaWorkspaceStruct(const Program &p);

/// The names of the __global__ functions printCudaKernels defines, in the
/// order the host code indexes them.
std::vector<std::string> cudaKernelNames(const Program &p);

/// The whole <model>.cu (or, with jit, the <model>.cpp host part holding the
/// kernels as a string): kernels, workspace layout, stages on streams,
/// forward, backward and the C ABI table.
std::string printCudaModule(const Program &p, const SourceManager &sm, const CudaOptions &o);

} // namespace rnnc::codegen
