#include "analysis/Recurrence.h"

#include "ir/Order.h"
#include "support/Crash.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

namespace rnnc {

namespace {

// The algorithm, per loop:
//   1. The state reads are the distinct (node, delay) pairs of delayed edges
//      whose source and reader are both in the loop; the states are their nodes.
//   2. In a topological order of the loop's delay-0 edges, each node gets an
//      abstract value: its StateDependence (the lattice of `transferOf`) and,
//      for its Jacobian, either "dense" or a list of segments "elements
//      [lo, hi) depend on element i + shift of state read r". An edge from
//      outside the loop is state-free; a delayed edge inside it is a state read
//      (affine, identity segment).
//   3. The loop's kind is the join over its states' values.
//   4. The Jacobian: any dense state value makes it dense. Otherwise the state
//      elements (each state at lags 1..its largest delay, the companion form of
//      a multi-step recurrence) are joined by union-find along every segment
//      and every lag shift; groups of one element are a diagonal, groups of at
//      most kMaxBlock elements blocks of diagonals, anything larger is dense.
//      (When each state reads only its own elements one step back, it is
//      diagonal at once, at any width; past kMaxElements the walk gives up: dense.)

constexpr int64_t kMaxBlock = 16;           // the largest group still called block-diagonal
constexpr size_t kMaxSegments = 64;         // per value; more is treated as dense
constexpr int64_t kMaxElements = 1 << 20;   // state elements the union-find walks; more is dense

/// How an op combines the dependence of its inputs on the state.
enum class Combine : uint8_t {
  Linear,    // a linear map of its inputs: the join (add, sub, neg, layout, sum, mean, param @ v)
  Product,   // affine only while at most one factor reads the state
  Quotient,  // affine only while the divisor is state-free
  Nonlinear  // nonlinear as soon as an input reads the state
};

/// How an op moves elements, for the Jacobian.
enum class Mixing : uint8_t {
  Elementwise, // element i of the result reads element i of each input (scalars broadcast)
  Moves,       // slice, concat, pad: elements move by an offset
  AllToAll     // every result element may read every input element
};

struct Transfer {
  Combine combine;
  Mixing mixing;
};

/// Every op once (no default: a new Own op must decide here; the table's ops
/// are nonlinear elementwise functions).
Transfer transferOf(Op op) {
  switch (op) {
  case Op::Input:
  case Op::Param:
  case Op::Const:
  case Op::Keep:
  case Op::Active: return {Combine::Linear, Mixing::Elementwise}; // leaves and masks: never in a loop
  case Op::Add:
  case Op::Sub:
  case Op::Neg: return {Combine::Linear, Mixing::Elementwise};
  case Op::Mul: return {Combine::Product, Mixing::Elementwise};
  case Op::Div: return {Combine::Quotient, Mixing::Elementwise};
#include "ir/TableOpCases.def"
    return {Combine::Nonlinear, Mixing::Elementwise}; // the table's functions
  case Op::Sum:
  case Op::Mean: return {Combine::Linear, Mixing::AllToAll};
  case Op::CrossEntropy:
  case Op::Mse: return {Combine::Nonlinear, Mixing::AllToAll};
  case Op::MatMul:
  case Op::MatMulT: return {Combine::Linear, Mixing::AllToAll};
  case Op::Slice:
  case Op::Concat:
  case Op::Pad: return {Combine::Linear, Mixing::Moves};
  case Op::Broadcast: return {Combine::Linear, Mixing::AllToAll};
  case Op::Embed:
  case Op::SoftmaxMinusOneHot:
  case Op::GradMatrix:
  case Op::GradVector:
  case Op::GradEmbed: return {Combine::Nonlinear, Mixing::AllToAll};
  }
  RNNC_UNREACHABLE("unknown op");
}

/// Elements [lo, hi) of a value depend on element i + shift of state read `read`.
struct Segment {
  int64_t lo, hi, shift;
  size_t read;
};

struct Value {
  StateDependence dep = StateDependence::Free;
  bool dense = false;
  std::vector<Segment> segments;
  bool free() const { return dep == StateDependence::Free; }
};

StateDependence join(StateDependence a, StateDependence b) { return std::max(a, b); }

struct StateRead {
  NodeId node;
  int32_t lag; // |delay|
  friend bool operator<(StateRead a, StateRead b) { return std::pair(a.node, a.lag) < std::pair(b.node, b.lag); }
};

class LoopClassifier {
public:
  LoopClassifier(const Graph &g, const TimeClasses &time, int loop) : g_(g), time_(time), loop_(loop) {}

