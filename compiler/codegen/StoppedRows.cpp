// Folding a --lengths program's fused kernels at the rows past a sequence's
// end. At a stopped row (step t >= len[b]) `active` at step t or later is 0:
// each kernel's sweeps are folded with it (0·x = 0, x + 0 = x, 1·x = x; the
// padding is finite, docs/lengths.md), then cut to the stores that something
// reads at a stopped row. Two fixpoints over the whole program:
//   1. constants: a buffer every stopped store of which folds to the same
//      constant (1 - active is 1, a gradient past the end is 0, a sum or mean
//      of a constant is one) is that constant where a stopped row reads it
//      in the same step;
//   2. needs: a buffer is needed at stopped rows when a port, a library call
//      (which may read a stopped row inside its running rows), a kernel that
//      is not folded, a full row reading a later step, or a folded store that
//      is itself needed reads it.
// The CPU and CUDA printers run the folded sweeps at stopped rows.
#include "codegen/StoppedRows.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace rnnc::codegen {

namespace {

bool isConst(const Operand &o, double v) { return o.kind == Operand::Kind::Const && o.value == v; }

Operand constant(double v) {
  Operand o;
  o.kind = Operand::Kind::Const;
  o.value = v;
  return o;
}

Operand local(int index) {
  Operand o;
  o.kind = Operand::Kind::Local;
  o.local = index;
  return o;
}

/// One kernel's sweeps folded at a stopped row, given the buffers known
/// constant there. `stores[buffer]` is what each store became (a constant or
/// not); the sweeps keep every store until cut.
class Folder {
public:
  explicit Folder(const std::map<int, double> &constants) : constants_(constants) {}

  Sweep fold(const Sweep &s) {
    Sweep out = s;
    if (s.kind != Sweep::Kind::Map) { // a reduction or softmax: its operands, or its value when they are constant
      Instr &in = out.body.front();
      for (Operand &o : in.args)
        if (o.kind != Operand::Kind::Local) o = argument(o, {});
      const bool constant = in.args.size() == 1 && in.args[0].kind == Operand::Kind::Const;
      if (!constant || (in.op != Op::Sum && in.op != Op::Mean)) {
        storedConstant(in.store, std::nullopt);
        return out;
      }
      // A sum or mean of a constant is one: a map of width 1 stores it.
      const double value = in.args[0].value * (in.op == Op::Sum ? static_cast<double>(in.inWidth) : 1.0);
      out.kind = Sweep::Kind::Map;
      out.width = 1;
      in.op = Op::Add;
      in.args = {rnnc::codegen::constant(value)};
      in.width = 1;
      if (std::isfinite(value)) storedConstant(in.store, value);
      else storedConstant(in.store, std::nullopt);
      return out;
    }
    out.body.clear();
    std::vector<Operand> value(s.body.size()); // each instr's folded value: a constant or a local of `out`
    for (size_t j = 0; j < s.body.size(); ++j) {
      Instr in = s.body[j];
      for (Operand &o : in.args) o = argument(o, value);
      value[j] = simplify(in, out);
      if (in.store < 0) continue;
      // Only a finite constant is one: NaN != NaN would keep the fixpoint from settling.
      if (value[j].kind == Operand::Kind::Const && std::isfinite(value[j].value)) storedConstant(in.store, value[j].value);
      else storedConstant(in.store, std::nullopt);
      // A constant, or a value another store took, is stored by a copy (the
      // readers of the value keep reading the constant or the first local).
      if (value[j].kind == Operand::Kind::Local && out.body[static_cast<size_t>(value[j].local)].store < 0) {
        out.body[static_cast<size_t>(value[j].local)].store = in.store;
        out.body[static_cast<size_t>(value[j].local)].storeShift = in.storeShift;
      } else {
        Instr copy = in;
        copy.op = Op::Add;
        copy.args = {value[j]};
        copy.pieces.clear();
        out.body.push_back(copy);
      }
    }
    return out;
  }

