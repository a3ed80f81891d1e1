// Lowering, in steps:
// 1. The root's ports become Input nodes.
// 2. Each cell (the root, then each instance as it is met) is lowered
//    statement by statement: params are added to the graph's table with the
//    instance prefix; an expression becomes nodes; a name becomes an edge (the
//    delay of `h[t-1]` is 1, of `h[t+1]` is -1, and delays add up through
//    instance ports). A read of a name defined further down goes to a
//    placeholder node, resolved when the cell is done.
// 3. Placeholders are replaced by what they stand for, everywhere.
// 4. Checks: no cycle of delay-0 edges (an algebraic loop); every param used.
#include "frontend/Lower.h"

#include "frontend/Builtins.h"
#include "analysis/TimeClasses.h"
#include "frontend/Names.h"
#include "frontend/SizeExpr.h"
#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "support/Crash.h"

#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc {

namespace {

class Lowering {
public:
  Lowering(Graph &g, DiagnosticEngine &diags) : g_(g), b_(g), diags_(diags) {}

  /// Lowers one walked cell with its ports bound; returns its outputs.
  std::vector<Edge> cell(const ElaboratedInstance &inst, const std::vector<Edge> &ports);
  /// Step 3: every placeholder replaced by its value. False after an error.
  bool resolvePlaceholders();
  /// The root's `loss`, once lowered (placeholders resolved).
  std::optional<Edge> loss() const { return loss_; }

private:
  struct Scope {
    const ElaboratedInstance &inst;
    std::map<std::string, Edge> values;       // ports and names defined so far
    std::map<std::string, NodeId> forward;    // placeholders of names not yet defined
    std::map<std::string, NodeId> paramReads; // vector params read as values
    std::set<std::string> params;             // declared param names (short)
  };

  Edge expr(Scope &s, const Expr &e);
  Edge name(Scope &s, const NameExpr &n);
  Edge call(Scope &s, const CallExpr &c);
  /// dropout(x, p) as x * keep (kept with 1 - p, inverted); zoneout(new, old, p)
  /// as keep * new + (1 - keep) * old (kept with 1 - p). p = 0 is the identity.
  Edge mask(Scope &s, const CallExpr &c, BuiltinKind kind);
  /// The param a product reads for `W` or `dropout(W, p)` left of '@': W, or
  /// a new dropped param (its own mask site) unless p = 0.
  std::string productParam(Scope &s, const Expr &lhs);
  void define(Scope &s, const Ident &target, Edge value);
  std::vector<int64_t> shape(const Scope &s, const ParamDecl &p);

