// Concatenated pieces stored in place (ConcatInPlace.h). A piece qualifies
// when its buffer is read only by the concat and stored only by one map sweep
// of the same kernel as wide as the piece; the concat's buffer must be read
// nowhere in the kernel and share no memory with what it reads, so writing it
// a sweep earlier changes nothing anyone sees.
#include "codegen/ConcatInPlace.h"

#include <map>
#include <set>

namespace rnnc::codegen {
namespace {

bool sameMemory(const Program &p, int a, int b) {
  return memoryOwner(p, a, false) == memoryOwner(p, b, false) || memoryOwner(p, a, true) == memoryOwner(p, b, true);
}

/// How often each buffer is read or stored anywhere: by a sweep, a library
/// call, the host (ports, the loss), a loop run in parallel over time.
struct Uses {
  std::map<int, int> reads, stores;
  std::set<int> pinned; // ports, the loss, scan states and scratch: never rewritten
};

Uses usesOf(const Program &p) {
  Uses u;
  for (const KernelIR &k : p.kernels) {
    forEachSweep(k, [&](const Sweep &s) {
      for (const Instr &in : s.body) {
        if (in.store >= 0) ++u.stores[in.store];
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) ++u.reads[o.buffer];
      }
    });
    for (int b : {k.a, k.b})
      if (b >= 0) ++u.reads[b];
    if (k.out >= 0) ++u.stores[k.out];
  }
  for (const auto *ports : {&p.inputs, &p.outputs, &p.states, &p.seeds, &p.inputGrads, &p.stateGrads, &p.stateSeeds})
    for (const PortIR &port : *ports)
      if (port.buffer >= 0) u.pinned.insert(port.buffer);
  if (p.lossBuffer >= 0) u.pinned.insert(p.lossBuffer);
  for (const StageIR &s : p.stages)
    for (int b : s.scan.states) u.pinned.insert(b);
  return u;
}

int countOf(const std::map<int, int> &uses, int b) {
  auto it = uses.find(b);
  return it == uses.end() ? 0 : it->second;
}

/// The store of buffer `b` in kernel `k`: (sweep, instr), or (-1, -1).
std::pair<int, int> storeOf(const KernelIR &k, int b) {
  for (size_t s = 0; s < k.sweeps.size(); ++s)
    for (size_t j = 0; j < k.sweeps[s].body.size(); ++j)
      if (k.sweeps[s].body[j].store == b) return {static_cast<int>(s), static_cast<int>(j)};
  return {-1, -1};
}

/// Sweep `s` of `k` if it is one concat whose pieces can all be stored in place;
/// `u` then counts the stores moved and the copy's reads gone.
bool storesInPlace(const Program &p, Uses &u, KernelIR &k, size_t s) {
  const Sweep &sweep = k.sweeps[s];
  if (sweep.kind != Sweep::Kind::Map || sweep.body.size() != 1) return false;
  const Instr &concat = sweep.body.front();
  const int to = concat.store;
  if (concat.op != Op::Concat || to < 0 || countOf(u.reads, to) == 0) return false;
  // Nothing in the kernel reads the concat's buffer or memory it shares.
  bool clash = false;
  forEachSweep(k, [&](const Sweep &other) {
    for (const Instr &in : other.body)
      for (const Operand &o : in.args)
        if (o.kind == Operand::Kind::Load && sameMemory(p, o.buffer, to)) clash = true;
  });
  if (clash || countOf(u.stores, to) != 1) return false;
  std::vector<std::pair<int, int>> stores;
  for (size_t a = 0; a < concat.args.size(); ++a) {
    const Operand &o = concat.args[a];
    if (o.kind != Operand::Kind::Load || o.scalar || o.delay != 0 || o.shift != 0) return false;
    const int piece = o.buffer;
    if (piece == to || u.pinned.count(piece) || countOf(u.reads, piece) != 1 || countOf(u.stores, piece) != 1) return false;
    const auto [at, j] = storeOf(k, piece);
    if (at < 0 || static_cast<size_t>(at) >= s || k.sweeps[at].kind != Sweep::Kind::Map ||
        k.sweeps[at].width != concat.pieces[a] || k.sweeps[at].body[j].storeShift != 0)
      return false;
    stores.push_back({at, j});
  }
  int64_t start = 0;
  for (size_t a = 0; a < stores.size(); ++a) {
    Instr &store = k.sweeps[stores[a].first].body[stores[a].second];
    --u.stores[store.store];
    --u.reads[store.store];
    store.store = to;
    store.storeShift = start;
    start += concat.pieces[a];
  }
  u.stores[to] += static_cast<int>(stores.size()) - 1;
  k.sweeps.erase(k.sweeps.begin() + static_cast<std::ptrdiff_t>(s));
  return true;
}

} // namespace

int storeConcatPiecesInPlace(Program &p) {
  std::set<int> parallel; // kernels of loops run in parallel over time
  for (const StageIR &s : p.stages)
    if (s.scan.plan != LoopPlan::Sequential) parallel.insert(s.kernels.begin(), s.kernels.end());
  Uses uses = usesOf(p);
  int removed = 0;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    KernelIR &kernel = p.kernels[k];
    if (kernel.kind != KernelIR::Kind::Fused || parallel.count(static_cast<int>(k)) || !kernel.stopped.empty()) continue;
    for (size_t s = kernel.sweeps.size(); s-- > 1;)
      if (storesInPlace(p, uses, kernel, s)) ++removed;
  }
  return removed;
}

} // namespace rnnc::codegen
