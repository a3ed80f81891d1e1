#include "ir/Printer.h"

#include <fmt/format.h>

namespace rnnc {

std::string edgeText(Edge e) {
  if (e.delay == 0) return fmt::format("%{}", e.src);
  return fmt::format("%{}[t{}{}]", e.src, e.delay > 0 ? '-' : '+', e.delay > 0 ? e.delay : -e.delay);
}

std::string locText(const SourceManager &sm, SourceRange r) {
  if (!r.valid()) return "";
  std::string file = sm.name(r.begin.file);
  size_t slash = file.rfind('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  return fmt::format("{}:{}", file, sm.lineCol(r.begin).line);
}

std::string printGraph(const Graph &g, const SourceManager &sm) {
  std::string out = fmt::format("graph {} {{\n", g.name);
  for (const GraphParam &p : g.params) {
    std::string shape;
    for (int64_t d : p.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    out += fmt::format("  param {}: [{}]", p.name, shape);
    if (p.stackedWith.size() > 1) {
      std::string group;
      for (const auto &s : p.stackedWith) group += (group.empty() ? "" : ", ") + s;
      out += fmt::format("  # one block: {}", group);
    }
    out += "\n";
  }
  for (NodeId id = 0; id < g.nodes.size(); ++id) {
    const Node &n = g.node(id);
    if (n.dead) continue;
    std::string args;
    auto arg = [&](const std::string &s) { args += (args.empty() ? " " : ", ") + s; };
    for (const auto &p : n.params) arg(p);
    if (n.op == Op::Const) arg(fmt::format("{}", n.value));
    if (n.op == Op::Input) arg(n.name);
    for (const Edge &e : n.inputs) arg(edgeText(e));
    std::string range = n.op == Op::Slice ? fmt::format("[{}:{}]", n.offset, n.offset + n.width)
                        : n.op == Op::Pad ? fmt::format(" at {}", n.offset) : "";
    std::string type = n.isIndex ? fmt::format("index[{}]", n.width) : fmt::format("[{}]", n.width);
    out += fmt::format("  %{} = {}{}{} : {}", id, opMnemonic(n.op), args, range, type);
    std::string note;
    if (!n.name.empty() && n.op != Op::Input && n.op != Op::Param) note = n.name;
    if (n.backward) note = (note.empty() ? "" : note + " ") + "bwd";
    if (!n.locs.empty() && n.locs.front().valid()) note += (note.empty() ? "" : " ") + std::string("@") + locText(sm, n.locs.front());
    if (!note.empty()) out += "  # " + note;
    out += "\n";
  }
  for (const GraphPort &o : g.outputs) out += fmt::format("  output {} = {}\n", o.name, edgeText(o.value));
  if (g.loss) out += fmt::format("  loss = %{}\n", *g.loss);
  out += "}\n";
  return out;
}

} // namespace rnnc
