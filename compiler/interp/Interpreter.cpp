// 1. Components in dataflow order (strongly connected, producers first).
// 2. A recurrent component runs step by step in its direction, its nodes in
//    delay-0 order at each step; any other node runs over all steps.
// 3. A read of step s outside [0, T) is the state (s < 0, when given) or 0.
// 4. Accumulations (param gradients) sum over every step and sequence.
// 5. A state's adjoint evaluated at the steps before the first is the
//    gradient of the initial state.
// 6. A dropped param (DropConnect) is made once, before the steps, from its
//    param and mask; its gradient reaches the param through the same mask.
#include "interp/Interpreter.h"

#include "analysis/TimeClasses.h"
#include "ir/Order.h"
#include "ir/Pointwise.h"
#include "ir/Scalar.h"
#include "support/Crash.h"

#include <algorithm>
#include <cmath>

namespace rnnc {

namespace {

/// Values held per step and sequence: an index is one integer, whatever its range.
int64_t stored(const Node &n) { return n.isIndex ? 1 : n.width; }

class Interpreter {
public:
  Interpreter(const Graph &g, const InterpInputs &in) : g_(g), in_(in), T_(in.T), B_(in.B) {
    const unsigned long long key = scalar::mask_key(in.seed, in.call);
    rng_[0] = static_cast<unsigned>(key);
    rng_[1] = static_cast<unsigned>(key >> 32);
    rng_[2] = in.train ? 1 : 0;
    double valid = 0;
    for (int64_t b = 0; b < B_; ++b) valid += static_cast<double>(length(b));
    lossWeight_ = static_cast<double>(T_ * B_) / valid;
    for (const DroppedParam &d : g.dropped) {
      const std::vector<double> &W = in.params.at(d.of);
      std::vector<double> &D = dropped_[d.name];
      D.resize(W.size());
      for (size_t j = 0; j < W.size(); ++j) D[j] = rounded(W[j] * dropFactor(d, j));
    }
  }

  InterpResult run();

private:
  double read(const Edge &e, int64_t t, int64_t b, int64_t i) const;
  /// Element i of input `k` of node n at (t, b), a scalar input broadcast.
  double arg(const Node &n, size_t k, int64_t t, int64_t b, int64_t i) const {
    return read(n.inputs[k], t, b, stored(g_.node(n.inputs[k].src)) == 1 ? 0 : i);
  }
  void evalStep(NodeId id, int64_t t, int64_t b, double *out) const;
  void evalAccumulate(NodeId id);
  void evalAllSteps(NodeId id);
  /// A param's values: the caller's, or a dropped one's as made for this call.
  const std::vector<double> &param(const std::string &name) const {
    auto it = dropped_.find(name);
    return it != dropped_.end() ? it->second : in_.params.at(name);
  }
  /// The factor element j of a dropped param takes: 1 / keep or 0 in
  /// training, 1 in evaluation (rounded as the float32 engines round it).
  double dropFactor(const DroppedParam &d, size_t j) const {
    const unsigned draw = scalar::keep_draw(rng_, static_cast<unsigned>(d.site), ~0u, ~0u, static_cast<unsigned>(j));
    return scalar::keep_value(rng_, draw, scalar::keep_threshold(d.keep), rounded(1 / d.keep), 1.0);
  }
  double rounded(double v) const { return in_.f32 ? static_cast<float>(v) : v; }

  const Graph &g_;
  const InterpInputs &in_;
  int64_t T_, B_;
  int64_t length(int64_t b) const { return in_.lengths.empty() ? T_ : in_.lengths[static_cast<size_t>(b)]; }

