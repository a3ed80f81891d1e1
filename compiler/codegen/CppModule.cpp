// The host part of the C++ target: the workspace layout, forward, backward,
// the result readers and the C ABI table, around the kernels CppPrinter
// prints. Stages run in schedule order on the calling thread; the parallelism
// is inside each launch (OpenMP rows, threaded BLAS).
#include "codegen/Bundle.h"
#include "codegen/CppPrinter.h"
#include "codegen/CppScan.h"
#include "codegen/HostCode.h"

#include <fmt/format.h>

namespace rnnc::codegen {

namespace {

class ModulePrinter {
public:
  ModulePrinter(const Program &p, const SourceManager &sm) : p_(p), kernels_(p, sm) {}
  std::string print();

private:
  std::string stages(bool backward);
  std::string forward();
  std::string backward();
  std::string readers();
  std::string launch(int kernel, const std::string &rows, const std::string &indent);

  const Program &p_;
  CppScanPrinter kernels_;
};

std::string ModulePrinter::launch(int kernel, const std::string &rows, const std::string &indent) {
  return fmt::format("{}{}(ws, P, G, B, {});\n", indent, p_.kernels[kernel].name, rows);
}

std::string ModulePrinter::stages(bool backward) {
  std::string out;
  int index = 0;
  for (size_t at = 0; at < p_.stages.size(); ++at) {
    const StageIR &s = p_.stages[at];
    if (s.backward != backward) continue;
    ++index;
    if (s.loop && s.scan.plan != LoopPlan::Sequential) {
      out += fmt::format("  // Stage {}: a loop over time, t = {}, {}.\n", index, s.direction > 0 ? "0 .. T-1" : "T-1 .. 0",
                         s.scan.plan == LoopPlan::Newton ? "by Newton iterations of parallel scans" : "as a parallel scan");
      out += fmt::format("  {}(ws, P, G, T, B);\n", CppScanPrinter::functionName(s, static_cast<int>(at)));
      continue;
    }
    if (!s.loop) {
      out += fmt::format("  // Stage {}: every step at once.\n", index);
      for (int k : s.kernels) out += launch(k, "0, T * B", "  ");
      continue;
    }
    out += fmt::format("  // Stage {}: a loop over time, t = {}.\n", index, s.direction > 0 ? "0 .. T-1" : "T-1 .. 0");
    out += s.direction > 0 ? "  for (int64_t t = 0; t < T; ++t) {\n" : "  for (int64_t t = T - 1; t >= 0; --t) {\n";
    for (int k : s.kernels) out += launch(k, "t * B, (t + 1) * B", "    ");
    out += "  }\n";
  }
  return out;
}

std::string ModulePrinter::forward() {
  std::string out = "int forward(void *mem, int64_t T, int64_t B, const void *params, const void *const *inputs,\n"
                    "            const void *const *states) {\n";
  out += "  Workspace ws;\n  if (!layout(T, B, mem, &ws)) return fail_too_large(T, B);\n";
  out += "  const real *P = static_cast<const real *>(params);\n  real *G = nullptr;\n";
  for (size_t k = 0; k < p_.inputs.size(); ++k)
    if (p_.inputs[k].index)
      out += fmt::format("  if (!check_indices(static_cast<const int32_t *>(inputs[{}]), T * B, {}, \"{}\")) return 1;\n", k,
                         p_.inputs[k].width, p_.inputs[k].name);
  out += "  // Padding: zeros, then the inputs and the initial states.\n" + paddingClears(p_, false, HostCall()) +
         inputCopies(p_, HostCall());
  out += stages(false);
  return out + "  (void)G;\n  return 0;\n}\n";
}

std::string ModulePrinter::backward() {
  std::string out = "int backward(void *mem, int64_t T, int64_t B, const void *params, const void *const *seeds,\n"
                    "             void *param_grads, void *const *input_grads, void *const *state_grads) {\n";
  out += "  Workspace ws;\n  if (!layout(T, B, mem, &ws)) return fail_too_large(T, B);\n";
  out += "  const real *P = static_cast<const real *>(params);\n  real *G = static_cast<real *>(param_grads);\n";
  out += fmt::format("  std::fill_n(G, {}, real(0));\n", p_.paramElements);
  out += paddingClears(p_, true, HostCall()) + seedCopies(p_, HostCall());
  out += stages(true);
  if (!p_.epilogue.empty()) out += "  // The initial states' gradients: the state adjoints at steps -depth .. -1.\n";
  for (int k : p_.epilogue) out += launch(k, fmt::format("-{} * B, 0", p_.kernels[k].epilogueDepth), "  ");
  out += gradientReads(p_, HostCall(), [](const PortIR &g, const std::string &dst) {
    return fmt::format("    std::fill_n({}, {} * B * {}, {});\n", dst, g.depth, g.width, CPrinter::literal(g.leaf.value));
  });
  return out + "  return 0;\n}\n";
}

std::string ModulePrinter::readers() {
  std::string out = "void read_output(const void *mem, int64_t T, int64_t B, int32_t k, void *out) {\n";
  out += "  Workspace ws;\n  layout(T, B, const_cast<void *>(mem), &ws);\n  switch (k) {\n";
  out += outputReadCases(p_, HostCall());
  out += "  }\n}\n\nvoid read_final_state(const void *mem, int64_t T, int64_t B, int32_t k, void *out) {\n";
  out += "  Workspace ws;\n  layout(T, B, const_cast<void *>(mem), &ws);\n  switch (k) {\n";
  out += finalStateReadCases(p_, HostCall());
  out += "  }\n}\n\ndouble read_loss(const void *mem, int64_t T, int64_t B) {\n";
  if (p_.lossBuffer >= 0) {
    const Buffer &b = p_.buffers[p_.lossBuffer];
    out += "  Workspace ws;\n  layout(T, B, const_cast<void *>(mem), &ws);\n";
    out += fmt::format("  return mean_of(ws.{} + {} * B, T * B);\n", b.name, b.padBefore);
  } else {
    out += "  (void)mem, (void)T, (void)B;\n  return 0;\n";
  }
  return out + "}\n";
}

std::string ModulePrinter::print() {
  std::string out = fmt::format("// {}: generated by rnnc {} for the CPU. Do not edit: change the .rnn and recompile.\n",
                                p_.name, RNNC_VERSION);
  out += "// Build: c++ -std=c++17 -O3 -fopenmp $(rnnc --print-cflags) -c this file; link OpenBLAS.\n";
  out += "// Arrays are time-major; see runtime/include/rnnc/model.h for the ABI.\n";
  out += "#include \"rnnc/cpu.h\"\n#include \"rnnc/model.h\"\n\n#include <algorithm>\n#include <cmath>\n#include <cstdint>\n\n";
  out += "namespace {\n\n#ifdef RNNC_REAL_DOUBLE\nusing real = double;\n#else\nusing real = float;\n#endif\n";
  out += "using namespace rnnc::cpu;\n\n";
  out += "// Element-ops in a launch worth a thread team. Below it a launch runs its rows on the calling\n"
         "// thread without entering OpenMP: a parallel region costs about 0.3 us even on one thread.\n";
  out += "constexpr int64_t kParallelWork = 1 << 20;\n\n";
  out += workspaceStruct(p_) + "\n" + workspaceLayout(p_) + "\n";
  for (const KernelIR &k : p_.kernels) out += kernels_.kernel(k) + "\n";
  for (size_t at = 0; at < p_.stages.size(); ++at)
    if (p_.stages[at].loop && p_.stages[at].scan.plan != LoopPlan::Sequential)
      out += kernels_.stageFunction(p_.stages[at], static_cast<int>(at)) + "\n";
  out += forward() + "\n" + backward() + "\n" + readers() + "\n";
  out += "} // namespace\n\n" + abiTable(p_);
  return out;
}

} // namespace

std::string printCppModule(const Program &p, const SourceManager &sm) { return ModulePrinter(p, sm).print(); }

} // namespace rnnc::codegen
