// From the statements of a graph's text (ReaderSyntax.cpp) to a Graph:
// 1. node ids: each defined once; the graph holds nodes up to the largest id
//    (or `next`), those no statement defines as removed (dead) nodes, as a
//    pass leaves them;
// 2. params: each declared once; a block (`stacked with`) names other matrix
//    params with as many columns, and a param lies in one block at most;
// 3. nodes: the names an op takes (its params, an input's port name), edges to
//    defined nodes, a slice's range as wide as its type, `index` on inputs
//    only; a matmul of several params reads one whole block, in its order;
// 4. ports: outputs, the loss and autodiff's gradient ports; every input node
//    that is no seed is an input port, in id order;
// 5. the verifier, its first problem reported at the node it names;
// 6. locations: a buffer of blank lines for each file the notes name; a node
//    with none has one invalid location, as the builder makes it.
#include "ir/Reader.h"

#include "ir/ReaderSyntax.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc {

namespace {

class GraphAssembler {
public:
  GraphAssembler(SourceManager &sm, DiagnosticEngine &diags, const GraphText &text)
      : sm_(sm), diags_(diags), text_(text), errorsBefore_(diags.errorCount()) {}

  std::optional<Graph> run() {
    g_.name = text_.graph.name;
    defineNodes();
    addParams();
    addBlocks();
    for (const WrittenNode &w : text_.nodes) addNode(w);
    checkStackedProducts();
    addPorts();
    if (failed()) return std::nullopt;
    addLocations();
    if (failed()) return std::nullopt;
    verify();
    if (failed()) return std::nullopt;
    return std::move(g_);
  }

private:
  bool failed() const { return diags_.errorCount() > errorsBefore_; }
  bool defined(NodeId id) const { return id < writtenAt_.size() && writtenAt_[id] >= 0; }

  void defineNodes() {
    NodeId size = 0;
    for (const WrittenNode &w : text_.nodes) size = std::max(size, w.id + 1);
    if (text_.nextWhere.valid() && text_.next < size)
      diags_.error(text_.nextWhere, fmt::format("the next id is past every node's: %{} is defined", size - 1));
    size = std::max(size, text_.next);
    writtenAt_.assign(size, -1);
    for (size_t i = 0; i < text_.nodes.size(); ++i) {
      const WrittenNode &w = text_.nodes[i];
      if (writtenAt_[w.id] >= 0)
        diags_.error(w.where, fmt::format("%{} is defined twice", w.id),
                     {{text_.nodes[writtenAt_[w.id]].where, "first defined here"}});
      else
        writtenAt_[w.id] = static_cast<int>(i);
    }
    Node removed{};
    removed.op = Op::Const;
    removed.width = 1;
    removed.dead = true;
    g_.nodes.assign(size, removed);
  }

  void addParams() {
    for (const WrittenParam &w : text_.params) {
      auto [it, fresh] = paramDecl_.emplace(w.name.name, w.name.where);
      if (!fresh) {
        diags_.error(w.name.where, fmt::format("param '{}' is declared twice", w.name.name),
                     {{it->second, "first declared here"}});
        continue;
      }
      if (!w.dropped) g_.params.push_back({w.name.name, w.shape, w.name.where, {}});
    }
    for (const WrittenParam &w : text_.params) // after every caller's param: `of` may come later
      if (w.dropped && paramDecl_.at(w.name.name) == w.name.where) addDropped(w);
  }

  /// `param W.dropout1: [r, c] dropout of W keep q at s`: of a caller's matrix
  /// param of its shape, kept with a probability in (0, 1].
  void addDropped(const WrittenParam &w) {
    DroppedParam d;
    static_cast<GraphParam &>(d) = {w.name.name, w.shape, w.name.where, {}};
    d.of = w.of.name;
    d.keep = w.keep;
    d.site = w.site;
    const GraphParam *of = g_.param(w.of.name);
    if (!of || g_.droppedParam(w.of.name)) {
      diags_.error(w.of.where, fmt::format("'{}' is no param of the caller's to drop", w.of.name));
    } else if (of->shape.size() != 2 || of->shape != w.shape) {
      diags_.error(w.of.where, fmt::format("a dropped param has the shape of the matrix it drops: '{}' is [{}], '{}' "
                                           "is [{}]", w.name.name, fmt::join(w.shape, ", "), of->name,
                                           fmt::join(of->shape, ", ")));
    } else if (!(w.keep > 0 && w.keep <= 1)) {
      diags_.error(w.keepWhere, "the probability a dropped param keeps is not in (0, 1]");
    } else {
      g_.dropped.push_back(std::move(d));
    }
  }