  /// Step 2 for one node, its inputs done.
  void visit(NodeId id) {
    const Node &n = g_.node(id);
    Transfer t = transferOf(n.op);
    std::vector<Value> ins;
    ins.reserve(n.inputs.size());
    for (const Edge &e : n.inputs) ins.push_back(inputValue(e));
    Value &out = values_[id];
    out.dep = combine(t.combine, ins);
    for (size_t k = 0; k < ins.size(); ++k) {
      const Value &in = ins[k];
      if (in.free()) continue;
      int64_t inWidth = g_.node(n.inputs[k].src).width;
      if (in.dense) {
        out.dense = true;
        continue;
      }
      if (t.mixing == Mixing::Moves) {
        moveSegments(n, k, in, out);
      } else if (inWidth == n.width && (t.mixing == Mixing::Elementwise || n.width == 1)) {
        out.segments.insert(out.segments.end(), in.segments.begin(), in.segments.end());
      } else {
        out.dense = true; // a broadcast scalar, a reduction, a product with a matrix
      }
    }
    merge(out.segments);
    if (out.segments.size() > kMaxSegments) out.dense = true;
    if (out.dense) out.segments.clear();
  }

  /// Steps 1, 3 and 4, once every node of the loop is visited.
  RecurrenceClass finish() const {
    RecurrenceClass r;
    r.loop = loop_;
    std::map<NodeId, int32_t> maxLag;
    for (const StateRead &s : reads_) maxLag[s.node] = std::max(maxLag[s.node], s.lag);
    for (const auto &state : maxLag) r.states.push_back(state.first);
    r.kind = StateDependence::Free;
    bool dense = false;
    for (NodeId s : r.states) {
      const Value &v = valueOf(s);
      r.kind = join(r.kind, v.dep);
      dense |= v.dense;
    }
    // A loop reads its state by definition; a state-free one would be a bug upstream.
    r.kind = join(r.kind, StateDependence::Affine);
    r.blockSize = dense ? 0 : largestGroup(maxLag);
    r.jacobian = r.blockSize == 1                          ? JacobianShape::Diagonal
                 : r.blockSize >= 1 && r.blockSize <= kMaxBlock ? JacobianShape::BlockDiagonal
                                                                 : JacobianShape::Dense;
    if (r.jacobian == JacobianShape::Dense) r.blockSize = 0;
    return r;
  }

private:
  Value inputValue(const Edge &e) {
    if (time_.loopOf[e.src] != loop_) return {}; // from outside the loop: state-free
    if (e.delay == 0) return valueOf(e.src);
    Value v;
    v.dep = StateDependence::Affine;
    v.segments.push_back({0, g_.node(e.src).width, 0, readIndex({e.src, std::abs(e.delay)})});
    return v;
  }

  /// A node's value; one never visited (dead: a broken graph being checked) is unknown.
  const Value &valueOf(NodeId id) const {
    static const Value unknown{StateDependence::Nonlinear, true, {}};
    auto it = values_.find(id);
    return it == values_.end() ? unknown : it->second;
  }

  size_t readIndex(StateRead s) {
    auto it = std::find_if(reads_.begin(), reads_.end(), [&](StateRead r) { return !(r < s) && !(s < r); });
    if (it != reads_.end()) return static_cast<size_t>(it - reads_.begin());
    reads_.push_back(s);
    return reads_.size() - 1;
  }

  static StateDependence combine(Combine c, const std::vector<Value> &ins) {
    StateDependence all = StateDependence::Free;
    int reading = 0;
    for (const Value &v : ins) {
      all = join(all, v.dep);
      reading += !v.free();
    }
    switch (c) {
    case Combine::Linear: return all;
    case Combine::Product: return reading > 1 ? StateDependence::Nonlinear : all;
    case Combine::Quotient: return ins.size() > 1 && !ins[1].free() ? StateDependence::Nonlinear : all;
    case Combine::Nonlinear: return all == StateDependence::Free ? all : StateDependence::Nonlinear;
    }
    RNNC_UNREACHABLE("unknown combine");
  }

  /// One segment for each run of elements reading one state read at one shift
  /// (`h[t-1] * h[t-1]` reads h once per element, not twice).
  static void merge(std::vector<Segment> &segments) {
    auto key = [](const Segment &a) { return std::tuple(a.read, a.shift, a.lo, a.hi); };
    std::sort(segments.begin(), segments.end(), [&](const Segment &a, const Segment &b) { return key(a) < key(b); });
    std::vector<Segment> out;
    for (const Segment &s : segments) {
      if (!out.empty() && out.back().read == s.read && out.back().shift == s.shift && s.lo <= out.back().hi)
        out.back().hi = std::max(out.back().hi, s.hi);
      else
        out.push_back(s);
    }
    segments = std::move(out);
  }

  /// Slice, concat and pad: input k's segments at their new positions.
  void moveSegments(const Node &n, size_t k, const Value &in, Value &out) const {
    if (n.op == Op::Slice) {
      int64_t lo = n.offset, hi = n.offset + n.width;
      for (const Segment &s : in.segments) {
        int64_t a = std::max(s.lo, lo), b = std::min(s.hi, hi);
        if (a < b) out.segments.push_back({a - lo, b - lo, s.shift + lo, s.read});
      }
      return;
    }
    int64_t pos = n.offset; // pad: the input placed at offset
    if (n.op == Op::Concat) {
      pos = 0;
      for (size_t j = 0; j < k; ++j) pos += g_.node(n.inputs[j].src).width;
    }
    for (const Segment &s : in.segments) out.segments.push_back({s.lo + pos, s.hi + pos, s.shift - pos, s.read});
  }