  /// Per buffer stored: its constant, or nullopt when some store is not one.
  std::map<int, std::optional<double>> stores;

private:
  void storedConstant(int buffer, std::optional<double> v) {
    auto [it, fresh] = stores.emplace(buffer, v);
    if (!fresh && it->second != v) it->second = std::nullopt;
  }

  Operand argument(const Operand &o, const std::vector<Operand> &value) const {
    switch (o.kind) {
    case Operand::Kind::Local: return value[static_cast<size_t>(o.local)];
    case Operand::Kind::Active: return o.delay <= 0 ? constant(0) : o; // step t - delay >= t >= len
    case Operand::Kind::Load:
      if (o.delay == 0)
        if (auto c = constants_.find(o.buffer); c != constants_.end()) return constant(c->second);
      return o;
    default: return o;
    }
  }

  /// The folded value of `in` (its args folded): a constant, or a local of
  /// `out` (appended when it is computed).
  Operand simplify(Instr &in, Sweep &out) const {
    auto allConst = [&] {
      for (const Operand &o : in.args)
        if (o.kind != Operand::Kind::Const) return false;
      return true;
    };
    auto allZero = [&] {
      for (const Operand &o : in.args)
        if (!isConst(o, 0)) return false;
      return true;
    };
    switch (in.op) {
    case Op::Mul: {
      double factor = 1;
      std::vector<Operand> rest;
      for (const Operand &o : in.args) {
        if (isConst(o, 0)) return constant(0);
        if (o.kind == Operand::Kind::Const) factor *= o.value;
        else rest.push_back(o);
      }
      if (rest.empty()) return constant(factor);
      if (factor != 1) rest.push_back(constant(factor));
      in.args = rest;
      if (rest.size() == 1 && rest[0].kind == Operand::Kind::Local) return rest[0];
      break;
    }
    case Op::Add: {
      double sum = 0;
      std::vector<Operand> rest;
      for (const Operand &o : in.args) {
        if (o.kind == Operand::Kind::Const) sum += o.value;
        else rest.push_back(o);
      }
      if (rest.empty()) return constant(sum);
      if (sum != 0) rest.push_back(constant(sum));
      in.args = rest;
      if (rest.size() == 1 && rest[0].kind == Operand::Kind::Local) return rest[0];
      break;
    }
    case Op::Sub:
      if (allConst()) return constant(in.args[0].value - in.args[1].value);
      if (isConst(in.args[1], 0) && in.args[0].kind == Operand::Kind::Local) return in.args[0];
      break;
    case Op::Neg:
      if (allConst()) return constant(-in.args[0].value);
      break;
    case Op::Div:
      if (isConst(in.args[0], 0)) return constant(0);
      break;
    case Op::Concat:
    case Op::Slice:
    case Op::Broadcast:
    case Op::Pad:
      if (allZero()) return constant(0);
      if ((in.op == Op::Slice || in.op == Op::Broadcast) && allConst()) return constant(in.args[0].value);
      break;
    default: break;
    }
    out.body.push_back(in);
    out.body.back().store = -1;
    return local(static_cast<int>(out.body.size()) - 1);
  }

  const std::map<int, double> &constants_;
};

/// The instrs of a folded map sweep that store a needed buffer, and what they
/// read, renumbered; an empty body when none does.
Sweep cut(const Sweep &s, const std::set<int> &needed) {
  Sweep out = s;
  if (s.kind != Sweep::Kind::Map) {
    if (!needed.count(s.body.front().store)) out.body.clear();
    return out;
  }
  std::vector<bool> keep(s.body.size(), false);
  for (size_t j = s.body.size(); j-- > 0;) {
    const Instr &in = s.body[j];
    if (in.store >= 0 && needed.count(in.store)) keep[j] = true;
    if (!keep[j]) continue;
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Local) keep[static_cast<size_t>(o.local)] = true;
  }
  std::vector<int> renumber(s.body.size(), -1);
  out.body.clear();
  for (size_t j = 0; j < s.body.size(); ++j) {
    if (!keep[j]) continue;
    Instr in = s.body[j];
    if (in.store >= 0 && !needed.count(in.store)) in.store = -1;
    for (Operand &o : in.args)
      if (o.kind == Operand::Kind::Local) o.local = renumber[static_cast<size_t>(o.local)];
    renumber[j] = static_cast<int>(out.body.size());
    out.body.push_back(std::move(in));
  }
  return out;
}