  Graph &g_;
  GraphBuilder b_;
  DiagnosticEngine &diags_;
  std::map<NodeId, Edge> placeholderValue_; // placeholder -> what it stands for
  std::map<NodeId, SourceRange> placeholderDecl_;
  std::map<NodeId, std::string> placeholderName_; // the name it stands for, full
  std::optional<Edge> loss_;
  int64_t masks_ = 0; // keep ops made: the next one's site is masks_ + 1
};

std::vector<int64_t> Lowering::shape(const Scope &s, const ParamDecl &p) {
  DimScope scope;
  scope.dims = s.inst.dims;
  std::vector<int64_t> out;
  for (const auto &e : p.shape) {
    SizeValue v = evalSize(*e, scope, diags_, "a param's size");
    RNNC_ASSERT(v.value.has_value(), "a param's size is unknown after Sema");
    out.push_back(*v.value);
  }
  return out;
}

std::vector<Edge> Lowering::cell(const ElaboratedInstance &inst, const std::vector<Edge> &ports) {
  const CellDecl &decl = *inst.cell;
  Scope s{inst, {}, {}, {}, {}};
  for (size_t i = 0; i < decl.ports.size(); ++i) s.values[decl.ports[i].name.name] = ports[i];
  for (const auto &st : decl.body) {
    if (st->kind == StmtKind::Param) {
      const auto &p = static_cast<const ParamDecl &>(*st);
      std::vector<int64_t> sh = shape(s, p);
      for (const auto &n : p.names) {
        b_.addParam(inst.prefix + n.name, sh, n.range);
        s.params.insert(n.name);
      }
      continue;
    }
    const auto &a = static_cast<const AssignStmt &>(*st);
    const Expr &rhs = *a.value;
    if (auto child = inst.children.find(&a); child != inst.children.end()) {
      const auto &c = as<CallExpr>(rhs);
      std::vector<Edge> args;
      for (const auto &arg : c.args) args.push_back(expr(s, *arg));
      std::vector<Edge> outs = cell(*child->second, args);
      for (size_t k = 0; k < a.targets.size(); ++k) define(s, a.targets[k], outs[k]);
      continue;
    }
    if (rhs.kind == ExprKind::Call && as<CallExpr>(rhs).callee.name == "split") {
      const auto &c = as<CallExpr>(rhs);
      Edge v = expr(s, *c.args[0]);
      int64_t part = g_.node(v.src).width / static_cast<int64_t>(a.targets.size());
      for (size_t k = 0; k < a.targets.size(); ++k) {
        NodeId slice = b_.slice(v, static_cast<int64_t>(k) * part, part, a.targets[k].range);
        define(s, a.targets[k], {slice, 0});
      }
      continue;
    }
    define(s, a.targets[0], expr(s, rhs));
  }
  // Every forward read names something the cell defines (Sema checked it).
  for (const auto &[n, placeholder] : s.forward) {
    auto it = s.values.find(n);
    RNNC_ASSERT(it != s.values.end(), "a forward read of '" + n + "' was never defined");
    placeholderValue_[placeholder] = it->second;
  }
  if (inst.prefix.empty())
    if (auto it = s.values.find("loss"); it != s.values.end()) loss_ = it->second;
  std::vector<Edge> outs;
  for (const auto &o : decl.outputs) outs.push_back(s.values.at(o.name));
  return outs;
}

void Lowering::define(Scope &s, const Ident &target, Edge value) {
  s.values[target.name] = value;
  // A node made for this statement takes the user's name (the first one wins).
  Node &n = g_.node(value.src);
  if (value.delay == 0 && n.name.empty() && n.op != Op::Input && n.op != Op::Param)
    n.name = s.inst.prefix + target.name;
  if (auto it = s.forward.find(target.name); it != s.forward.end()) placeholderDecl_[it->second] = target.range;
}

Edge Lowering::name(Scope &s, const NameExpr &n) {
  int32_t delay = static_cast<int32_t>(-n.timeOffset);
  if (s.params.count(n.name)) {
    auto it = s.paramReads.find(n.name);
    if (it == s.paramReads.end()) it = s.paramReads.emplace(n.name, b_.param(s.inst.prefix + n.name, n.range)).first;
    return {it->second, 0};
  }
  if (auto it = s.values.find(n.name); it != s.values.end())
    return {it->second.src, it->second.delay + delay, n.range};
  // Read with an offset above its definition: a placeholder of the same type.
  auto it = s.forward.find(n.name);
  if (it == s.forward.end()) {
    const ValueType &t = s.inst.values.at(n.name);
    Node ph{Op::Input, *t.width, t.isIndex, {}, {}, 0, 0, "<forward " + s.inst.prefix + n.name + ">", {n.nameRange}, false};
    g_.nodes.push_back(std::move(ph)); // not an input port: resolved in step 3
    it = s.forward.emplace(n.name, static_cast<NodeId>(g_.nodes.size() - 1)).first;
    placeholderName_[it->second] = s.inst.prefix + n.name;
  }
  return {it->second, delay, n.range};
}

Edge Lowering::call(Scope &s, const CallExpr &c) {
  const Builtin *b = findBuiltin(c.callee.name);
  RNNC_ASSERT(b, "call to a non-builtin outside an instance statement");
  if (b->kind == BuiltinKind::Embed) {
    const std::string &table = as<NameExpr>(*c.args[0]).name;
    return {b_.embed(s.inst.prefix + table, expr(s, *c.args[1]), c.range), 0};
  }
  if (b->kind == BuiltinKind::Dropout || b->kind == BuiltinKind::Zoneout) return mask(s, c, b->kind);
  std::vector<Edge> args;
  for (const auto &a : c.args) args.push_back(expr(s, *a));
  return {b_.op(b->op, std::move(args), c.range), 0};
}

Edge Lowering::mask(Scope &s, const CallExpr &c, BuiltinKind kind) {
  DimScope scope;
  scope.dims = s.inst.dims;
  const bool dropout = kind == BuiltinKind::Dropout;
  ProbabilityValue p = evalProbability(*c.args[dropout ? 1 : 2], scope, diags_, "the probability");
  RNNC_ASSERT(p.value.has_value(), "a mask's probability is unknown after Sema");
  Edge fresh = expr(s, *c.args[0]);
  if (dropout) {
    if (*p.value == 0) return fresh;
    bool perSequence = false;
    for (const KeywordArg &kw : c.keywordArgs) perSequence = as<NameExpr>(*kw.value).name == "sequence";
    NodeId keep = b_.keep(g_.node(fresh.src).width, 1 - *p.value, ++masks_, true, perSequence, c.range);
    return {b_.op(Op::Mul, {fresh, {keep, 0}}, c.range), 0};
  }
  Edge old = expr(s, *c.args[1]);
  if (*p.value == 0) return fresh;
  int64_t width = std::max(g_.node(fresh.src).width, g_.node(old.src).width);
  NodeId keep = b_.keep(width, 1 - *p.value, ++masks_, false, false, c.range);
  // keep * new + (1 - keep) * old: in training exactly new or old.
  NodeId takeNew = b_.op(Op::Mul, {{keep, 0}, fresh}, c.range);
  NodeId notKept = b_.op(Op::Sub, {{b_.constant(1, c.range), 0}, {keep, 0}}, c.range);
  NodeId takeOld = b_.op(Op::Mul, {{notKept, 0}, old}, c.range);
  return {b_.op(Op::Add, {{takeNew, 0}, {takeOld, 0}}, c.range), 0};
}

std::string Lowering::productParam(Scope &s, const Expr &lhs) {
  if (lhs.kind == ExprKind::Name) return s.inst.prefix + as<NameExpr>(lhs).name;
  const auto &c = as<CallExpr>(lhs); // dropout(W, p): Sema checked it
  const std::string of = s.inst.prefix + as<NameExpr>(*c.args[0]).name;
  DimScope scope;
  scope.dims = s.inst.dims;
  ProbabilityValue p = evalProbability(*c.args[1], scope, diags_, "the probability");
  RNNC_ASSERT(p.value.has_value(), "a mask's probability is unknown after Sema");
  if (*p.value == 0) return of;
  const GraphParam *w = g_.param(of);
  RNNC_ASSERT(w && w->shape.size() == 2, "dropout() left of '@' of no matrix param");
  DroppedParam d;
  d.site = ++masks_;
  d.name = fmt::format("{}.dropout{}", of, d.site);
  d.shape = w->shape;
  d.decl = c.range;
  d.of = of;
  d.keep = 1 - *p.value;
  // The mask's counter numbers elements in fours with one 32-bit word.
  if (w->shape[0] * w->shape[1] > (int64_t{1} << 34))
    diags_.error(c.range, fmt::format("{} has {} elements, more than dropout() of a param can mask (2^34)", quoted(of),
                                      w->shape[0] * w->shape[1]));
  g_.dropped.push_back(std::move(d));
  return g_.dropped.back().name;
}

Edge Lowering::expr(Scope &s, const Expr &e) {
  switch (e.kind) {
  case ExprKind::Number: return {b_.constant(as<NumberExpr>(e).value, e.range), 0};
  case ExprKind::Name: return name(s, as<NameExpr>(e));
  case ExprKind::Unary: return {b_.op(Op::Neg, {expr(s, *as<UnaryExpr>(e).operand)}, e.range), 0};
  case ExprKind::Binary: {
    const auto &bin = as<BinaryExpr>(e);
    if (bin.op == '@') {
      std::string param = productParam(s, *bin.lhs);
      return {b_.matmul({param}, expr(s, *bin.rhs), e.range), 0};
    }
    Op op = bin.op == '+' ? Op::Add : bin.op == '-' ? Op::Sub : bin.op == '*' ? Op::Mul : Op::Div;
    Edge l = expr(s, *bin.lhs);
    Edge r = expr(s, *bin.rhs);
    return {b_.op(op, {l, r}, e.range), 0};
  }
  case ExprKind::Call: return call(s, as<CallExpr>(e));
  case ExprKind::Error: break;
  }
  RNNC_UNREACHABLE("lowering an expression in error");
}

bool Lowering::resolvePlaceholders() {
  // A placeholder may stand for another placeholder (a = b[t-1] above b = ...);
  // follow the chain, adding delays. A chain that comes back is a value that
  // only copies itself through delays: it has no value of its own.
  std::map<NodeId, Edge> resolved;
  bool ok = true;
  for (const auto &[ph, v] : placeholderValue_) {
    Edge e = v;
    std::set<NodeId> seen{ph};
    while (placeholderValue_.count(e.src)) {
      if (!seen.insert(e.src).second) {
        diags_.error(placeholderDecl_[ph], fmt::format("{} only copies itself through time offsets: it never gets a "
                                                       "value", quoted(placeholderName_[ph])));
        ok = false;
        break;
      }
      Edge next = placeholderValue_.at(e.src);
      e = {next.src, next.delay + e.delay};
    }
    resolved[ph] = e;
  }
  if (!ok) return false;
  auto fix = [&](Edge &e) {
    if (auto it = resolved.find(e.src); it != resolved.end()) {
      e.src = it->second.src;
      e.delay += it->second.delay;
    }
  };
  for (Node &n : g_.nodes)
    for (Edge &e : n.inputs) fix(e);
  for (GraphPort &o : g_.outputs) fix(o.value);
  for (const auto &[ph, v] : resolved) g_.node(ph).dead = true;
  return true;
}

/// Step 4a: a cycle of delay-0 edges (made possible by offsets that cancel,
/// like x[t+1] of an argument passed as b[t-1]) is an algebraic loop.
bool checkAlgebraicLoops(const Graph &g, DiagnosticEngine &diags) {
  bool ok = true;
  for (const auto &scc : stronglyConnected(g, [](Edge e) { return e.delay == 0; })) {
    NodeId v = scc.front();
    bool selfLoop = false;
    for (const Edge &e : g.node(v).inputs) selfLoop |= e.src == v && e.delay == 0;
    if (scc.size() < 2 && !selfLoop) continue;
    std::vector<std::pair<SourceRange, std::string>> notes;
    std::string names;
    for (NodeId id : scc) {
      const Node &node = g.node(id);
      std::string label = node.name.empty() ? std::string(opMnemonic(node.op)) : node.name;
      names += (names.empty() ? "" : " -> ") + label;
      if (id != scc.front() && !node.locs.empty()) notes.push_back({node.locs.front(), "'" + label + "' is on the loop"});
    }
    const Node &first = g.node(scc.front());
    diags.error(first.locs.empty() ? SourceRange() : first.locs.front(),
                fmt::format("algebraic loop: these values depend on each other within one step: {}", names), notes);
    ok = false;
  }
  return ok;
}

/// Step 4b: a param that no output and no loss depends on is a warning.
void warnUnusedParams(const Graph &g, DiagnosticEngine &diags) {
  std::vector<bool> reached(g.nodes.size(), false);
  std::vector<NodeId> work;
  for (const GraphPort &o : g.outputs) work.push_back(o.value.src);
  if (g.loss) work.push_back(*g.loss);
  std::set<std::string> used;
  while (!work.empty()) {
    NodeId id = work.back();
    work.pop_back();
    if (reached[id]) continue;
    reached[id] = true;
    for (const auto &p : g.node(id).params) used.insert(p);
    for (Edge e : g.node(id).inputs) work.push_back(e.src);
  }
  for (const DroppedParam &d : g.dropped)
    if (used.count(d.name)) used.insert(d.of);
  for (const GraphParam &p : g.params)
    if (!used.count(p.name))
      diags.warning(p.decl, fmt::format("param {} is never used by an output or the loss", quoted(p.name)));
}

} // namespace