  /// Step 4: the largest group of state elements joined by the segments of the
  /// states' values and by the lag shifts (0 when there are too many elements).
  int64_t largestGroup(const std::map<NodeId, int32_t> &maxLag) const {
    // Each state reading only its own elements one step back: diagonal, at any width.
    bool ownElements = true;
    for (auto [node, lag] : maxLag) {
      ownElements &= lag == 1;
      for (const Segment &s : valueOf(node).segments) ownElements &= reads_[s.read].node == node && s.shift == 0;
    }
    if (ownElements) return maxLag.empty() ? 0 : 1;
    std::map<NodeId, int64_t> base; // first element of (state, lag 1); lag l at base + (l-1)·width
    int64_t total = 0;
    for (auto [node, lag] : maxLag) {
      base[node] = total;
      total += static_cast<int64_t>(lag) * g_.node(node).width;
      if (total > kMaxElements) return 0;
    }
    std::vector<int64_t> parent(static_cast<size_t>(total));
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int64_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    auto unite = [&](int64_t a, int64_t b) { parent[find(a)] = find(b); };
    for (auto [node, lag] : maxLag) {
      int64_t w = g_.node(node).width;
      for (int32_t l = 1; l < lag; ++l)
        for (int64_t i = 0; i < w; ++i) unite(base[node] + (l - 1) * w + i, base[node] + l * w + i);
      for (const Segment &s : valueOf(node).segments) {
        const StateRead &r = reads_[s.read];
        int64_t rw = g_.node(r.node).width;
        int64_t from = base[r.node] + static_cast<int64_t>(r.lag - 1) * rw;
        for (int64_t i = s.lo; i < s.hi; ++i) {
          if (i < 0 || i >= w || i + s.shift < 0 || i + s.shift >= rw) return 0; // out of range: assume dense
          unite(base[node] + i, from + i + s.shift);
        }
      }
    }
    std::vector<int64_t> size(static_cast<size_t>(total), 0);
    int64_t largest = total > 0 ? 1 : 0;
    for (int64_t x = 0; x < total; ++x) largest = std::max(largest, ++size[find(x)]);
    return largest;
  }

  const Graph &g_;
  const TimeClasses &time_;
  int loop_;
  std::map<NodeId, Value> values_;
  std::vector<StateRead> reads_;
};

} // namespace

TimeParallelPlan RecurrenceClass::plan() const {
  if (jacobian == JacobianShape::Dense) return TimeParallelPlan::Sequential;
  return kind == StateDependence::Affine ? TimeParallelPlan::Scan : TimeParallelPlan::Newton;
}

std::vector<RecurrenceClass> classifyRecurrences(const Graph &g, const TimeClasses &time) {
  RNNC_ASSERT(time.loopOf.size() == g.nodes.size(), "time classes of another graph");
  std::vector<LoopClassifier> loops;
  for (size_t l = 0; l < time.loops.size(); ++l) loops.emplace_back(g, time, static_cast<int>(l));
  // Delay-0 edges form a DAG: one topological order serves every loop.
  std::vector<NodeId> order = postOrder(g, [](NodeId, const Edge &e) { return e.delay == 0; });
  for (NodeId id : order)
    if (time.recurrent(id)) loops[time.loopOf[id]].visit(id);
  std::vector<RecurrenceClass> out;
  for (const LoopClassifier &l : loops) out.push_back(l.finish());
  return out;
}

const char *planName(TimeParallelPlan plan) {
  switch (plan) {
  case TimeParallelPlan::Scan: return "scan";
  case TimeParallelPlan::Newton: return "newton";
  case TimeParallelPlan::Sequential: return "sequential";
  }
  RNNC_UNREACHABLE("unknown plan");
}

std::string recurrenceSummary(const Graph &g, const RecurrenceClass &r) {
  std::string states;
  for (NodeId s : r.states) {
    const Node &n = g.node(s);
    states += (states.empty() ? "" : ", ") + (n.name.empty() ? fmt::format("%{}", s) : n.name);
  }
  std::string jacobian = r.jacobian == JacobianShape::Diagonal ? "diagonal"
                         : r.jacobian == JacobianShape::BlockDiagonal
                             ? fmt::format("block-diagonal (blocks of {})", r.blockSize)
                             : "dense";
  TimeParallelPlan plan = r.plan();
  return fmt::format("{} in {}, {} Jacobian -> {}", r.kind == StateDependence::Affine ? "affine" : "nonlinear",
                     states, jacobian,
                     plan == TimeParallelPlan::Sequential ? std::string("sequential")
                                                          : fmt::format("{} candidate", planName(plan)));
}

} // namespace rnnc
