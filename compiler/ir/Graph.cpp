#include "ir/Graph.h"

#include <algorithm>

namespace rnnc {

const char *opMnemonic(Op op) {
  switch (op) {
#define RNNC_OP(name, mnemonic, kind, rule)                                                      \
  case Op::name: return mnemonic;
#include "ir/Ops.def"
  }
  return "?";
}

OpKind opKind(Op op) {
  switch (op) {
#define RNNC_OP(name, mnemonic, kind, rule)                                                      \
  case Op::name: return OpKind::kind;
#include "ir/Ops.def"
  }
  return OpKind::Leaf;
}

size_t Graph::liveCount() const {
  size_t n = 0;
  for (const Node &node : nodes) n += !node.dead;
  return n;
}

const GraphParam *Graph::param(const std::string &name) const {
  // Params are only ever appended: index the new ones.
  if (paramIndex_.size() > params.size()) paramIndex_.clear();
  for (size_t i = paramIndex_.size(); i < params.size(); ++i) paramIndex_.emplace(params[i].name, i);
  auto it = paramIndex_.find(name);
  if (it != paramIndex_.end()) return &params[it->second];
  return droppedParam(name);
}

const DroppedParam *Graph::droppedParam(const std::string &name) const {
  for (const DroppedParam &d : dropped)
    if (d.name == name) return &d;
  return nullptr;
}

std::vector<std::pair<std::string, NodeId>> Graph::states() const {
  std::vector<bool> state(nodes.size(), false);
  for (const Node &n : nodes)
    if (!n.dead && !n.backward)
      for (const Edge &e : n.inputs) state[e.src] = state[e.src] || e.delay > 0;
  std::vector<std::pair<std::string, NodeId>> out;
  for (NodeId id = 0; id < nodes.size(); ++id)
    if (state[id]) out.push_back({nodes[id].name.empty() ? "%" + std::to_string(id) : nodes[id].name, id});
  return out;
}

std::vector<std::vector<std::pair<NodeId, size_t>>> Graph::users() const {
  std::vector<std::vector<std::pair<NodeId, size_t>>> users(nodes.size());
  for (NodeId id = 0; id < nodes.size(); ++id) {
    if (nodes[id].dead) continue;
    for (size_t i = 0; i < nodes[id].inputs.size(); ++i) users[nodes[id].inputs[i].src].push_back({id, i});
  }
  return users;
}

std::map<std::string, int64_t> stateDepths(const Graph &g) {
  std::map<std::string, int64_t> depths;
  std::map<NodeId, std::string> names;
  for (const auto &[name, id] : g.states()) names[id] = name;
  for (const Node &n : g.nodes)
    if (!n.dead && !n.backward)
      for (const Edge &e : n.inputs)
        if (e.delay > 0) depths[names.at(e.src)] = std::max<int64_t>(depths[names.at(e.src)], e.delay);
  return depths;
}

} // namespace rnnc
