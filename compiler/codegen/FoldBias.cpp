// Biases folded into the product before the loop (FoldBias.h). A product
// qualifies when every read of its output is a load at delay 0 of whole rows
// inside a sum, the sums all add the same params, and no loop run in parallel
// over time, library call, port or the loss reads it: then the output's every
// row holds product + biases, which is all its readers ever saw of it.
#include "codegen/FoldBias.h"

#include <algorithm>

namespace rnnc::codegen {
namespace {

/// The params (offsets) a sum adds to `buffer`'s row: its first two whole,
/// unshifted param operands.
std::vector<int64_t> biasesOf(const Instr &sum) {
  std::vector<int64_t> biases;
  for (const Operand &o : sum.args)
    if (o.kind == Operand::Kind::Param && !o.scalar && biases.size() < 2) biases.push_back(o.paramOffset);
  return biases;
}

bool loads(const Instr &in, int buffer) {
  return std::any_of(in.args.begin(), in.args.end(),
                     [&](const Operand &o) { return o.kind == Operand::Kind::Load && o.buffer == buffer; });
}

/// Whether every read of `buffer` (R wide) is a sum that can take the biases
/// instead; `biases` is what they all add.
bool onlySummedWithBiases(const Program &p, int buffer, int64_t R, std::vector<int64_t> &biases) {
  for (const auto *ports : {&p.inputs, &p.outputs, &p.states, &p.seeds, &p.inputGrads, &p.stateGrads, &p.stateSeeds})
    for (const PortIR &port : *ports)
      if (port.buffer == buffer) return false;
  if (p.lossBuffer == buffer) return false;
  for (const StageIR &s : p.stages) {
    if (std::find(s.scan.states.begin(), s.scan.states.end(), buffer) != s.scan.states.end()) return false;
    for (const Sweep *sweep : {&s.scan.step, &s.scan.exactStep})
      for (const Instr &in : sweep->body)
        if (loads(in, buffer)) return false;
  }
  bool ok = true, read = false;
  for (const KernelIR &k : p.kernels) {
    if (k.a == buffer || k.b == buffer) return false;
    if (k.out == buffer && k.kind != KernelIR::Kind::Gemm) return false;
    forEachSweep(k, [&](const Sweep &s) {
      for (const Instr &in : s.body) {
        if (in.store == buffer) ok = false;
        if (!loads(in, buffer)) continue;
        read = true;
        if (s.kind != Sweep::Kind::Map || s.width != R || in.op != Op::Add) {
          ok = false;
          continue;
        }
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load && o.buffer == buffer && (o.delay != 0 || o.shift != 0 || o.scalar)) ok = false;
        std::vector<int64_t> these = biasesOf(in);
        if (these.empty() || (!biases.empty() && these != biases)) ok = false;
        biases = these;
      }
    });
  }
  return ok && read;
}

/// Removes `biases` (one operand each) from every sum reading `buffer`.
void dropBiases(Program &p, int buffer, const std::vector<int64_t> &biases) {
  auto drop = [&](Sweep &s) {
    for (Instr &in : s.body) {
      if (!loads(in, buffer)) continue;
      for (int64_t offset : biases) {
        auto it = std::find_if(in.args.begin(), in.args.end(), [&](const Operand &o) {
          return o.kind == Operand::Kind::Param && !o.scalar && o.paramOffset == offset;
        });
        in.args.erase(it);
      }
    }
  };
  for (KernelIR &k : p.kernels) {
    for (Sweep &s : k.sweeps) drop(s);
    for (Sweep &s : k.stopped) drop(s);
  }
}

} // namespace

int foldBiasesIntoProducts(Program &p) {
  if (isHalf(p.dtype)) return 0;
  int folded = 0;
  for (KernelIR &k : p.kernels) {
    if (k.kind != KernelIR::Kind::Gemm || k.perStep || k.out < 0 || !k.biases.empty() ||
        k.rows * int64_t(sizeof(double)) > kBiasSpaceBytes)
      continue;
    std::vector<int64_t> biases;
    if (!onlySummedWithBiases(p, k.out, k.rows, biases)) continue;
    dropBiases(p, k.out, biases);
    k.biases = biases;
    ++folded;
  }
  return folded;
}

} // namespace rnnc::codegen
