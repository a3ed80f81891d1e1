// The host part of the C++ target: HostCode's shared entry points with the
// CPU's hooks, around the kernels CppPrinter prints. Stages run in schedule
// order on the calling thread; the parallelism is inside each launch (OpenMP
// rows, threaded BLAS).
#include "codegen/CppPrinter.h"
#include "codegen/CppScan.h"
#include "codegen/HostCode.h"
#include "codegen/StoppedRows.h"
#include "ir/Scalar.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <vector>

namespace rnnc::codegen {

namespace {

class CpuHost : public HostTarget {
public:
  CpuHost(const Program &p, const SourceManager &sm) : p_(p), kernels_(p, sm) {}

  Target target() const override { return Target::Cpu; }
  const char *targetPhrase() const override { return "the CPU"; }
  void header(Writer &w) override;
  void definitions(Writer &w) override;
  std::string rows(const std::string &call, bool reading) const override {
    (void)reading;
    return call + ");";
  }
  std::string indexCheck(size_t k, const PortIR &in) const override {
    return fmt::format("if (!check_indices(static_cast<const int32_t *>(inputs[{}]), T * B, {}, \"{}\")) return 1;", k,
                       in.width, in.name);
  }
  void maskKey(Writer &w) const override { w.line("mask_words(options, ws.rng);"); }
  void lengths(Writer &w) const override {
    w.line("if (!sequence_lengths(options, T, B, ws.lengths, ws.loss_weight)) return 1;");
  }
  void droppedParams(Writer &w, bool backward) const override {
    for (const DroppedSlot &d : p_.dropped)
      w.line("{}(ws.rng, {}u, {}u, {}, {}, {} + {}, {});", backward ? "fold_dropped_grad" : "drop_param", d.site,
             scalar::keep_threshold(d.keep), CPrinter::literal(1 / d.keep),
             backward ? fmt::format("ws.dropped_grad + {}", d.offset) : fmt::format("P + {}", d.of),
             backward ? "G" : "ws.dropped", backward ? d.of : d.offset, d.elements);
  }
  void clearGradients(Writer &w) const override {
    w.line("std::fill_n(G, {}, real(0));", p_.paramElements);
    if (p_.droppedGrads) w.line("std::fill_n(ws.dropped_grad, {}, real(0));", p_.droppedElements);
  }
  void lossScale(Writer &w, bool backward) const override {
    if (backward) w.line("ws.loss_seed *= ws.loss_scale[0];");
    else w.line("if (!keep_loss_scale(options, ws.loss_scale)) return 1;");
  }
  void roundGradients(Writer &w) const override {
    w.line("std::copy_n(G, {}, static_cast<store *>(param_grads));", p_.paramElements);
  }
  void stages(Writer &w, bool backward) override;
  void blockedLoop(Writer &w, size_t at, const std::vector<size_t> &before, const std::vector<size_t> &after,
                   const std::vector<int> &number) const;
  void packPanels(Writer &w, bool backward) const;
  std::string launch(const KernelIR &k, const std::string &rows) const override {
    return fmt::format("{}{}(ws, P, G, B, {});", wanted(k.inputGrad), k.name, rows);
  }
  /// "if (input_grads && input_grads[k]) " before what only input k's gradient needs ("" for -1).
  static std::string wanted(int input) {
    return input < 0 ? "" : fmt::format("if (input_grads && input_grads[{}]) ", input);
  }
  void fillState(Writer &w, const PortIR &g, const std::string &dst) const override {
    w.line("std::fill_n({}, {} * B * {}, {});", dst, g.depth, g.width, CPrinter::literal(g.leaf.value));
  }
  void readerLayout(Writer &w, const char *failed, bool rows) const override {
    (void)failed, (void)rows;
    w.line("(void)stream;").line("layout(T, B, const_cast<void *>(mem), &ws);");
  }
  void context(Writer &w, bool backward) const override {
    (void)backward;
    w.line("(void)stream; // the CPU runs on the calling thread");
  }
  void lossInto(Writer &w, const Buffer *b) const override {
    const char *type = portType(p_);
    if (b) w.line("*static_cast<{0} *>(loss) = static_cast<{0}>(mean_of(ws.{1} + {2} * B, T * B));", type, b->name, b->padBefore);
    else w.line("*static_cast<{} *>(loss) = 0;", type);
  }
  void lossMean(Writer &w, const Buffer &b) const override {
    w.line("return mean_of(ws.{} + {} * B, T * B);", b.name, b.padBefore);
  }

private:
  const Program &p_;
  CppScanPrinter kernels_;
};

void CpuHost::header(Writer &w) {
  w.line("// Build: c++ -std=c++17 -O3 -fopenmp $(rnnc --print-cflags) -c this file; link OpenBLAS.");
  w.line("// Arrays are time-major; see runtime/include/rnnc/model.h for the ABI.");
  if (p_.dtype == DType::F64) w.line("#ifndef RNNC_REAL_DOUBLE").line("#define RNNC_REAL_DOUBLE // --dtype f64").line("#endif");
  w.line("#include \"rnnc/cpu.h\"");
  if (isHalf(p_.dtype)) w.line("#include \"rnnc/half.h\"");
  w.line("#include \"rnnc/model.h\"").blank();
  w.line("#include <algorithm>").line("#include <cmath>").line("#include <cstdint>").blank();
}

void CpuHost::definitions(Writer &w) {
  if (isHalf(p_.dtype)) {
    const char *name = dtypeName(p_.dtype);
    w.line("// --dtype {}: params, ports and the values kept for every step are stored in {}", name, name);
    w.line("// (store), computed in float (real); docs/precision.md says which stay float.");
    w.line("#ifdef RNNC_REAL_DOUBLE").line("#error \"a --dtype {} bundle computes in float\"", name).line("#endif");
    w.line("using real = float;").line("using store = rnnc::{};", name);
  } else {
    w.line("#ifdef RNNC_REAL_DOUBLE").line("using real = double;").line("#else").line("using real = float;").line("#endif");
  }
  w.line("using namespace rnnc::cpu;").blank();
  w.line("// Element-ops in a launch worth a thread team (-DRNNC_PARALLEL_WORK=N to tune). Below it a launch");
  w.line("// runs its rows on the calling thread without entering OpenMP: a parallel region costs about");
  w.line("// 0.3 us even on one thread; a batch of 8 LSTM rows of 256 units is past it (docs/benchmarks/cpu.md).");
  w.line("#ifndef RNNC_PARALLEL_WORK").line("#define RNNC_PARALLEL_WORK (1 << 14)").line("#endif");
  w.line("constexpr int64_t kParallelWork = RNNC_PARALLEL_WORK;").blank();
  std::vector<std::string> members, takes;
  if (p_.panelElements) {
    members.push_back(fmt::format("real *panels; // [{}]: the products' weights, packed by each call (rnnc/panels.h)",
                                  p_.panelElements));
    takes.push_back(fmt::format("ws->panels = c.take_fixed<real>({});", p_.panelElements));
  }
  if (p_.lossSeeded) {
    members.push_back("real *loss_scale; // [1]: forward's options->loss_scale, backward's loss seed's factor");
    takes.push_back("ws->loss_scale = c.take_fixed<real>(1);");
  }
  if (isHalf(p_.dtype) && p_.hasBackward) {
    members.push_back(fmt::format("real *grads; // [{}]: the params' gradients, summed in real (rounded into param_grads)",
                                  p_.paramElements));
    takes.push_back(fmt::format("ws->grads = c.take_fixed<real>({});", p_.paramElements));
  }
  if (p_.packWidth) {
    members.push_back(fmt::format("real *packed; // [min(T·B, {})][{}]: running rows packed for a product (--lengths)",
                                  MemoryPlan::kPackedRows, p_.packWidth));
    takes.push_back(fmt::format("ws->packed = c.take_fixed<real>(std::min<int64_t>(T * B, {}) * {});",
                                MemoryPlan::kPackedRows, p_.packWidth));
  }
  w.raw(workspaceStruct(p_, members)).blank().raw(workspaceLayout(p_, takes)).blank();
  for (const KernelIR &k : p_.kernels) w.raw(kernels_.kernel(k)).blank();
  for (size_t at = 0; at < p_.stages.size(); ++at)
    if (p_.stages[at].loop && p_.stages[at].scan.plan != LoopPlan::Sequential)
      w.raw(kernels_.stageFunction(p_.stages[at], static_cast<int>(at))).blank();
}

/// Each weight the loops of forward (backward) multiply by, packed into its
/// panels once, before the first stage: W for a Gemm kernel (its transpose is
/// the right operand), W itself for a GemmT.
void CpuHost::packPanels(Writer &w, bool backward) const {
  // Panels only products of one input's gradient read are packed when the caller wants it.
  std::map<int64_t, int> wantedBy; // panel offset -> that input's index, or -1
  for (const StageIR &s : p_.stages)
    if (s.backward == backward)
      for (int at : s.kernels) {
        const KernelIR &k = p_.kernels[at];
        if (k.panelOffset < 0) continue;
        auto [it, fresh] = wantedBy.emplace(k.panelOffset, k.inputGrad);
        if (!fresh && it->second != k.inputGrad) it->second = -1;
      }
  std::set<int64_t> packed;
  for (const StageIR &s : p_.stages) {
    if (s.backward != backward) continue;
    for (int at : s.kernels) {
      const KernelIR &k = p_.kernels[at];
      if (k.panelOffset < 0 || !packed.insert(k.panelOffset).second) continue;
      if (packed.size() == 1) w.line("// The products' weights, packed once per call (rnnc/panels.h).");
      const PanelShape s = panelShape(k);
      w.line("{}pack_panels({}, {}, {}, {}, ws.panels + {});", wanted(wantedBy.at(k.panelOffset)), s.transposed, s.n,
             s.depth, s.weight, k.panelOffset);
    }
  }
}

/// The stages inline, each under a comment saying how it runs: a loop run in
/// parallel over time is a call of its scan function; a loop with stages in
/// blocks (StageIR::blockLoop) runs block by block, those stages over each
/// block's rows before or after its steps.
void CpuHost::stages(Writer &w, bool backward) {
  packPanels(w, backward);
  std::vector<int> number(p_.stages.size(), 0); // as `rnnc show --schedule` counts them
  int index = 0;
  for (size_t at = 0; at < p_.stages.size(); ++at)
    if (p_.stages[at].backward == backward) number[at] = ++index;
  for (size_t at = 0; at < p_.stages.size(); ++at) {
    const StageIR &s = p_.stages[at];
    if (s.backward != backward || s.blockLoop >= 0) continue;
    const char *steps = s.direction > 0 ? "0 .. T-1" : "T-1 .. 0";
    if (s.loop && s.scan.plan != LoopPlan::Sequential) {
      w.line("// Stage {}: a loop over time, t = {}, {}.", number[at], steps,
             s.scan.plan == LoopPlan::Newton ? "by Newton iterations of parallel scans" : "as a parallel scan");
      w.line("{}(ws, P, G, T, B);", CppScanPrinter::functionName(s, static_cast<int>(at)));
      continue;
    }
    std::vector<size_t> before, after;
    for (size_t j = 0; j < p_.stages.size(); ++j)
      if (p_.stages[j].blockLoop == static_cast<int>(at)) (j < at ? before : after).push_back(j);
    if (s.loop && (!before.empty() || !after.empty())) {
      blockedLoop(w, at, before, after, number);
      continue;
    }
    if (s.loop) w.line("// Stage {}: a loop over time, t = {}.", number[at], steps);
    else w.line("// Stage {}: every step at once.", number[at]);
    stageLaunches(w, p_, s, [&](const KernelIR &k, const std::string &rows) { return launch(k, rows); });
  }
}

/// Loop `at` in blocks of ws.block steps (the last one shorter), aligned to
/// multiples of ws.block so each block fills its buffers from slot 0: the
/// stages `before` over the block's rows, its steps, then those `after`.
void CpuHost::blockedLoop(Writer &w, size_t at, const std::vector<size_t> &before, const std::vector<size_t> &after,
                          const std::vector<int> &number) const {
  const StageIR &s = p_.stages[at];
  auto list = [&](const std::vector<size_t> &stages) {
    std::string out;
    for (size_t i = 0; i < stages.size(); ++i)
      out += fmt::format("{}{}", i == 0 ? "" : i + 1 == stages.size() ? " and " : ", ", number[stages[i]]);
    return fmt::format("{} {}", stages.size() == 1 ? "stage" : "stages", out);
  };
  std::string around;
  if (!before.empty()) around += fmt::format("; {} over each block's steps first", list(before));
  if (!after.empty()) around += fmt::format("; {} over them after", list(after));
  w.line("// Stage {}: a loop over time, t = {}, in blocks of ws.block steps{}.", number[at],
         s.direction > 0 ? "0 .. T-1" : "T-1 .. 0", around);
  if (s.direction > 0) w.open("for (int64_t t0 = 0; t0 < T; t0 += ws.block) {{");
  else w.open("for (int64_t t0 = (T - 1) / ws.block * ws.block; t0 >= 0; t0 -= ws.block) {{");
  w.line("const int64_t t1 = std::min(T, t0 + ws.block);");
  auto blockLaunches = [&](const std::vector<size_t> &stages) {
    for (size_t j : stages)
      for (int k : p_.stages[j].kernels) w.line("{}", launch(p_.kernels[k], "t0 * B, t1 * B"));
  };
  blockLaunches(before);
  if (s.direction > 0) w.open("for (int64_t t = t0; t < t1; ++t) {{");
  else w.open("for (int64_t t = t1 - 1; t >= t0; --t) {{");
  for (int k : s.kernels) w.line("{}", launch(p_.kernels[k], "t * B, (t + 1) * B"));
  w.close();
  blockLaunches(after);
  w.close();
}

} // namespace

std::string printCppModule(const Program &p, const SourceManager &sm) {
  Program cpu = p; // the rows past a sequence's end fold (--lengths)
  foldStoppedRows(cpu, [](const KernelIR &) { return true; });
  CpuHost host(cpu, sm);
  return printHostModule(cpu, host);
}

} // namespace rnnc::codegen
