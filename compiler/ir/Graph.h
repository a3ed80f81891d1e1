// The graph IR: vector-valued nodes whose input edges carry a time delay
// (0 = same step, k > 0 = k steps back, k < 0 = k steps ahead). A node with a
// delayed edge into it reads a state. Built through GraphBuilder (Builder.h),
// which checks each node's invariants; printed by Printer.h; checked whole by
// Verifier.h.
#pragma once

#include "support/SourceManager.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace rnnc {

enum class Op : uint8_t {
#define RNNC_OP(name, mnemonic, kind, rule) name,
#include "ir/Ops.def"
};

enum class OpKind : uint8_t { Leaf, Pointwise, Reduce, Gemm, Layout, Accumulate };

const char *opMnemonic(Op op);
OpKind opKind(Op op);

using NodeId = uint32_t;
constexpr NodeId kNoNode = UINT32_MAX;

/// An input of a node: the value of `src`, `delay` steps earlier (negative:
/// later). Before the first step (after the last) it is the initial state.
struct Edge {
  NodeId src = kNoNode;
  int32_t delay = 0;
  SourceRange loc; // the read in the source (`h[t-1]`), where there is one

  Edge() = default;
  Edge(NodeId s, int32_t d = 0, SourceRange l = {}) : src(s), delay(d), loc(l) {}
  /// Same source and delay (where it was read does not matter).
  friend bool operator==(Edge a, Edge b) { return a.src == b.src && a.delay == b.delay; }
  friend bool operator!=(Edge a, Edge b) { return !(a == b); }
};

struct Node {
  Op op;
  int64_t width = 0;   // elements per step and sequence (1 for scalars)
  bool isIndex = false; // an index input: an integer in [0, width)
  std::vector<Edge> inputs;
  /// Param: the vector param read. MatMul: the matrix params, stacked by rows
  /// (one unless stack-gemms joined several). Embed: the table.
  std::vector<std::string> params;
  double value = 0;    // Const; Keep: the probability of 1 (in evaluation its value)
  int64_t offset = 0;  // Slice: first element taken; Keep: the mask's site (its key's last word)
  std::string name;    // the user's name for this value, if it has one
  std::vector<SourceRange> locs; // where it came from (several once rewritten or fused)
  bool dead = false;   // removed by a pass; ids stay stable
  bool backward = false; // made by autodiff
  bool perSequence = false; // Keep: one mask per sequence for all steps (else one per step)
  bool inverted = false;    // Keep: 1/p or 0 in training, 1 in evaluation (dropout); else 1 or 0, and p
  bool weighted = false;    // Active: T·B / Σ lengths where active, not 1 (the loss's weight: a mean over valid steps)
};

/// A learnable tensor: full name (`h1.W_ih`), shape, where it was declared.
struct GraphParam {
  std::string name;
  std::vector<int64_t> shape;
  SourceRange decl;
  /// Params that stack-gemms laid out side by side with this one, by rows, in
  /// one contiguous block: the first of a group lists the group.
  std::vector<std::string> stackedWith;
};

/// A matrix param seen through DropConnect (`dropout(W, p) @ x`,
/// docs/language.md): W (`of`) with each element kept with probability `keep`
/// and scaled by 1 / keep in training, one mask per forward call drawn at mask
/// site `site`; W itself in evaluation. Products read it as they read a param;
/// it lives in the workspace, not in the caller's params, and its gradient
/// reaches W through the same mask.
struct DroppedParam : GraphParam {
  std::string of;
  double keep = 1;
  int64_t site = 0;
};

struct GraphPort {
  std::string name;
  Edge value; // an output may be a delayed read (rare) or the port's own node
  SourceRange decl;
};

/// What autodiff adds: the seeds it reads and the gradients it gives.
struct GradientPorts {
  /// Input nodes holding dL/dy for each output y named by --grad, or "loss"
  /// (the runtime fills it with 1/(T·B): the loss is a mean).
  std::vector<GraphPort> seeds;
  /// Accumulate nodes whose sum is a param's gradient (a param used in several
  /// places has several).
  std::vector<std::pair<std::string, NodeId>> params;
  /// dL/dx per step for each input x (absent: nothing reaches it).
  std::vector<GraphPort> inputs;
  /// For each value read with an offset (a state), its adjoint: evaluated at
  /// the steps before the first (t < 0), it is the gradient of the initial state.
  std::vector<std::pair<std::string, NodeId>> states;
};

struct Graph {
  std::string name; // the cell or model compiled
  std::vector<Node> nodes;
  std::vector<GraphParam> params;    // the caller's params
  std::vector<DroppedParam> dropped; // params seen through DropConnect, made by each forward
  std::vector<GraphPort> inputs;  // the Input nodes, in port order
  std::vector<GraphPort> outputs;
  std::optional<NodeId> loss;
  GradientPorts grads; // empty until autodiff

private:
  mutable std::unordered_map<std::string, size_t> paramIndex_;

public:

  const Node &node(NodeId id) const { return nodes[id]; }
  Node &node(NodeId id) { return nodes[id]; }
  size_t liveCount() const;
  /// The param called `name` (a caller's or a dropped one), or null (an index
  /// kept up to date as params are added).
  const GraphParam *param(const std::string &name) const;
  /// The dropped param called `name`, or null.
  const DroppedParam *droppedParam(const std::string &name) const;
  /// The states: forward values read with a positive delay (h for h[t-1]),
  /// by name, in node order.
  std::vector<std::pair<std::string, NodeId>> states() const;
  /// Users of each node (live nodes only), with the input position.
  std::vector<std::vector<std::pair<NodeId, size_t>>> users() const;
};

/// How many steps before the first each state needs (its largest read delay).
std::map<std::string, int64_t> stateDepths(const Graph &g);

} // namespace rnnc
