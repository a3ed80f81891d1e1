#include "driver/Show.h"

#include "analysis/Recurrence.h"
#include "passes/PlanMemory.h"
#include "passes/PlanTimeParallel.h"
#include "ir/Printer.h"
#include "support/Crash.h"

#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc {

std::string equationLines(const Graph &g, const std::vector<NodeId> &nodes, const SourceManager &sm) {
  std::map<std::string, std::set<uint32_t>> lines; // file -> lines
  for (NodeId id : nodes)
    for (SourceRange r : g.node(id).locs) {
      if (!r.valid()) continue;
      std::string loc = locText(sm, r);
      lines[loc.substr(0, loc.rfind(':'))].insert(sm.lineCol(r.begin).line);
    }
  std::string out;
  for (const auto &[file, ls] : lines) {
    std::string list;
    for (uint32_t l : ls) list += (list.empty() ? "" : ",") + std::to_string(l);
    out += (out.empty() ? "" : " ") + file + ":" + list;
  }
  return out;
}

namespace {

std::string kernelSummary(const Graph &g, const Kernel &k) {
  if (k.gemm) {
    const Node &n = g.node(k.nodes[0]);
    std::string params;
    for (const auto &p : n.params) params += (params.empty() ? "" : "+") + p;
    int64_t rows = n.width, cols = g.node(n.inputs[0].src).width;
    if (n.op == Op::MatMulT) return fmt::format("{}^T @ {} [{} x {}]", params, edgeText(n.inputs[0]), rows, cols);
    if (n.op == Op::GradMatrix)
      return fmt::format("d{} = sum over t of {} {}^T [{} x {}]", params, edgeText(n.inputs[0]), edgeText(n.inputs[1]),
                         cols, g.node(n.inputs[1].src).width);
    return fmt::format("{} @ {} [{} x {}]", params, edgeText(n.inputs[0]), rows, cols);
  }
  std::map<std::string, int> ops;
  std::vector<std::string> order;
  for (NodeId id : k.nodes) {
    std::string m = opMnemonic(g.node(id).op);
    if (!ops[m]++) order.push_back(m);
  }
  std::string out;
  for (const auto &m : order) out += (out.empty() ? "" : " ") + m + (ops[m] > 1 ? fmt::format("*{}", ops[m]) : "");
  return out;
}

} // namespace

/// "  runs: as a parallel scan, ..." under a loop's recurrence line ("" for
/// a loop no plan applies to).
static std::string runsAs(const Compilation &c, int loop, const std::string &reason) {
  LoopPlan plan = static_cast<size_t>(loop) < c.loopPlans.size() ? c.loopPlans[loop] : LoopPlan::Sequential;
  bool guarded = c.timeParallel.mode == TimeParallelMode::Auto;
  const char *when = guarded ? " where T and B·n make it faster (auto)" : "";
  switch (plan) {
  case LoopPlan::Scan: return fmt::format("  runs: as a parallel scan over time{}\n", when);
  case LoopPlan::Newton:
    return fmt::format("  runs: by {} Newton iterations of parallel scans{}\n", c.timeParallel.newtonIterations, when);
  case LoopPlan::Sequential: break;
  }
  return reason.empty() ? "" : fmt::format("  runs: step by step: {}\n", reason);
}

/// "  kept in float: c, h (...)" under a loop of a --dtype bf16|f16 compilation:
/// the values the loop writes and reads steps back, which plan-memory keeps
/// in float (docs/precision.md).
static std::string floatStates(const Compilation &c, const Stage &st) {
  std::string names;
  for (NodeId id : st.nodes) {
    const int b = c.memory.bufferOf[id];
    if (b < 0 || c.memory.buffers[b].half || !(c.memory.buffers[b].padBefore || c.memory.buffers[b].padAfter)) continue;
    const Node &n = c.graph.node(id);
    names += (names.empty() ? "" : ", ") + (n.name.empty() ? fmt::format("%{}", id) : n.name);
  }
  if (names.empty()) return "";
  return fmt::format("  kept in float (--dtype {0}): {1} (read steps back: rounding at every step would compound; "
                     "a product reads them rounded to {0})\n",
                     dtypeName(c.dtype), names);
}