void readsOf(const Sweep &s, std::set<int> &into) {
  for (const Instr &in : s.body)
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Load) into.insert(o.buffer);
}

} // namespace

void foldStoppedRows(Program &p, const std::function<bool(const KernelIR &)> &canFold) {
  if (!p.hasLengths) return;
  // The kernels folded: fused, not a time-parallel loop's, not the steps before the first.
  std::vector<bool> folds(p.kernels.size(), false);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    folds[k] = p.kernels[k].kind == KernelIR::Kind::Fused && !p.kernels[k].epilogue && canFold(p.kernels[k]);
  std::set<int> needed;
  for (const StageIR &s : p.stages) {
    if (s.scan.plan == LoopPlan::Sequential) continue;
    for (int k : s.kernels) folds[static_cast<size_t>(k)] = false;
    for (int b : s.scan.states) needed.insert(b);
  }
  for (const auto *ports : {&p.inputs, &p.outputs, &p.states, &p.seeds, &p.inputGrads, &p.stateGrads, &p.stateSeeds})
    for (const PortIR &port : *ports)
      if (port.buffer >= 0) needed.insert(port.buffer);
  if (p.lossBuffer >= 0) needed.insert(p.lossBuffer);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelIR &kernel = p.kernels[k];
    for (int b : {kernel.a, kernel.b})
      if (b >= 0) needed.insert(b);
    for (const Sweep &s : kernel.sweeps)
      for (const Instr &in : s.body)
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load && (!folds[k] || o.delay < 0)) needed.insert(o.buffer);
  }

  // 1. Constants, until no more buffers become one.
  std::map<int, double> constants;
  std::vector<std::vector<Sweep>> folded(p.kernels.size());
  for (;;) {
    std::map<int, std::optional<double>> stores;
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      const KernelIR &kernel = p.kernels[k];
      if (kernel.out >= 0) stores[kernel.out] = std::nullopt;
      for (const Sweep &s : kernel.sweeps)
        for (const Instr &in : s.body)
          if (in.store >= 0 && !folds[k]) stores[in.store] = std::nullopt;
      if (!folds[k]) continue;
      Folder folder(constants);
      folded[k].clear();
      for (const Sweep &s : kernel.sweeps) folded[k].push_back(folder.fold(s));
      for (auto [b, v] : folder.stores) {
        auto [it, fresh] = stores.emplace(b, v);
        if (!fresh && it->second != v) it->second = std::nullopt;
      }
    }
    std::map<int, double> next;
    for (auto [b, v] : stores)
      if (v) next[b] = *v;
    if (next == constants) break;
    constants = std::move(next);
  }

  // 2. Needs, until no cut body reads a buffer not yet needed.
  for (;;) {
    std::set<int> reads = needed;
    for (size_t k = 0; k < p.kernels.size(); ++k)
      if (folds[k])
        for (const Sweep &s : folded[k]) readsOf(cut(s, needed), reads);
    if (reads == needed) break;
    needed = std::move(reads);
  }
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (!folds[k]) continue;
    KernelIR &kernel = p.kernels[k];
    kernel.foldsStopped = true;
    for (const Sweep &s : folded[k]) {
      Sweep c = cut(s, needed);
      if (!c.body.empty()) kernel.stopped.push_back(std::move(c));
    }
  }
}

} // namespace rnnc::codegen
