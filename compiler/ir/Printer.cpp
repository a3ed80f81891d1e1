#include "ir/Printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>
#include <utility>

namespace rnnc {

std::string edgeText(Edge e) {
  if (e.delay == 0) return fmt::format("%{}", e.src);
  return fmt::format("%{}[t{}{}]", e.src, e.delay > 0 ? '-' : '+', e.delay > 0 ? e.delay : -e.delay);
}

static std::string baseName(const std::string &file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

std::string locText(const SourceManager &sm, SourceRange r) {
  if (!r.valid()) return "";
  return fmt::format("{}:{}", baseName(sm.name(r.begin.file)), sm.lineCol(r.begin).line);
}

std::string noteFileName(const std::string &file) {
  auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '+' || c == '-';
  };
  bool quoted = file.empty();
  for (char c : file) quoted |= !plain(c);
  if (!quoted) return file;
  std::string out = "\"";
  for (char c : file) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (byte < 0x20 || byte >= 0x7F) out += fmt::format("\\x{:02X}", byte);
    else out += c;
  }
  return out + "\"";
}

/// ` @lstm.rnn:9,10 @cell.rnn:3`: every distinct file:line a node came from,
/// first the first, lines of one file after one `@` while they follow each other.
static std::string locsText(const SourceManager &sm, const std::vector<SourceRange> &locs) {
  std::set<std::pair<std::string, uint32_t>> seen;
  std::string out, lastFile;
  for (SourceRange r : locs) {
    if (!r.valid()) continue;
    std::string file = noteFileName(baseName(sm.name(r.begin.file)));
    uint32_t line = sm.lineCol(r.begin).line;
    if (!seen.insert({file, line}).second) continue;
    if (!out.empty() && file == lastFile) out += fmt::format(",{}", line);
    else out += fmt::format(" @{}:{}", file, line);
    lastFile = file;
  }
  return out;
}

std::string printGraph(const Graph &g, const SourceManager &sm) {
  std::string out = fmt::format("graph {} {{\n", g.name);
  for (const GraphParam &p : g.params) {
    std::string shape;
    for (int64_t d : p.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    out += fmt::format("  param {}: [{}]", p.name, shape);
    if (p.stackedWith.size() > 1) {
      std::string others;
      for (size_t i = 1; i < p.stackedWith.size(); ++i) others += (others.empty() ? "" : ", ") + p.stackedWith[i];
      out += " stacked with " + others;
    }
    out += "\n";
  }
  for (const DroppedParam &d : g.dropped) {
    out += fmt::format("  param {}: [{}] dropout of {} keep {} at {}\n", d.name, fmt::join(d.shape, ", "), d.of, d.keep,
                       d.site);
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
                        : n.op == Op::Pad ? fmt::format(" at {}", n.offset)
                        : n.op == Op::Keep ? fmt::format(" {} at {}{}{}", n.value, n.offset, n.inverted ? " inverted" : "",
                                                       n.perSequence ? " per sequence" : "")
                        : n.op == Op::Active && n.weighted ? std::string(" weighted")
                                          : "";
    std::string type = n.isIndex ? fmt::format("index[{}]", n.width) : fmt::format("[{}]", n.width);
    out += fmt::format("  %{} = {}{}{} : {}{}", id, opMnemonic(n.op), args, range, type, n.backward ? " bwd" : "");
    std::string note;
    if (!n.name.empty() && n.op != Op::Input && n.op != Op::Param) note = " " + n.name;
    note += locsText(sm, n.locs);
    if (!note.empty()) out += "  #" + note;
    out += "\n";
  }
  // Ids past the last live node were removed; a pass adds its nodes after them.
  if (!g.nodes.empty() && g.nodes.back().dead) out += fmt::format("  next %{}\n", g.nodes.size());
  for (const GraphPort &o : g.outputs) out += fmt::format("  output {} = {}\n", o.name, edgeText(o.value));
  if (g.loss) out += fmt::format("  loss = %{}\n", *g.loss);
  // What autodiff added: the canonicalizer keeps what these reach, hoisting
  // keeps the states' adjoints in their loops.
  for (const GraphPort &s : g.grads.seeds) out += fmt::format("  grad seed {} = {}\n", s.name, edgeText(s.value));
  for (const auto &[name, id] : g.grads.params) out += fmt::format("  grad param {} = %{}\n", name, id);
  for (const GraphPort &i : g.grads.inputs) out += fmt::format("  grad input {} = {}\n", i.name, edgeText(i.value));
  for (const auto &[name, id] : g.grads.states) out += fmt::format("  grad state {} = %{}\n", name, id);
  out += "}\n";
  return out;
}

} // namespace rnnc