std::string scheduleText(const Compilation &c, const SourceManager &sm) {
  const Graph &g = c.graph;
  std::string out = fmt::format("schedule {}{}: {} stage{}, {} stream{}\n", g.name, c.optimize ? "" : " (-O0)",
                                c.schedule.stages.size(), c.schedule.stages.size() == 1 ? "" : "s",
                                c.schedule.streams, c.schedule.streams == 1 ? "" : "s");
  // What each loop could become (-O0 runs no analysis).
  std::vector<RecurrenceClass> classes;
  std::vector<std::string> reasons;
  if (c.optimize) classes = classifyRecurrences(g, c.time);
  chooseLoopPlans(c, &reasons);
  int launch = 0;
  for (size_t s = 0; s < c.schedule.stages.size(); ++s) {
    const Stage &st = c.schedule.stages[s];
    std::string kind = st.loop ? fmt::format("loop over t {}", st.direction > 0 ? "forward" : "backward")
                               : std::string("all steps at once");
    std::string deps;
    for (int a : st.after) deps += (deps.empty() ? "" : ", ") + std::to_string(a);
    std::string waits;
    for (int w : st.waits) waits += (waits.empty() ? "" : ", ") + std::to_string(w);
    out += fmt::format("stage {}: {}, stream {}", s, kind, st.stream);
    if (!deps.empty()) out += fmt::format(", after {}", deps);
    if (!waits.empty()) out += fmt::format(", waits on an event of {}", waits);
    out += "\n";
    if (st.loop && st.loopIndex >= 0 && static_cast<size_t>(st.loopIndex) < classes.size()) {
      out += fmt::format("  recurrence: {}\n", recurrenceSummary(g, classes[st.loopIndex]));
      out += runsAs(c, st.loopIndex, reasons[st.loopIndex]);
      if (isHalf(c.dtype) && c.memory.planned) out += floatStates(c, st);
    }
    for (const Kernel &k : st.kernels) {
      out += fmt::format("  {} k{}: {}", k.gemm ? "gemm  " : "kernel", launch++, kernelSummary(g, k));
      std::string eq = equationLines(g, k.nodes, sm);
      if (!eq.empty()) out += "  # " + eq;
      out += "\n";
    }
  }
  return out;
}

std::string timeClassesText(const Compilation &c) {
  std::string out;
  for (size_t l = 0; l < c.time.loops.size(); ++l) {
    const RecurrentLoop &loop = c.time.loops[l];
    std::string nodes;
    for (NodeId id : loop.nodes) nodes += fmt::format(" %{}", id);
    out += fmt::format("loop {}: {}, level {}:{}\n", l, loop.direction > 0 ? "forward" : "backward", loop.level, nodes);
  }
  std::string parallel;
  for (NodeId id = 0; id < c.graph.nodes.size(); ++id)
    if (!c.graph.node(id).dead && !c.time.recurrent(id) && opKind(c.graph.node(id).op) != OpKind::Leaf)
      parallel += fmt::format(" %{}", id);
  out += fmt::format("time-parallel:{}\n", parallel.empty() ? " none" : parallel);
  return out;
}

std::string memoryText(const Compilation &c) {
  const MemoryPlan &m = c.memory;
  int own = 0;
  for (const WorkspaceBuffer &b : m.buffers) own += b.shares < 0;
  std::string out = fmt::format("memory {}: {} buffers, {} with memory of their own: {} bytes per step and sequence plus {} "
                                "per sequence ({} per step without sharing); saved for backward {} bytes per step and "
                                "sequence\n",
                                c.graph.name, m.buffers.size(), own, m.bytesPerStep, m.fixedBytes, m.unsharedBytesPerStep,
                                m.savedBytesPerStep);
  for (const WorkspaceBuffer &b : m.buffers) {
    std::string what = b.input >= 0 ? (b.backward ? "seed" : "input")
                       : b.scratch  ? "scan scratch"
                       : b.fixed    ? "initial-state gradient"
                       : b.saved    ? "saved"
                                    : "";
    if (b.stepLocal) what += std::string(what.empty() ? "" : ", ") + "one step";
    if (b.ring) what += fmt::format("{}ring of {}", what.empty() ? "" : ", ", b.ring);
    if (b.lastSteps) what += fmt::format("{}last {}", what.empty() ? "" : ", ", b.lastSteps);
    if (b.block) what += fmt::format("{}CPU: a block of steps", what.empty() ? "" : ", ");
    if (b.caller) what += fmt::format("{}CPU: the caller's array", what.empty() ? "" : ", ");
    if (b.shares >= 0) what += fmt::format("{}shares {}", what.empty() ? "" : ", ", m.buffers[b.shares].name);
    if (b.cpuShares != b.shares) // the CPU's stages in blocks live at their loops: its own sharing
      what += fmt::format("{}CPU: {}", what.empty() ? "" : ", ",
                          b.cpuShares >= 0 ? "shares " + m.buffers[b.cpuShares].name : std::string("its own memory"));
    out += fmt::format("  {}{}: [{}][B][{}]{}{}\n", b.name, b.node == kNoNode ? "" : fmt::format(" (%{})", b.node),
                       bufferRows(b), b.width, b.index ? " int32" : "", what.empty() ? "" : "  " + what);
  }
  if (m.onesWidth) out += fmt::format("  CUDA's ones: [T][B][{}]\n", m.onesWidth);
  if (m.maskKeyBytes) out += fmt::format("  the masks' key: {} bytes\n", m.maskKeyBytes);
  if (m.droppedElements)
    out += fmt::format("  dropped params: {} reals{}\n", m.droppedElements,
                       m.droppedGradElements ? ", and as many for their gradients" : "");
  if (m.lengths) out += "  the sequences' lengths: [B] int32, and the loss's weight\n";
  if (m.packWidth)
    out += fmt::format("  the CPU's packed running rows: [min(T·B, {})][{}]\n", MemoryPlan::kPackedRows, m.packWidth);
  return out;
}

