// The host part of the C++ target: the workspace layout, forward, backward,
// the result readers and the C ABI table, around the kernels CppPrinter
// prints. Stages run in schedule order on the calling thread; the parallelism
// is inside each launch (OpenMP rows, threaded BLAS).
#include "codegen/Bundle.h"
#include "codegen/CppPrinter.h"

#include <fmt/format.h>

namespace rnnc::codegen {

namespace {

class ModulePrinter {
public:
  ModulePrinter(const Program &p, const SourceManager &sm) : p_(p), sm_(sm), kernels_(p, sm) {}
  std::string print();

private:
  std::string workspace();
  std::string padding(bool backward);
  std::string stages(bool backward);
  std::string forward();
  std::string backward();
  std::string readers();
  std::string launch(int kernel, const std::string &rows, const std::string &indent);

  const Program &p_;
  const SourceManager &sm_;
  CppPrinter kernels_;
};

std::string rowsOf(const Buffer &b) {
  if (b.stepLocal) return "1";
  if (b.ring) return std::to_string(b.ring);
  std::string r = b.fixed ? "" : "T";
  int64_t pad = b.padBefore + b.padAfter;
  if (pad) r += (r.empty() ? "" : " + ") + std::to_string(pad);
  return r.empty() ? "0" : r;
}

std::string ModulePrinter::workspace() {
  std::string out = "/// Every value that leaves its sweep, [padding + T + padding][B][width].\nstruct Workspace {\n";
  for (const Buffer &b : p_.buffers)
    out += fmt::format("  {} *{}; // [{}][B][{}]{}\n", b.index ? "int32_t" : "real", b.name, rowsOf(b), b.width,
                       b.fixed ? ": the initial-state gradient"
                       : b.stepLocal ? ": one step, reused"
                       : b.ring ? ": a ring of the steps its loop reads back"
                       : b.shares >= 0 ? ": shares " + p_.buffers[b.shares].name + "'s memory"
                                       : "");
  out += "  real loss_seed; // dL/d(loss at each step): 1 / (T·B), the loss is a mean\n};\n\n";
  out += "/// Carves the workspace from `base` (null: only measures). Returns its bytes, 0 when too large.\n";
  out += "int64_t layout(int64_t T, int64_t B, void *base, Workspace *ws) {\n  Carver c(base, T, B);\n";
  for (const Buffer &b : p_.buffers)
    if (b.shares < 0)
      out += fmt::format("  ws->{} = c.take<{}>({}, {}, {});\n", b.name, b.index ? "int32_t" : "real",
                         b.fixed || b.stepLocal || b.ring ? 0 : 1,
                         b.stepLocal ? 1 : b.ring ? b.ring : b.padBefore + b.padAfter, b.width);
  for (const Buffer &b : p_.buffers)
    if (b.shares >= 0)
      out += fmt::format("  ws->{} = ws->{}; // its life starts after {}'s ends\n", b.name, p_.buffers[b.shares].name,
                         p_.buffers[b.shares].name);
  out += "  ws->loss_seed = real(1) / real(T * B);\n  return c.bytes();\n}\n";
  return out;
}

std::string ModulePrinter::padding(bool backward) {
  std::string out;
  for (const Buffer &b : p_.buffers) {
    if (b.backward != backward || b.fixed || b.stepLocal) continue;
    if (b.ring) { // every slot starts as the zeros before the first step (after the last)
      out += fmt::format("  clear_rows(ws.{}, 0, {}, B, {});\n", b.name, b.ring, b.width);
      continue;
    }
    if (b.padBefore) out += fmt::format("  clear_rows(ws.{}, 0, {}, B, {});\n", b.name, b.padBefore, b.width);
    if (b.padAfter) out += fmt::format("  clear_rows(ws.{}, {} + T, {}, B, {});\n", b.name, b.padBefore, b.padAfter, b.width);
  }
  return out;
}

std::string ModulePrinter::launch(int kernel, const std::string &rows, const std::string &indent) {
  return fmt::format("{}{}(ws, P, G, B, {});\n", indent, p_.kernels[kernel].name, rows);
}

std::string ModulePrinter::stages(bool backward) {
  std::string out;
  int index = 0;
  for (const StageIR &s : p_.stages) {
    if (s.backward != backward) continue;
    ++index;
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
  out += "  // Padding: zeros, then the inputs and the initial states.\n" + padding(false);
  for (size_t k = 0; k < p_.inputs.size(); ++k) {
    const Buffer &b = p_.buffers[p_.inputs[k].buffer];
    out += fmt::format("  copy_rows(ws.{}, {}, static_cast<const {} *>(inputs[{}]), T, B, {});\n", b.name, b.padBefore,
                       b.index ? "int32_t" : "real", k, b.width);
  }
  for (size_t k = 0; k < p_.states.size(); ++k) {
    const PortIR &s = p_.states[k];
    const Buffer &b = p_.buffers[s.buffer];
    out += fmt::format("  if (states && states[{}]) copy_rows(ws.{}, {}, static_cast<const {} *>(states[{}]), {}, B, {});\n",
                       k, b.name, b.padBefore - s.depth, b.index ? "int32_t" : "real", k, s.depth, b.width);
  }
  out += stages(false);
  return out + "  (void)G;\n  return 0;\n}\n";
}

std::string ModulePrinter::backward() {
  std::string out = "int backward(void *mem, int64_t T, int64_t B, const void *params, const void *const *seeds,\n"
                    "             void *param_grads, void *const *input_grads, void *const *state_grads) {\n";
  out += "  Workspace ws;\n  if (!layout(T, B, mem, &ws)) return fail_too_large(T, B);\n";
  out += "  const real *P = static_cast<const real *>(params);\n  real *G = static_cast<real *>(param_grads);\n";
  out += fmt::format("  std::fill_n(G, {}, real(0));\n", p_.paramElements);
  out += padding(true);
  for (size_t k = 0; k < p_.seeds.size(); ++k) {
    const Buffer &b = p_.buffers[p_.seeds[k].buffer];
    out += fmt::format("  if (seeds && seeds[{}]) copy_rows(ws.{}, {}, static_cast<const real *>(seeds[{}]), T, B, {});\n", k,
                       b.name, b.padBefore, k, b.width);
    out += fmt::format("  else clear_rows(ws.{}, {}, T, B, {});\n", b.name, b.padBefore, b.width);
  }
  out += stages(true);
  if (!p_.epilogue.empty()) out += "  // The initial states' gradients: the state adjoints at steps -depth .. -1.\n";
  for (int k : p_.epilogue) out += launch(k, fmt::format("-{} * B, 0", p_.kernels[k].epilogueDepth), "  ");
  for (size_t k = 0; k < p_.inputGrads.size(); ++k) {
    const PortIR &g = p_.inputGrads[k];
    const Buffer &b = p_.buffers[g.buffer];
    out += fmt::format("  if (input_grads && input_grads[{}]) read_rows(ws.{}, {}, T, B, {}, static_cast<real *>(input_grads[{}]));\n",
                       k, b.name, b.padBefore - g.delay, b.width, k);
  }
  for (const PortIR &g : p_.stateGrads) {
    size_t k = 0;
    while (k < p_.states.size() && p_.states[k].name != g.name) ++k;
    std::string dst = fmt::format("static_cast<real *>(state_grads[{}])", k);
    if (g.buffer < 0)
      out += fmt::format("  if (state_grads && state_grads[{}]) std::fill_n({}, {} * B * {}, {});\n", k, dst, g.depth, g.width,
                         CPrinter::literal(g.leaf.value));
    else
      out += fmt::format("  if (state_grads && state_grads[{}]) read_rows(ws.{}, 0, {}, B, {}, {});\n", k,
                         p_.buffers[g.buffer].name, g.depth, g.width, dst);
  }
  return out + "  return 0;\n}\n";
}

std::string ModulePrinter::readers() {
  std::string out = "void read_output(const void *mem, int64_t T, int64_t B, int32_t k, void *out) {\n";
  out += "  Workspace ws;\n  layout(T, B, const_cast<void *>(mem), &ws);\n  switch (k) {\n";
  for (size_t k = 0; k < p_.outputs.size(); ++k) {
    const PortIR &o = p_.outputs[k];
    const Buffer &b = p_.buffers[o.buffer];
    out += fmt::format("  case {}: read_rows(ws.{}, {}, T, B, {}, static_cast<{} *>(out)); break;\n", k, b.name,
                       b.padBefore - o.delay, b.width, b.index ? "int32_t" : "real");
  }
  out += "  }\n}\n\nvoid read_final_state(const void *mem, int64_t T, int64_t B, int32_t k, void *out) {\n";
  out += "  Workspace ws;\n  layout(T, B, const_cast<void *>(mem), &ws);\n  switch (k) {\n";
  for (size_t k = 0; k < p_.states.size(); ++k) {
    const PortIR &s = p_.states[k];
    const Buffer &b = p_.buffers[s.buffer];
    out += fmt::format("  case {}: read_rows(ws.{}, {} + T - {}, {}, B, {}, static_cast<{} *>(out)); break;\n", k, b.name,
                       b.padBefore, s.depth, s.depth, b.width, b.index ? "int32_t" : "real");
  }
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
  out += "constexpr int64_t kParallelWork = 1 << 20; // element-ops in a launch worth a thread team\n\n";
  out += workspace() + "\n";
  for (const KernelIR &k : p_.kernels) out += kernels_.kernel(k) + "\n";
  out += forward() + "\n" + backward() + "\n" + readers() + "\n";
  out += "} // namespace\n\n" + abiTable(p_);
  return out;
}

} // namespace

std::string printCppModule(const Program &p, const SourceManager &sm) { return ModulePrinter(p, sm).print(); }

} // namespace rnnc::codegen