  /// The param `n` names, or null after reporting it unknown.
  const GraphParam *paramNamed(const WrittenName &n) {
    if (const GraphParam *p = g_.param(n.name)) return p;
    std::vector<std::string> names;
    for (const GraphParam &p : g_.params) names.push_back(p.name);
    std::string hint = closestName(n.name, names);
    diags_.error(n.where,
                 fmt::format("unknown param '{}'{}", n.name, hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    return nullptr;
  }

  void addBlocks() {
    std::map<std::string, std::string> blockOf; // param -> the first of its block
    for (const WrittenParam &w : text_.params) {
      if (w.stackedWith.empty() || paramDecl_.at(w.name.name) != w.name.where) continue;
      auto inBlock = [&](const WrittenName &n) {
        auto it = blockOf.find(n.name);
        if (it == blockOf.end()) return false;
        diags_.error(n.where, fmt::format("'{}' is already in the block of '{}' (a param lies in one block)", n.name,
                                          it->second));
        return true;
      };
      if (inBlock(w.name)) continue;
      GraphParam &first =
          *std::find_if(g_.params.begin(), g_.params.end(), [&](const GraphParam &p) { return p.name == w.name.name; });
      std::vector<std::string> members{first.name};
      blockOf[first.name] = first.name;
      for (const WrittenName &m : w.stackedWith) {
        const GraphParam *p = paramNamed(m);
        if (!p || inBlock(m)) continue;
        if (g_.droppedParam(p->name)) {
          diags_.error(m.where, fmt::format("'{}' is a dropped param, made on its own: it lies in no block", m.name));
        } else if (p->name == first.name) {
          diags_.error(m.where, fmt::format("'{}' is stacked with itself", m.name));
        } else if (first.shape.size() != 2 || p->shape.size() != 2 || p->shape[1] != first.shape[1]) {
          diags_.error(m.where,
                       fmt::format("a block stacks matrices with as many columns by rows: '{}' is [{}], '{}' "
                                   "is [{}]",
                                   first.name, fmt::join(first.shape, ", "), p->name, fmt::join(p->shape, ", ")));
        } else {
          blockOf[p->name] = first.name;
          members.push_back(p->name);
        }
      }
      first.stackedWith = members;
    }
  }

  /// How many names an op takes before its operands, and what they are.
  static const char *namesOf(Op op, size_t &lo, size_t &hi) {
    lo = hi = 0;
    switch (op) {
    case Op::Input: lo = hi = 1; return "its port's name";
    case Op::Param:
    case Op::MatMulT:
    case Op::Embed:
    case Op::GradMatrix:
    case Op::GradVector:
    case Op::GradEmbed: lo = hi = 1; return "one param";
    case Op::MatMul: lo = 1, hi = SIZE_MAX; return "its params";
    case Op::Const: return "a number";
    case Op::Keep: return "a probability and a site";
    case Op::Active: return "no names";
#include "ir/TableOpCases.def"
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Neg:
    case Op::Sum:
    case Op::Mean:
    case Op::CrossEntropy:
    case Op::Mse:
    case Op::Slice:
    case Op::Concat:
    case Op::SoftmaxMinusOneHot:
    case Op::Pad:
    case Op::Broadcast: return "no names";
    }
    return "no names";
  }

  void addNode(const WrittenNode &w) {
    if (writtenAt_[w.id] < 0 || &text_.nodes[writtenAt_[w.id]] != &w) return; // defined twice
    Node n;
    n.op = w.op;
    n.width = w.width;
    n.isIndex = w.isIndex;
    n.backward = w.backward;
    n.name = w.name;
    size_t lo = 0, hi = 0;
    const char *takes = namesOf(w.op, lo, hi);
    if (w.names.size() < lo || w.names.size() > hi) {
      SourceRange at = w.names.size() > hi ? w.names[hi].where : w.where;
      diags_.error(at, fmt::format("{} takes {}", opMnemonic(w.op), takes));
    } else if (w.op == Op::Input) {
      n.name = w.names[0].name;
      if (!w.name.empty()) diags_.error(w.where, "an input is named by its operand, not in its note");
    } else {
      for (const WrittenName &p : w.names)
        if (paramNamed(p)) n.params.push_back(p.name);
      if (w.op == Op::Param && !n.params.empty()) n.name = n.params[0];
      if (w.op == Op::Param && !w.name.empty())
        diags_.error(w.where, "a param read is named by its param, not in its note");
    }
    if (w.op == Op::Const && !w.hasValue) diags_.error(w.where, "a const takes a number: const 0.5 : [1]");
    n.value = w.value;
    if (w.op == Op::Slice && w.end - w.first != w.width)
      diags_.error(w.rangeWhere, fmt::format("the slice [{}:{}] takes {} elements, its type says {}", w.first, w.end,
                                             w.end - w.first, w.width));
    n.offset = w.first;
    n.perSequence = w.perSequence;
    n.inverted = w.inverted;
    n.weighted = w.weighted;
    if (w.isIndex && w.op != Op::Input) diags_.error(w.typeWhere, "only an input is an index");
    for (const WrittenEdge &e : w.inputs)
      if (std::optional<Edge> edge = edgeTo(e)) n.inputs.push_back(*edge);
    g_.nodes[w.id] = std::move(n);
  }

  std::optional<Edge> edgeTo(const WrittenEdge &e) {
    if (defined(e.id)) return Edge(e.id, e.delay, e.where);
    diags_.error(e.where, fmt::format("%{} is not defined", e.id));
    return std::nullopt;
  }

  /// A matmul of several params is what stack-gemms makes: one product over a
  /// block, which the code generators read as one contiguous matrix.
  void checkStackedProducts() {
    for (const WrittenNode &w : text_.nodes) {
      const Node &n = g_.node(w.id);
      if (n.dead || n.op != Op::MatMul || n.params.size() < 2 || n.params.size() != w.names.size()) continue;
      if (g_.param(n.params[0])->stackedWith != n.params)
        diags_.error(w.where, fmt::format("a matmul of several params reads one block, in its order: declare "
                                          "`param {}: [...] stacked with {}`",
                                          n.params[0], fmt::join(n.params.begin() + 1, n.params.end(), ", ")));
    }
  }

  /// The node a port names, which must be read at delay 0 where `what` says so.
  std::optional<NodeId> nodeOf(const WrittenPort &p, const char *what) {
    std::optional<Edge> e = edgeTo(p.value);
    if (!e) return std::nullopt;
    if (e->delay != 0) {
      diags_.error(p.value.where, fmt::format("{} is a node (%{}), not a delayed read", what, e->src));
      return std::nullopt;
    }
    return e->src;
  }

  void addPorts() {
    std::set<std::string> outputs, seedNames;
    std::set<NodeId> seeds;
    for (const WrittenPort &p : text_.ports) {
      switch (p.kind) {
      case PortKind::Output:
        if (!outputs.insert(p.name.name).second)
          diags_.error(p.name.where, fmt::format("output '{}' is given twice", p.name.name));
        else if (auto e = edgeTo(p.value))
          g_.outputs.push_back({p.name.name, *e, p.name.where});
        break;
      case PortKind::Loss:
        if (g_.loss)
          diags_.error(p.value.where, "the loss is given twice");
        else if (auto id = nodeOf(p, "the loss"))
          g_.loss = *id;
        break;
      case PortKind::Seed:
        if (auto id = nodeOf(p, "a seed")) {
          if (g_.node(*id).op != Op::Input)
            diags_.error(p.value.where,
                         fmt::format("a seed is an input node; %{} is {}", *id, opMnemonic(g_.node(*id).op)));
          else if (!seedNames.insert(p.name.name).second)
            diags_.error(p.name.where, fmt::format("seed '{}' is given twice", p.name.name));
          else {
            seeds.insert(*id);
            g_.grads.seeds.push_back({p.name.name, Edge(*id), p.name.where});
          }
        }
        break;
      case PortKind::ParamGrad: {
        const GraphParam *param = paramNamed(p.name);
        auto id = nodeOf(p, "a param's gradient");
        if (!param || !id) break;
        if (opKind(g_.node(*id).op) != OpKind::Accumulate)
          diags_.error(p.value.where, fmt::format("a param's gradient is an accumulation (grad_matrix, grad_vector or "
                                                  "grad_embed); %{} is {}",
                                                  *id, opMnemonic(g_.node(*id).op)));
        else
          g_.grads.params.push_back({p.name.name, *id});
        break;
      }
      case PortKind::InputGrad:
        if (auto e = edgeTo(p.value)) g_.grads.inputs.push_back({p.name.name, *e, p.name.where});
        break;
      case PortKind::StateGrad:
        if (auto id = nodeOf(p, "a state's gradient")) g_.grads.states.push_back({p.name.name, *id});
        break;
      }
    }
    std::map<std::string, SourceRange> inputs;
    for (NodeId id = 0; id < g_.nodes.size(); ++id) {
      const Node &n = g_.node(id);
      if (n.dead || n.op != Op::Input || seeds.count(id)) continue;
      SourceRange where = text_.nodes[writtenAt_[id]].where;
      auto [it, fresh] = inputs.emplace(n.name, where);
      if (!fresh)
        diags_.error(where, fmt::format("input '{}' is declared twice", n.name), {{it->second, "first declared here"}});
      g_.inputs.push_back({n.name, Edge(id), where});
    }
  }

  void verify() {
    GraphProblem problem = findGraphProblem(g_);
    if (problem.message.empty()) return;
    SourceRange where = defined(problem.node) ? text_.nodes[writtenAt_[problem.node]].where : text_.graph.where;
    diags_.error(where, "invalid graph: " + problem.message);
  }

  void addLocations() {
    std::map<std::string, uint32_t> lines; // file -> its largest line
    uint64_t total = 0;
    for (const WrittenNode &w : text_.nodes)
      for (const WrittenLoc &l : w.locs) {
        uint32_t &most = lines[l.file];
        if (l.line <= most) continue;
        total += l.line - most;
        most = l.line;
        if (total > ReadLimits::kMaxSourceLines) {
          diags_.error(l.where,
                       fmt::format("the notes' locations span more than {} lines in all", ReadLimits::kMaxSourceLines));
          return;
        }
      }
    std::map<std::string, uint32_t> fileId;
    for (const auto &[file, most] : lines) fileId[file] = sm_.addBuffer(file, std::string(most - 1, '\n'));
    for (const WrittenNode &w : text_.nodes) {
      Node &n = g_.node(w.id);
      for (const WrittenLoc &l : w.locs) n.locs.push_back(SourceRange(SourceLoc{fileId.at(l.file), l.line - 1}));
      // As the builder makes a node with no place to name: passes take the
      // first location of a node for the nodes they make from it.
      if (n.locs.empty()) n.locs.push_back(SourceRange());
    }
  }

  SourceManager &sm_;
  DiagnosticEngine &diags_;
  const GraphText &text_;
  unsigned errorsBefore_;
  Graph g_;
  std::vector<int> writtenAt_; // node id -> its statement in text_.nodes, -1 for none
  std::map<std::string, SourceRange> paramDecl_;
};

} // namespace

std::optional<Graph> readGraph(SourceManager &sm, uint32_t file, DiagnosticEngine &diags) {
  GraphText text;
  if (!parseGraphText(sm, file, diags, text)) return std::nullopt;
  return GraphAssembler(sm, diags, text).run();
}

} // namespace rnnc