std::optional<Graph> lowerToGraph(const Elaboration &elab, DiagnosticEngine &diags) {
  RNNC_ASSERT(elab.complete && elab.tree, "lowering an incomplete elaboration");
  Graph g;
  g.name = elab.decl->name.name;
  GraphBuilder b(g);
  Lowering lowering(g, diags);
  std::vector<Edge> ports;
  for (const auto &p : elab.decl->ports) {
    const ValueType &t = elab.tree->values.at(p.name.name);
    ports.push_back({b.input(p.name.name, *t.width, t.isIndex, p.name.range), 0});
  }
  std::vector<Edge> outs = lowering.cell(*elab.tree, ports);
  for (size_t i = 0; i < outs.size(); ++i)
    g.outputs.push_back({elab.decl->outputs[i].name, outs[i], elab.decl->outputs[i].range});
  if (!lowering.resolvePlaceholders()) return std::nullopt;
  // The objective: the root's `loss`, when it defines one, read at the current step.
  if (auto loss = lowering.loss()) {
    if (loss->delay != 0) {
      diags.error(loss->loc, "the training objective 'loss' must be a value of the current step, not a read of "
                             "another step");
      return std::nullopt;
    }
    g.loss = loss->src;
  }
  if (!checkAlgebraicLoops(g, diags)) return std::nullopt;
  warnUnusedParams(g, diags);
  verifyOrDie(g, "lowering");
  return g;
}

} // namespace rnnc