std::string loopPlansText(const Compilation &c) {
  std::vector<std::string> reasons;
  std::vector<LoopPlan> plans = chooseLoopPlans(c, &reasons);
  std::string out;
  for (size_t l = 0; l < c.time.loops.size(); ++l) {
    LoopPlan plan = l < c.loopPlans.size() ? c.loopPlans[l] : LoopPlan::Sequential;
    out += fmt::format("loop {}: {}", l, loopPlanName(plan));
    if (plan == LoopPlan::Sequential && !reasons[l].empty()) out += ": " + reasons[l];
    out += "\n";
  }
  return out.empty() ? "no loops\n" : out;
}

std::string passDumpText(PassDump dump, const Compilation &c, const SourceManager &sm) {
  switch (dump) {
  case PassDump::Graph: return printGraph(c.graph, sm);
  case PassDump::GraphTimeClasses: return printGraph(c.graph, sm) + timeClassesText(c);
  case PassDump::LoopPlans: return timeClassesText(c) + loopPlansText(c);
  case PassDump::Schedule: return scheduleText(c, sm);
  case PassDump::Memory: return memoryText(c);
  }
  RNNC_UNREACHABLE("unknown pass dump");
}

/// Text inside a Graphviz double-quoted string: `"` and `\` escaped (a file
/// name may hold either).
static std::string dotEscaped(const std::string &text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

std::string graphDot(const Compilation &c, const SourceManager &sm, const std::function<std::string(const Node &)> &link) {
  const Graph &g = c.graph;
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n", g.name);
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node &n = g.node(id);
    if (n.dead) continue;
    std::string label = fmt::format("%{} {}", id, opMnemonic(n.op));
    for (const auto &p : n.params) label += " " + p;
    if (n.op == Op::Input) label += " " + n.name;
    if (n.op == Op::Const) label += fmt::format(" {}", n.value);
    label += fmt::format("\\n[{}]", n.width);
    if (!n.name.empty() && n.op != Op::Input && n.op != Op::Param) label += " " + n.name;
    std::string style = c.time.loopOf.size() > id && c.time.recurrent(id)
                            ? ", style=filled, fillcolor=\"#f4cccc\""
                            : (opKind(n.op) == OpKind::Leaf ? ", style=rounded" : "");
    std::string tip = n.locs.empty() ? "" : fmt::format(", tooltip=\"{}\"", dotEscaped(locText(sm, n.locs.front())));
    std::string url = link ? link(n) : "";
    if (!url.empty()) url = fmt::format(", URL=\"{}\"", url);
    out += fmt::format("  n{} [label=\"{}\"{}{}{}];\n", id, label, style, tip, url);
  }
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node &n = g.node(id);
    if (n.dead) continue;
    for (const Edge &e : n.inputs) {
      if (e.delay == 0) out += fmt::format("  n{} -> n{};\n", e.src, id);
      else
        out += fmt::format("  n{} -> n{} [style=dashed, color=\"#cc0000\", label=\"t{}{}\"];\n", e.src, id,
                           e.delay > 0 ? '-' : '+', e.delay > 0 ? e.delay : -e.delay);
    }
  }
  for (const GraphPort &o : g.outputs) {
    out += fmt::format("  out_{} [label=\"output {}\", shape=oval];\n  n{} -> out_{};\n", o.name, o.name, o.value.src, o.name);
  }
  return out + "}\n";
}

} // namespace rnnc
