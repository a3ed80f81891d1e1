// The C-like printer every target shares: the text of each scalar op (one
// table), of operands, of a sweep's body, and the equations comment of a
// kernel. A target printer (C++ now, CUDA next) derives from it and supplies
// the hooks that map the index space (rows, elements) and the library calls;
// it never re-spells an op.
#pragma once

#include "codegen/KernelIR.h"
#include "support/SourceManager.h"

#include <map>
#include <set>
#include <string>
#include <utility>

namespace rnnc::codegen {

class CPrinter {
public:
  CPrinter(const Program &p, const SourceManager &sm) : p_(p), sm_(sm) {}
  virtual ~CPrinter() = default;

  /// One kernel as a function (with its comment).
  std::string kernel(const KernelIR &k);

  /// `// lstm.rnn:9  c = ...` lines naming the equations of k.
  std::string equationsComment(const KernelIR &k, const std::string &indent = "") const;

  /// A double as a literal of type `real`.
  static std::string literal(double v);

  /// The element offset of row `row` ("r", "r0", any row of the launch's
  /// step for a one-step or ring buffer) of buffer b read at t - delay (host
  /// code uses it too, for library calls).
  static std::string rowOffset(const Buffer &b, int32_t delay, const std::string &row);

  /// A workspace buffer's element type: int32_t, store (16 bits) or real.
  static const char *elementType(const Buffer &b);

  /// The operand a slice reads at element i: its source's, at the slice's offset.
  static Operand sliceOperand(const Instr &in);

protected:
  /// The row pointer of buffer b read with `delay` ("c_7_prev").
  std::string rowPointer(int buffer, int32_t delay) const;
  /// Element `index` of an operand ("c_7_prev[i]", "P[1024 + i]", "v3").
  virtual std::string operand(const Operand &o, const std::string &index) const;
  /// Where a sweep's store of element i goes: the row's element i + shift ("c_7[i]").
  virtual std::string storeTarget(int buffer, int64_t shift) const;
  /// An element index moved by `shift`: "i", "i + 3", "i - 3".
  static std::string shifted(const std::string &index, int64_t shift);
  /// The right-hand side of a map op at element i.
  std::string mapExpr(const Instr &in) const;
  /// A sweep's statements for one row, at `indent`.
  std::string sweep(const Sweep &s, const std::string &indent);
  /// The step of a loop run in parallel over time, at element i, reading the
  /// states one step back from `s0`, `s1`, ... (declared by the caller): each
  /// op's value `vN` and its nonzero tangents `vN_dS` (d vN / d sS, forward
  /// mode, Tangent.cpp); then the step's Jacobian `a_P_Q` (d new state P /
  /// d state Q) and its value `f_P`, per new state.
  std::string tangentStep(const ScanIR &scan, int direction, const std::string &indent);
  /// --lengths: at a row past its sequence's end, `body` (a kernel's folded
  /// sweeps, at depth 6) and then `leave` ("return;", "continue;"), at depth 4.
  static std::string stoppedRowBranch(const std::string &body, const char *leave);
  /// The row a sweep is at, step row / B of sequence row % B: "r" in a kernel's
  /// rows, "q" in a scan's step (tangentStep), whose r is the sequence.
  std::string row_ = "r";
  /// Every (buffer, delay) a fused kernel reads or writes, and which it writes.
  std::set<std::pair<int, int32_t>> rowPointers(const KernelIR &k, std::set<int> &written) const;

  // Hooks of the target.
  virtual std::string fusedKernel(const KernelIR &k) = 0;
  virtual std::string libraryKernel(const KernelIR &k) = 0;
  /// `for (int64_t i = 0; i < n; ++i) {` (CUDA: over the threads of a row);
  /// `reduction` names the accumulator and its operator ("+:acc", "max:top").
  virtual std::string elementLoop(int64_t n, const std::string &indent, const std::string &reduction = "") const = 0;
  /// After a reduction loop: `var` combined across the threads that shared
  /// the loop ('+': sum, 'M': max). Nothing where one thread ran it.
  virtual std::string combine(const std::string &var, char op, const std::string &indent) const {
    (void)var, (void)op, (void)indent;
    return "";
  }
  /// The element a map sweep's body is at ("i"; CUDA: "i0 + i" when a thread has several).
  virtual std::string elementIndex() const { return "i"; }
  /// Whether a map sweep draws its masks for the whole row before its element
  /// loop, four elements per Philox call (the CPU), or each element its own.
  virtual bool drawsMasksByRow() const { return false; }
  /// A mask's step in the key: "unsigned(r / B)", "~0u" for a mask per sequence.
  std::string maskStep(const Operand &o) const;
  /// Name of a math function (`std::exp`, CUDA: `expf`/`exp` through overloads).
  virtual std::string math(const char *name) const { return std::string("std::") + name; }

  const Program &p_;
  const SourceManager &sm_;
  /// While printing a scan's step: loads of (buffer, delay) printed as these names.
  std::map<std::pair<int, int32_t>, std::string> substitutes_;
  /// While printing a map sweep that draws its masks by row: each mask's
  /// (site, delay) -> the array of its draws.
  std::map<std::pair<int64_t, int32_t>, std::string> maskDraws_;
};

} // namespace rnnc::codegen
