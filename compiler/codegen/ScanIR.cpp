// 1. The states: buffers the loop's kernels store and read at t - direction
//    (one step back in the loop's order); every in-loop load is of a state one
//    step back, or of a value stored earlier in the same step, at element i.
// 2. The step: the kernels' map sweeps (all of width n) concatenated in issue
//    order, locals renumbered, a load of a value stored earlier in the step
//    replaced by the local that computed it; the local last stored to each
//    state is its new value. That is the exact step (stores kept: what the
//    CUDA scan runs over each run of steps); the step the tangents are taken
//    of drops the stores and the ops no state needs.
// 3. Scratch: chunk aggregates and carries, Newton also each step's
//    coefficients: plan-memory's buffers, sized for the k states of width n.
#include "codegen/ScanIR.h"

#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc::codegen {

bool buildScanIR(Program &p, int stageIndex, LoopPlan plan, bool guarded, int iterations, const ScanScratch &scratch,
                 std::string &why) {
  StageIR &stage = p.stages[stageIndex];
  ScanIR scan;
  scan.plan = plan;
  scan.guarded = guarded;
  scan.iterations = plan == LoopPlan::Newton ? iterations : 0;
  // 1. What the loop stores, and its width.
  std::set<int> stored;
  int64_t width = -1;
  for (int k : stage.kernels) {
    const KernelIR &kernel = p.kernels[k];
    if (kernel.kind != KernelIR::Kind::Fused) return why = "its step calls a library", false;
    for (const Sweep &s : kernel.sweeps) {
      if (s.kind != Sweep::Kind::Map) return why = "its step reduces over elements", false;
      if (width < 0) width = s.width;
      if (s.width != width) return why = "its step sweeps different widths", false;
      for (const Instr &in : s.body) {
        if (in.op == Op::Slice || in.op == Op::Concat || in.op == Op::Pad || in.op == Op::Broadcast || in.op == Op::Embed)
          return why = fmt::format("its step moves elements ({})", opMnemonic(in.op)), false;
        if (in.store >= 0) stored.insert(in.store);
      }
    }
  }
  if (width <= 0) return why = "its step is empty", false;
  // 2. The step, in issue order.
  std::map<int, int> localOfStored; // buffer -> the step's local last stored to it
  std::map<int, int> stateIndex;    // buffer -> its index in scan.states
  for (int k : stage.kernels)
    for (const Sweep &s : p.kernels[k].sweeps) {
      std::vector<int> renumbered; // the sweep's local -> the step's
      for (const Instr &original : s.body) {
        Instr in = original;
        for (Operand &o : in.args) {
          if (o.kind == Operand::Kind::Local) {
            o.local = renumbered[static_cast<size_t>(o.local)];
            continue;
          }
          if (o.kind != Operand::Kind::Load || !stored.count(o.buffer)) continue;
          if (o.scalar || o.shift != 0) return why = "its step reads another element of its own values", false;
          if (o.delay == stage.direction) {
            if (!stateIndex.count(o.buffer)) {
              stateIndex[o.buffer] = static_cast<int>(scan.states.size());
              scan.states.push_back(o.buffer);
            }
            continue;
          }
          auto it = localOfStored.find(o.buffer);
          if (o.delay != 0 || it == localOfStored.end())
            return why = "its step reads its values other than one step back", false;
          Operand local;
          local.kind = Operand::Kind::Local;
          local.local = it->second;
          o = local;
        }
        int index = static_cast<int>(scan.step.body.size());
        renumbered.push_back(index);
        if (in.store >= 0) localOfStored[in.store] = index;
        scan.step.body.push_back(in);
      }
    }
  if (scan.states.empty()) return why = "its step reads no state one step back", false;
  for (int b : scan.states) {
    if (p.buffers[b].width != width) return why = "its states have different widths", false;
    scan.stateLocals.push_back(localOfStored.at(b));
  }
  scan.exactStep = scan.step;
  scan.exactStep.width = width;
  scan.exactStateLocals = scan.stateLocals;
  // Prune what no state needs.
  std::vector<bool> live(scan.step.body.size(), false);
  for (int l : scan.stateLocals) live[static_cast<size_t>(l)] = true;
  for (size_t i = scan.step.body.size(); i-- > 0;)
    if (live[i])
      for (const Operand &o : scan.step.body[i].args)
        if (o.kind == Operand::Kind::Local) live[static_cast<size_t>(o.local)] = true;
  std::vector<int> kept(scan.step.body.size(), -1);
  std::vector<Instr> body;
  for (size_t i = 0; i < scan.step.body.size(); ++i) {
    if (!live[i]) continue;
    Instr in = scan.step.body[i];
    in.store = -1;
    for (Operand &o : in.args)
      if (o.kind == Operand::Kind::Local) o.local = kept[static_cast<size_t>(o.local)];
    kept[i] = static_cast<int>(body.size());
    body.push_back(std::move(in));
  }
  scan.step.body = std::move(body);
  scan.step.width = width;
  for (int &l : scan.stateLocals) l = kept[static_cast<size_t>(l)];
  scan.width = width;
  // 3. Scratch.
  if (scratch.states != static_cast<int>(scan.states.size()) || scratch.width != width)
    return why = fmt::format("its scratch was planned for {} states of width {}, not {} of width {}", scratch.states,
                             scratch.width, scan.states.size(), width),
           false;
  if ((plan == LoopPlan::Newton) != (scratch.coefficients >= 0)) return why = "its scratch was planned for another plan", false;
  scan.aggregates = scratch.aggregates;
  scan.carries = scratch.carries;
  scan.coefficients = scratch.coefficients;
  stage.scan = std::move(scan);
  return true;
}

std::string scanName(const StageIR &s, int stage) {
  return fmt::format("{}_{}", s.scan.plan == LoopPlan::Newton ? "newton" : "scan", stage);
}

std::string stepAt(int direction, const std::string &j) {
  if (direction > 0) return j;
  if (j == "0") return "T - 1";
  return fmt::format(j.find(' ') == std::string::npos ? "T - 1 - {}" : "T - 1 - ({})", j);
}

int stageOrdinal(const Program &p, int stage) {
  int ordinal = 0;
  for (int at = 0; at <= stage; ++at)
    ordinal += p.stages[static_cast<size_t>(at)].backward == p.stages[static_cast<size_t>(stage)].backward;
  return ordinal;
}

KernelIR loopEquations(const Program &p, const StageIR &s) {
  KernelIR all;
  for (int k : s.kernels)
    for (const SourceRange &r : p.kernels[static_cast<size_t>(k)].equations) all.equations.push_back(r);
  return all;
}

} // namespace rnnc::codegen
