// 1. Kernels: a fused kernel is a loop over its rows (an OpenMP thread team
//    only when rows × width reaches kParallelWork; below it no OpenMP call at
//    all, which costs 0.3 us a launch even on one thread), row pointers for every
//    buffer and delay it touches, then its sweeps (with --lengths, first the
//    folded sweeps of a row past its sequence's end); a library kernel is a
//    product on its weight's panels or a weight gradient (rnnc/panels.h), or a
//    plain loop for vector and embedding gradients.
// 2. Host: the workspace carved per (T, B); forward clears the padding, copies
//    inputs and initial states in, and issues the forward stages in schedule
//    order (a loop stage steps t in its direction); backward does the same
//    with the seeds and the backward stages, then the initial-state
//    gradients; the C ABI table describes it all.
#include "codegen/CppPrinter.h"

#include "codegen/HostCode.h"

#include "support/Crash.h"

#include <fmt/format.h>

namespace rnnc::codegen {

/// Row pointers of distinct buffers or steps never overlap, so the element
/// loop is declared free of dependences (GCC gives up on proving it past a
/// handful of pointers).
std::string CppPrinter::elementLoop(int64_t n, const std::string &indent, const std::string &reduction) const {
  std::string clause = reduction.empty() ? "" : " reduction(" + reduction + ")";
  return fmt::format("{}#pragma omp simd{}\n{}for (int64_t i = 0; i < {}; ++i) {{\n", indent, clause, indent, n);
}

/// exp and tanh vectorize through rnnc/cpu.h's fast_exp and fast_tanh, min
/// and max through its math::min and math::max (selects on values).
std::string CppPrinter::math(const char *name) const {
  std::string n = name;
  if (n == "exp" || n == "tanh") return "fast_" + n;
  if (n == "min" || n == "max") return "math::" + n;
  return "std::" + n;
}

static std::string signature(const Program &p, const KernelIR &k, bool usesP, bool usesG) {
  return fmt::format("static void {}(const Workspace &ws, const {} *{}, real *{}, int64_t B, int64_t r0, int64_t r1) {{\n",
                     k.name, portType(p), usesP ? "P" : "/*P*/", usesG ? "G" : "/*G*/");
}

std::string CppPrinter::fusedKernel(const KernelIR &k) {
  std::set<int> written;
  auto pointers = rowPointers(k, written);
  bool usesP = false;
  int64_t work = 0;
  for (const Sweep &s : k.sweeps) {
    work += s.width * static_cast<int64_t>(s.body.size());
    for (const Instr &in : s.body) {
      usesP |= in.op == Op::Embed;
      for (const Operand &o : in.args) usesP |= o.kind == Operand::Kind::Param;
    }
  }
  std::string out = signature(p_, k, usesP, false);
  bool team = rowsInParallel(k);
  out += team ? "  auto row = [&](int64_t r) {\n" : "  for (int64_t r = r0; r < r1; ++r) {\n";
  for (auto [buffer, delay] : pointers) {
    const Buffer &b = p_.buffers[buffer];
    bool store = delay == 0 && written.count(buffer);
    if (b.caller && b.backward && !store) { // the caller's seed, or a row of zeros when it passed none
      out += fmt::format("    const {0} *{1} = ws.{2} ? ws.{2} + {3} : ws.zeros;\n", CPrinter::elementType(b),
                         rowPointer(buffer, delay), b.name, CPrinter::rowOffset(b, delay, "r"));
      continue;
    }
    out += fmt::format("    {}{} *{} = ws.{} + {};\n", store ? "" : "const ", CPrinter::elementType(b), rowPointer(buffer, delay),
                       b.name, CPrinter::rowOffset(b, delay, "r"));
  }
  auto sweeps = [&](const std::vector<Sweep> &list, const std::string &indent) {
    std::string text;
    for (const Sweep &s : list)
      text += s.kind == Sweep::Kind::Map ? sweep(s, indent) : indent + "{\n" + sweep(s, indent + "  ") + indent + "}\n";
    return text;
  };
  if (k.foldsStopped) out += stoppedRowBranch(sweeps(k.stopped, "      "), team ? "return;" : "continue;");
  out += sweeps(k.sweeps, "    ");
  if (!team) return out + "  }\n}\n";
  out += "  };\n";
  out += fmt::format("  if ((r1 - r0) * {} >= kParallelWork) {{\n", work);
  // A kernel that folds the rows of stopped sequences deals the rows out in turn: the running
  // rows (the first ones, lengths sorted longest first) then split evenly between the threads
  // instead of falling to the first of them while the others copy carries (docs/lengths.md).
  out += k.foldsStopped ? "#pragma omp parallel for schedule(static, 1)\n" : "#pragma omp parallel for\n";
  out += "    for (int64_t r = r0; r < r1; ++r) row(r);\n";
  out += "  } else {\n    for (int64_t r = r0; r < r1; ++r) row(r);\n  }\n";
  return out + "}\n";
}

/// Row 0 of buffer b read at t - delay, for a launch of every step at once ("ws.x_0 + B * 64").
static std::string rowZero(const Buffer &b, int32_t delay) {
  const int64_t shift = b.padBefore - delay;
  if (shift == 0) return "ws." + b.name;
  return fmt::format("ws.{} + {}B * {}", b.name, shift == 1 ? "" : std::to_string(shift) + " * ", b.width);
}

/// A weight's gradient on `m` rows of d (the product's output gradients) and x
/// (its inputs): rnnc/panels.h's weight_gradient, G += Σ_r d[r]ᵀ x[r].
static std::string weightGradient(const Program &p, const KernelIR &k, const std::string &m, const std::string &d,
                                  const std::string &x) {
  return fmt::format("weight_gradient{}({}, {}, {}, {}, {}, {}{})", isHalf(p.dtype) ? "<store>" : "", k.rows, k.cols, m, d, x,
                     k.dropped ? "ws.dropped_grad + " : "G + ", k.paramOffset);
}

/// A --lengths product or weight gradient of every step at once on the CPU,
/// over the running rows only, so that its cost follows them: a product reads
/// and writes them in place (rnnc/workspace.h's running_product), a weight
/// gradient packs them into ws.packed (packed_gradient).
std::string CppPrinter::packedLibraryKernel(const KernelIR &k) {
  const Buffer &a = p_.buffers[k.a];
  const bool product = k.kind != KernelIR::Kind::GradMatrix;
  const Buffer &other = p_.buffers[product ? k.out : k.b];
  RNNC_ASSERT(!product || k.panelOffset >= 0, "plan-memory gives every product panels");
  std::string out = signature(p_, k, false, !product && !k.dropped);
  out += fmt::format("  {}{}\n", gemmCall(p_, k).comment,
                     product ? fmt::format(", packed in ws.panels[{}..]", k.panelOffset) : "");
  if (product)
    out += "  // Only the rows of sequences still running, in place (docs/lengths.md).\n";
  else
    out += fmt::format("  // Only the rows of sequences still running, up to {} at a time (docs/lengths.md).\n",
                       MemoryPlan::kPackedRows);
  if (product)
    out += fmt::format("  running_product(ws.lengths, B, r0, r1, {}, {}, {}, {}, [&](const auto &rows, const auto *x, "
                       "auto *y) {{ {}; }});\n",
                       rowZero(a, k.aDelay), a.width, rowZero(other, 0), other.width, panelProduct(p_, k, "rows", "x", "y"));
  else
    out += fmt::format("  packed_gradient(ws.lengths, B, r0, r1, {}, {}, {}, {}, {}, ws.packed, [&](int64_t n, const auto *d, "
                       "const auto *x) {{ {}; }});\n",
                       MemoryPlan::kPackedRows, rowZero(a, k.aDelay), a.width, rowZero(other, k.bDelay), other.width,
                       weightGradient(p_, k, "n", "d", "x"));
  return out + "}\n";
}

std::string CppPrinter::libraryKernel(const KernelIR &k) {
  const bool gemmKind =
      k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT || k.kind == KernelIR::Kind::GradMatrix;
  auto plain = [&](int buffer) { return buffer < 0 || p_.buffers[buffer].rowsPerStep(); };
  if (p_.hasLengths && !k.perStep && gemmKind && plain(k.a) && plain(k.b) && plain(k.out)) {
    RNNC_ASSERT(k.kind != KernelIR::Kind::GradMatrix || p_.packWidth, "plan-memory gives weight gradients ws.packed");
    return packedLibraryKernel(k);
  }
  // With --lengths the rows [from, to) are a span of sequences still running (docs/lengths.md).
  const bool spans = p_.hasLengths;
  const std::string from = spans ? "q0" : "r0", to = spans ? "q1" : "r1", in = spans ? "    " : "  ";
  auto at = [&](int buffer, int32_t delay) {
    const Buffer &b = p_.buffers[buffer];
    return fmt::format("ws.{} + {}", b.name, CPrinter::rowOffset(b, delay, from));
  };
  // A product reads its weight from the panels, never P; a dropped param's
  // gradient is the workspace's, not G.
  const bool product = k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT;
  std::string out = signature(p_, k, false, !product && !k.dropped);
  std::string body;
  switch (k.kind) {
  case KernelIR::Kind::Gemm:
  case KernelIR::Kind::GemmT: // W packed by the call (rnnc/panels.h)
    RNNC_ASSERT(k.panelOffset >= 0, "plan-memory gives every product panels");
    out += fmt::format("  {}, packed in ws.panels[{}..]\n", gemmCall(p_, k).comment, k.panelOffset);
    body = fmt::format("{}{};\n", in, panelProduct(p_, k, to + " - " + from, at(k.a, k.aDelay), at(k.out, 0)));
    break;
  case KernelIR::Kind::GradMatrix: // rnnc's own kernel (rnnc/panels.h)
    out += fmt::format("  {}\n", gemmCall(p_, k, from, to).comment);
    body = fmt::format("{}{};\n", in, weightGradient(p_, k, to + " - " + from, at(k.a, k.aDelay), at(k.b, k.bDelay)));
    break;
  case KernelIR::Kind::GradVector:
    if (k.rows > 1) { // rnnc/workspace.h's, across the team when the rows are many
      out += fmt::format("  // G[{}..] += sum over rows of d[r]\n", k.paramOffset);
      body = fmt::format("{}column_sums({} - {}, {}, {}, G + {});\n", in, to, from, k.cols, at(k.a, k.aDelay),
                         k.paramOffset);
      break;
    }
    body += fmt::format("{}const {} *d = {};\n", in, CPrinter::elementType(p_.buffers[k.a]), at(k.a, k.aDelay));
    body += fmt::format("{}real *g = G + {};\n", in, k.paramOffset);
    body += fmt::format("{}for (int64_t r = 0; r < {} - {}; ++r)\n", in, to, from);
    body += fmt::format("{}  for (int64_t i = 0; i < {}; ++i) g[0] += d[r * {} + i];\n", in, k.cols, k.cols);
    break;
  case KernelIR::Kind::GradEmbed:
    body += fmt::format("{}const {} *d = {};\n", in, CPrinter::elementType(p_.buffers[k.a]), at(k.a, k.aDelay));
    body += fmt::format("{}const int32_t *row = {};\n", in, at(k.b, k.bDelay));
    body += fmt::format("{}real *g = G + {};\n", in, k.paramOffset);
    body += fmt::format("{}for (int64_t r = 0; r < {} - {}; ++r)\n", in, to, from);
    body += fmt::format("{}  for (int64_t i = 0; i < {}; ++i) g[int64_t(row[r]) * {} + i] += d[r * {} + i];\n", in,
                        k.cols, k.cols, k.cols);
    break;
  case KernelIR::Kind::Fused: RNNC_UNREACHABLE("not a library kernel");
  }
  if (!spans) return out + body + "}\n";
  // The rows of sequences past their end: a product there is zeros (what the
  // graph's carries and outputs never read but through a factor 0), and a
  // gradient gets nothing (its d is 0 there).
  std::string stopped = "[](int64_t, int64_t) {}";
  if (product) {
    const Buffer &o = p_.buffers[k.out];
    stopped = fmt::format("[&](int64_t q0, int64_t q1) {{ std::fill_n(ws.{} + {}, (q1 - q0) * {}, {}(0)); }}", o.name,
                          CPrinter::rowOffset(o, 0, "q0"), o.width, CPrinter::elementType(o));
  }
  out += "  // Only the rows of sequences still running (docs/lengths.md).\n";
  out += "  running_spans(ws.lengths, B, r0, r1, [&](int64_t q0, int64_t q1) {\n" + body + "  }, " + stopped + ");\n";
  return out + "}\n";
}

} // namespace rnnc::codegen
