#include "codegen/HostCode.h"

#include "passes/PlanMemory.h"

#include <fmt/format.h>

namespace rnnc::codegen {

std::string rowsOf(const Buffer &b) { return bufferRows(b); }

static const char *typeOf(const Buffer &b) { return b.index ? "int32_t" : "real"; }

std::string workspaceStruct(const Program &p, const std::string &extraMembers) {
  std::string out = "/// Every value that leaves its sweep, [padding + T + padding][B][width].\nstruct Workspace {\n";
  for (const Buffer &b : p.buffers)
    out += fmt::format("  {} *{}; // [{}][B][{}]{}\n", typeOf(b), b.name, rowsOf(b), b.width,
                       b.scratch ? (b.fixed ? ": a scan's, per chunk" : ": a scan's, per step")
                       : b.fixed ? ": the initial-state gradient"
                       : b.stepLocal ? ": one step, reused"
                       : b.ring ? ": a ring of the steps its loop reads back"
                       : b.shares >= 0 ? ": shares " + p.buffers[b.shares].name + "'s memory"
                                       : "");
  out += extraMembers;
  return out + "  real loss_seed; // dL/d(loss at each step): 1 / (T·B), the loss is a mean\n};\n";
}

std::string workspaceLayout(const Program &p, const std::string &extraTakes) {
  std::string out = "/// Carves the workspace from `base` (null: only measures). Returns its bytes, 0 when too large.\n";
  out += "int64_t layout(int64_t T, int64_t B, void *base, Workspace *ws) {\n  Carver c(base, T, B);\n";
  for (const Buffer &b : p.buffers)
    if (b.shares < 0)
      out += fmt::format("  ws->{} = c.take<{}>({}, {}, {});\n", b.name, typeOf(b), b.rowsPerStep(), b.fixedRows(), b.width);
  for (const Buffer &b : p.buffers)
    if (b.shares >= 0)
      out += fmt::format("  ws->{} = ws->{}; // its life starts after {}'s ends\n", b.name, p.buffers[b.shares].name,
                         p.buffers[b.shares].name);
  out += extraTakes;
  return out + "  ws->loss_seed = real(1) / real(T * B);\n  return c.bytes();\n}\n";
}

std::string paddingClears(const Program &p, bool backward, const HostCall &c) {
  std::string out;
  for (const Buffer &b : p.buffers) {
    if (b.backward != backward || b.fixed || b.stepLocal) continue;
    if (b.ring) { // every slot starts as the zeros before the first step (after the last)
      out += c.call(fmt::format("clear_rows(ws.{}, 0, {}, B, {}", b.name, b.ring, b.width));
      continue;
    }
    if (b.padBefore) out += c.call(fmt::format("clear_rows(ws.{}, 0, {}, B, {}", b.name, b.padBefore, b.width));
    if (b.padAfter) out += c.call(fmt::format("clear_rows(ws.{}, {} + T, {}, B, {}", b.name, b.padBefore, b.padAfter, b.width));
  }
  return out;
}

std::string inputCopies(const Program &p, const HostCall &c) {
  std::string out;
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const Buffer &b = p.buffers[p.inputs[k].buffer];
    out += c.call(fmt::format("copy_rows(ws.{}, {}, static_cast<const {} *>(inputs[{}]), T, B, {}", b.name, b.padBefore,
                              typeOf(b), k, b.width));
  }
  for (size_t k = 0; k < p.states.size(); ++k) {
    const PortIR &s = p.states[k];
    const Buffer &b = p.buffers[s.buffer];
    out += fmt::format("  if (states && states[{}])\n  ", k) +
           c.call(fmt::format("copy_rows(ws.{}, {}, static_cast<const {} *>(states[{}]), {}, B, {}", b.name,
                              b.padBefore - s.depth, typeOf(b), k, s.depth, b.width));
  }
  return out;
}

std::string seedCopies(const Program &p, const HostCall &c) {
  std::string out;
  for (size_t k = 0; k < p.seeds.size(); ++k) {
    const Buffer &b = p.buffers[p.seeds[k].buffer];
    out += fmt::format("  if (seeds && seeds[{}])\n  ", k) +
           c.call(fmt::format("copy_rows(ws.{}, {}, static_cast<const real *>(seeds[{}]), T, B, {}", b.name, b.padBefore, k,
                              b.width));
    out += "  else\n  " + c.call(fmt::format("clear_rows(ws.{}, {}, T, B, {}", b.name, b.padBefore, b.width));
  }
  return out;
}

std::string gradientReads(const Program &p, const HostCall &c,
                          std::string (*stateLeaf)(const PortIR &g, const std::string &dst)) {
  std::string out;
  for (size_t k = 0; k < p.inputGrads.size(); ++k) {
    const PortIR &g = p.inputGrads[k];
    const Buffer &b = p.buffers[g.buffer];
    out += fmt::format("  if (input_grads && input_grads[{}])\n  ", k) +
           c.call(fmt::format("read_rows(ws.{}, {}, T, B, {}, static_cast<real *>(input_grads[{}])", b.name,
                              b.padBefore - g.delay, b.width, k));
  }
  for (size_t k = 0; k < p.states.size(); ++k) {
    const PortIR &s = p.states[k];
    if (s.index) continue;
    const PortIR *g = nullptr;
    for (const PortIR &port : p.stateGrads)
      if (port.name == s.name) g = &port;
    std::string dst = fmt::format("static_cast<real *>(state_grads[{}])", k);
    out += fmt::format("  if (state_grads && state_grads[{}])\n  ", k);
    if (!g) // the objective does not reach this state (or its gradient was not compiled): zeros
      out += c.call(fmt::format("clear_rows({}, 0, {}, B, {}", dst, s.depth, s.width));
    else if (g->buffer < 0)
      out += stateLeaf(*g, dst);
    else
      out += c.call(fmt::format("read_rows(ws.{}, 0, {}, B, {}, {}", p.buffers[g->buffer].name, g->depth, g->width, dst));
  }
  return out;
}

std::string outputReadCases(const Program &p, const HostCall &c) {
  std::string out;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const PortIR &o = p.outputs[k];
    const Buffer &b = p.buffers[o.buffer];
    out += fmt::format("  case {}:\n  ", k) +
           c.call(fmt::format("read_rows(ws.{}, {}, T, B, {}, static_cast<{} *>(out)", b.name, b.padBefore - o.delay, b.width,
                              typeOf(b))) +
           "    break;\n";
  }
  return out;
}

std::string finalStateReadCases(const Program &p, const HostCall &c) {
  std::string out;
  for (size_t k = 0; k < p.states.size(); ++k) {
    const PortIR &s = p.states[k];
    const Buffer &b = p.buffers[s.buffer];
    out += fmt::format("  case {}:\n  ", k) +
           c.call(fmt::format("read_rows(ws.{}, {} + T - {}, {}, B, {}, static_cast<{} *>(out)", b.name, b.padBefore, s.depth,
                              s.depth, b.width, typeOf(b))) +
           "    break;\n";
  }
  return out;
}

} // namespace rnnc::codegen