  unsigned rng_[3]; // the masks' key and mode, as the generated code keeps them
  double lossWeight_ = 1; // T·B / Σ lengths
  std::vector<std::vector<double>> values_;     // per node: [T][B][w], or [w] for accumulations
  std::map<NodeId, std::pair<int64_t, const std::vector<double> *>> states_; // node -> (k, [k][B][w])
  std::map<std::string, std::vector<double>> dropped_; // dropped params, by name
};

double Interpreter::read(const Edge &e, int64_t t, int64_t b, int64_t i) const {
  const Node &n = g_.node(e.src);
  int64_t s = t - e.delay;
  if (s >= 0 && s < T_) return values_[e.src][(s * B_ + b) * stored(n) + i];
  if (s < 0) {
    auto it = states_.find(e.src);
    if (it != states_.end() && s >= -it->second.first)
      return (*it->second.second)[((s + it->second.first) * B_ + b) * stored(n) + i];
  }
  return 0;
}

void Interpreter::evalStep(NodeId id, int64_t t, int64_t b, double *out) const {
  const Node &n = g_.node(id);
  const int64_t w = stored(n);
  auto each = [&](auto f) {
    for (int64_t i = 0; i < w; ++i) out[i] = f(i);
  };
  auto x = [&](size_t k, int64_t i) { return arg(n, k, t, b, i); };
  auto width = [&](size_t k) { return g_.node(n.inputs[k].src).width; };
  switch (n.op) {
  case Op::Input: {
    bool seed = n.backward;
    const std::string key = seed ? n.name.substr(5) : n.name; // "grad.y" -> "y"
    if (seed && key == "loss") {
      out[0] = 1.0 / static_cast<double>(T_ * B_);
      return;
    }
    if (seed && key.rfind("final.", 0) == 0) { // a state's final value: zero but at its last steps
      auto it = in_.finalSeeds.find(key.substr(6));
      const int64_t rows = it == in_.finalSeeds.end() ? 0 : static_cast<int64_t>(it->second.size()) / (B_ * w);
      const int64_t row = t - (T_ - rows);
      each([&](int64_t i) { return row >= 0 && row < rows ? it->second[(row * B_ + b) * w + i] : 0.0; });
      return;
    }
    const auto &src = seed ? in_.seeds.at(key) : in_.inputs.at(key);
    each([&](int64_t i) { return src[(t * B_ + b) * w + i]; });
    return;
  }
  case Op::Param: {
    const auto &p = param(n.params[0]);
    each([&](int64_t i) { return p[i]; });
    return;
  }
  case Op::Const: out[0] = n.value; return;
  case Op::Keep: {
    const unsigned threshold = scalar::keep_threshold(n.value);
    const double kept = n.inverted ? 1 / n.value : 1, expected = n.inverted ? 1 : n.value;
    const unsigned step = n.perSequence ? ~0u : static_cast<unsigned>(t);
    each([&](int64_t i) {
      return scalar::keep_mask(rng_, static_cast<unsigned>(n.offset), step, static_cast<unsigned>(b),
                               static_cast<unsigned>(i), threshold, kept, expected);
    });
    return;
  }
  case Op::Active: out[0] = t < length(b) ? (n.weighted ? lossWeight_ : 1.0) : 0.0; return;
  case Op::Add:
    each([&](int64_t i) {
      double s = 0;
      for (size_t k = 0; k < n.inputs.size(); ++k) s += x(k, i);
      return s;
    });
    return;
  case Op::Mul:
    each([&](int64_t i) {
      double p = 1;
      for (size_t k = 0; k < n.inputs.size(); ++k) p *= x(k, i);
      return p;
    });
    return;
  case Op::Sub: each([&](int64_t i) { return x(0, i) - x(1, i); }); return;
  case Op::Div: each([&](int64_t i) { return x(0, i) / x(1, i); }); return;
  case Op::Neg: each([&](int64_t i) { return -x(0, i); }); return;
#include "ir/TableOpCases.def"
  {
    const PointwiseRule &rule = *pointwiseRule(n.op);
    each([&](int64_t i) {
      const double args[2] = {x(0, i), rule.arity > 1 ? x(1, i) : 0.0};
      return rule.value(args);
    });
    return;
  }
  case Op::Sum:
  case Op::Mean: {
    double s = 0;
    for (int64_t i = 0; i < width(0); ++i) s += x(0, i);
    out[0] = n.op == Op::Sum ? s : s / static_cast<double>(width(0));
    return;
  }
  case Op::CrossEntropy:
  case Op::SoftmaxMinusOneHot: {
    int64_t v = width(0);
    double top = -INFINITY;
    for (int64_t i = 0; i < v; ++i) top = std::max(top, x(0, i));
    double z = 0;
    for (int64_t i = 0; i < v; ++i) z += std::exp(x(0, i) - top);
    auto target = static_cast<int64_t>(read(n.inputs[1], t, b, 0));
    if (n.op == Op::CrossEntropy) out[0] = top + std::log(z) - x(0, target);
    else each([&](int64_t i) { return std::exp(x(0, i) - top) / z - (i == target ? 1.0 : 0.0); });
    return;
  }
  case Op::Mse: {
    double s = 0;
    for (int64_t i = 0; i < width(0); ++i) s += (x(0, i) - x(1, i)) * (x(0, i) - x(1, i));
    out[0] = s / static_cast<double>(width(0));
    return;
  }
  case Op::MatMul: {
    int64_t row = 0, cols = width(0);
    for (const std::string &name : n.params) {
      const auto &W = param(name);
      int64_t rows = g_.param(name)->shape[0];
      for (int64_t r = 0; r < rows; ++r, ++row) {
        double s = 0;
        for (int64_t c = 0; c < cols; ++c) s += W[r * cols + c] * x(0, c);
        out[row] = s;
      }
    }
    return;
  }
  case Op::MatMulT: {
    const auto &W = param(n.params[0]);
    int64_t rows = width(0);
    each([&](int64_t c) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += W[r * w + c] * x(0, r);
      return s;
    });
    return;
  }
  case Op::Slice: each([&](int64_t i) { return x(0, n.offset + i); }); return;
  case Op::Pad:
    each([&](int64_t i) { return i >= n.offset && i < n.offset + width(0) ? x(0, i - n.offset) : 0.0; });
    return;
  case Op::Broadcast: each([&](int64_t) { return x(0, 0); }); return;
  case Op::Concat: {
    int64_t o = 0;
    for (size_t k = 0; k < n.inputs.size(); ++k)
      for (int64_t i = 0; i < width(k); ++i) out[o++] = x(k, i);
    return;
  }
  case Op::Embed: {
    const auto &table = param(n.params[0]);
    auto row = static_cast<int64_t>(read(n.inputs[0], t, b, 0));
    each([&](int64_t i) { return table[row * w + i]; });
    return;
  }
  case Op::GradMatrix:
  case Op::GradVector:
  case Op::GradEmbed: break;
  }
  RNNC_UNREACHABLE(std::string("the interpreter cannot evaluate ") + opMnemonic(n.op) + " per step");
}

void Interpreter::evalAccumulate(NodeId id) {
  const Node &n = g_.node(id);
  std::vector<double> &out = values_[id];
  out.assign(n.width, 0.0);
  int64_t dw = g_.node(n.inputs[0].src).width;
  for (int64_t t = 0; t < T_; ++t)
    for (int64_t b = 0; b < B_; ++b) {
      if (n.op == Op::GradMatrix) {
        int64_t cols = g_.node(n.inputs[1].src).width;
        for (int64_t r = 0; r < dw; ++r) {
          double d = read(n.inputs[0], t, b, r);
          for (int64_t c = 0; c < cols; ++c) out[r * cols + c] += d * read(n.inputs[1], t, b, c);
        }
      } else if (n.op == Op::GradVector) {
        for (int64_t i = 0; i < dw; ++i) out[n.width == 1 ? 0 : i] += read(n.inputs[0], t, b, i);
      } else {
        auto row = static_cast<int64_t>(read(n.inputs[1], t, b, 0));
        for (int64_t i = 0; i < dw; ++i) out[row * dw + i] += read(n.inputs[0], t, b, i);
      }
    }
  if (in_.f32)
    for (double &v : out) v = static_cast<float>(v);
}

void Interpreter::evalAllSteps(NodeId id) {
  for (int64_t t = 0; t < T_; ++t)
    for (int64_t b = 0; b < B_; ++b) {
      double *out = &values_[id][(t * B_ + b) * stored(g_.node(id))];
      evalStep(id, t, b, out);
      if (in_.f32 && !g_.node(id).isIndex)
        for (int64_t i = 0; i < g_.node(id).width; ++i) out[i] = static_cast<float>(out[i]);
    }
}

InterpResult Interpreter::run() {
  values_.assign(g_.nodes.size(), {});
  for (NodeId id = 0; id < g_.nodes.size(); ++id)
    if (!g_.node(id).dead && opKind(g_.node(id).op) != OpKind::Accumulate)
      values_[id].assign(static_cast<size_t>(T_ * B_ * stored(g_.node(id))), 0.0);
  auto depths = stateDepths(g_);
  for (const auto &[name, id] : g_.states())
    if (auto it = in_.states.find(name); it != in_.states.end()) states_[id] = {depths.at(name), &it->second};

  // 1-4. Components in dataflow order.
  TimeClasses time = classifyTime(g_);
  std::vector<NodeId> order = postOrder(g_, [](NodeId, const Edge &e) { return e.delay == 0; });
  for (const auto &scc : stronglyConnected(g_, [](Edge) { return true; })) {
    int loop = time.loopOf[scc[0]];
    if (loop < 0) {
      NodeId id = scc[0];
      if (opKind(g_.node(id).op) == OpKind::Accumulate) evalAccumulate(id);
      else evalAllSteps(id);
      continue;
    }
    std::vector<NodeId> members;
    for (NodeId id : order)
      if (time.loopOf[id] == loop) members.push_back(id);
    int direction = time.loops[loop].direction;
    for (int64_t k = 0; k < T_; ++k) {
      int64_t t = direction > 0 ? k : T_ - 1 - k;
      for (NodeId id : members)
        for (int64_t b = 0; b < B_; ++b) {
          double *out = &values_[id][(t * B_ + b) * stored(g_.node(id))];
          evalStep(id, t, b, out);
          if (in_.f32 && !g_.node(id).isIndex)
            for (int64_t i = 0; i < g_.node(id).width; ++i) out[i] = static_cast<float>(out[i]);
        }
    }
  }

  InterpResult r;
  auto perStep = [&](const Edge &e) {
    int64_t w = stored(g_.node(e.src));
    std::vector<double> v(static_cast<size_t>(T_ * B_ * w));
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t b = 0; b < B_; ++b)
        for (int64_t i = 0; i < w; ++i) v[(t * B_ + b) * w + i] = read(e, t, b, i);
    return v;
  };
  for (const GraphPort &o : g_.outputs) r.outputs[o.name] = perStep(o.value);
  if (g_.loss) {
    double s = 0;
    for (double v : values_[*g_.loss]) s += v;
    r.loss = s / static_cast<double>(T_ * B_);
  }
  for (const auto &[name, id] : g_.states()) {
    int64_t k = depths.at(name), w = stored(g_.node(id));
    std::vector<double> v(static_cast<size_t>(k * B_ * w));
    for (int64_t s = 0; s < k; ++s)
      for (int64_t b = 0; b < B_; ++b)
        for (int64_t i = 0; i < w; ++i) v[(s * B_ + b) * w + i] = read(Edge(id), T_ - k + s, b, i);
    r.finalStates[name] = std::move(v);
  }
  for (const auto &[name, id] : g_.grads.params) {
    auto &sum = r.paramGrads[name];
    if (sum.empty()) sum.assign(values_[id].size(), 0.0);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += values_[id][i];
  }
  for (const DroppedParam &d : g_.dropped) { // through the mask to the param
    auto it = r.paramGrads.find(d.name);
    if (it == r.paramGrads.end()) continue;
    auto &sum = r.paramGrads[d.of];
    if (sum.empty()) sum.assign(it->second.size(), 0.0);
    for (size_t j = 0; j < sum.size(); ++j) sum[j] = rounded(sum[j] + rounded(it->second[j] * dropFactor(d, j)));
    r.paramGrads.erase(d.name);
  }
  for (const GraphPort &p : g_.grads.inputs) r.inputGrads[p.name] = perStep(p.value);
  // 5. Initial-state gradients: the adjoint (a sum) at steps -k .. -1.
  for (const auto &[name, id] : g_.grads.states) {
    int64_t k = depths.at(name), w = g_.node(id).width;
    std::vector<double> v(static_cast<size_t>(k * B_ * w));
    for (int64_t s = 0; s < k; ++s)
      for (int64_t b = 0; b < B_; ++b) evalStep(id, s - k, b, &v[(s * B_ + b) * w]);
    r.stateGrads[name] = std::move(v);
  }
  return r;
}

} // namespace

InterpResult interpret(const Graph &g, const InterpInputs &in) { return Interpreter(g, in).run(); }

double interpreterBytes(const Graph &g, int64_t T, int64_t B) {
  double bytes = 0;
  for (NodeId id = 0; id < g.nodes.size(); ++id)
    if (!g.node(id).dead && opKind(g.node(id).op) != OpKind::Accumulate)
      bytes += 8.0 * static_cast<double>(T) * static_cast<double>(B) * static_cast<double>(stored(g.node(id)));
  return bytes;
}

} // namespace rnnc
