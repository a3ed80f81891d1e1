// Lays out the page of `rnnc show --html` from what the driver computed: the
// source, the kernels and stages, the stats, the SVG and the code. Every text
// that comes from input is escaped here; nothing else is computed here.
#include "driver/Report.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc {

using codegen::KernelIR;
using codegen::Program;
using codegen::StageIR;

std::string sourceLineId(uint32_t file, uint32_t line, uint32_t mainFile) {
  return file == mainFile ? fmt::format("line-{}", line) : fmt::format("f{}-line-{}", file, line);
}

// ----- the page -----

namespace {

/// Text for HTML content and attribute values. Control bytes other than tab and
/// newline become U+FFFD, so no input can break the page's structure.
std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default:
      if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n') out += "\xEF\xBF\xBD";
      else out += ch;
    }
  }
  return out;
}

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::string fileBaseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Which stage each kernel runs in, and every source line's kernels.
struct PageIndex {
  std::vector<int> stageOf;  // per kernel; stages.size() for the initial-state gradients
  std::vector<bool> backward; // per kernel
  std::map<std::pair<uint32_t, uint32_t>, std::vector<int>> kernelsOfLine; // (file, line) -> kernels
  std::set<uint32_t> files; // files any kernel or drawn node comes from
};

PageIndex indexOf(const ReportInput &in) {
  const Program &p = *in.program;
  PageIndex ix;
  ix.stageOf.assign(p.kernels.size(), -1);
  ix.backward.assign(p.kernels.size(), true);
  for (size_t s = 0; s < p.stages.size(); ++s)
    for (int k : p.stages[s].kernels) {
      ix.stageOf[k] = static_cast<int>(s);
      ix.backward[k] = p.stages[s].backward;
    }
  for (int k : p.epilogue) ix.stageOf[k] = static_cast<int>(p.stages.size());
  ix.files.insert(in.mainFile);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (const SourceRange &r : p.kernels[k].equations) {
      if (!r.valid()) continue;
      auto &list = ix.kernelsOfLine[{r.begin.file, in.sm->lineCol(r.begin).line}];
      if (std::find(list.begin(), list.end(), int(k)) == list.end()) list.push_back(static_cast<int>(k));
      ix.files.insert(r.begin.file);
    }
  for (const Node &n : in.drawn->graph.nodes)
    if (!n.dead && !n.locs.empty() && n.locs.front().valid()) ix.files.insert(n.locs.front().begin.file);
  return ix;
}

std::string kernelLink(const Program &p, const PageIndex &ix, int k) {
  return fmt::format("<a class=\"k {}\" href=\"#kernel-{}\">{}</a>", ix.backward[k] ? "bwd" : "fwd",
                     escape(p.kernels[k].name), escape(p.kernels[k].name));
}

const char *kStyle = R"css(
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --fwd: #0b5cad; --bwd: #7a3fb0;
        --loop: #fbe5e5; --loop-edge: #d98a8a; --par: #e6effa; --par-edge: #8fb0d8; --hit: #fff1b8; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 80rem; padding: 1rem 2rem 4rem; color: var(--fg); background: #fff;
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }
h1 { font-size: 1.7rem; margin: .6rem 0 .2rem; }
h2 { font-size: 1.25rem; margin: 2.4rem 0 .6rem; padding-bottom: .25rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
p.note, .meta { color: var(--muted); margin: .3rem 0 .8rem; }
nav { position: sticky; top: 0; background: #fffe; padding: .4rem 0; border-bottom: 1px solid var(--line); z-index: 1; }
nav a { margin-right: 1.2rem; font-weight: 600; }
a { color: var(--fwd); text-decoration: none; }
a:hover { text-decoration: underline; }
code, pre, .src td.code { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 13px; }
[id] { scroll-margin-top: 3rem; }
:target { background: var(--hit) !important; }
table.src { border-collapse: collapse; width: 100%; border: 1px solid var(--line); border-radius: 6px; }
table.src td { padding: 0 .6rem; vertical-align: top; }
table.src td.ln { width: 3.5rem; text-align: right; color: var(--muted); user-select: none; }
table.src td.ln a { color: inherit; }
table.src td.code { white-space: pre; }
table.src tr.computed td.code { background: #f6f8fa; }
table.src td.to { font-size: 13px; white-space: normal; }
a.k { display: inline-block; padding: 0 .35rem; margin: 1px 2px; border-radius: 4px; font-family: ui-monospace,
      "DejaVu Sans Mono", monospace; font-size: 12px; border: 1px solid; }
a.k.fwd { color: var(--fwd); border-color: #b6cfea; background: #f0f6fc; }
a.k.bwd { color: var(--bwd); border-color: #d6bfea; background: #f7f0fc; }
.legend span { margin-right: 1.2rem; }
.graph { overflow: auto; border: 1px solid var(--line); border-radius: 6px; padding: .5rem; text-align: center; }
.graph svg { max-width: 100%; height: auto; }
.timeline { display: grid; gap: .5rem; margin: .4rem 0 1rem; overflow-x: auto; align-items: stretch; }
.timeline .lane { font-weight: 600; color: var(--muted); align-self: center; white-space: nowrap; }
.timeline .order { color: var(--muted); font-size: 12px; text-align: center; }
.stage { border: 1px solid; border-radius: 6px; padding: .35rem .5rem; font-size: 13px; min-width: 10rem; }
.stage.loop { background: var(--loop); border-color: var(--loop-edge); }
.stage.parallel { background: var(--par); border-color: var(--par-edge); }
.stage .what { font-weight: 600; }
.stage .waits { color: var(--muted); font-size: 12px; }
table.grid { border-collapse: collapse; margin: .4rem 0 1rem; }
table.grid th, table.grid td { border: 1px solid var(--line); padding: .2rem .7rem; text-align: left; }
table.grid td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.grid th { background: #f6f8fa; }
pre.code { border: 1px solid var(--line); border-radius: 6px; padding: .6rem; overflow-x: auto; background: #fbfbfc;
           line-height: 1.4; }
pre.code .def { display: inline-block; width: 100%; background: #eef4fb; font-weight: 600; }
details summary { cursor: pointer; color: var(--muted); }
@media print {
  nav { display: none; }
  body { max-width: none; padding: 0; }
  pre.code, table.src td.code { white-space: pre-wrap; }
  .graph, .timeline { overflow: visible; }
  h2 { break-after: avoid; }
}
)css";

std::string head(const ReportInput &in) {
  return fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<title>{} — rnnc report</title>\n<style>{}</style>\n</head>\n<body>\n",
                     escape(in.title), kStyle);
}

std::string summary(const ReportInput &in) {
  const Program &p = *in.program;
  int streams = 1;
  for (const StageIR &s : p.stages) streams = std::max(streams, s.stream + 1);
  std::string out = fmt::format("<h1 id=\"top\">{}</h1>\n", escape(in.title));
  out += fmt::format("<p class=\"meta\">{} · rnnc {} · {} kernels in {} stages on {} stream{} · emitted code for "
                     "<code>--target {}</code>{}</p>\n",
                     escape(in.sm->name(in.mainFile)), escape(RNNC_VERSION), p.kernels.size(),
                     p.stages.size() + (p.epilogue.empty() ? 0 : 1), streams, streams == 1 ? "" : "s",
                     escape(codegen::targetName(in.bundle->target)), in.drawn->optimize ? "" : " · -O0");
  out += "<nav><a href=\"#equations\">Equations</a><a href=\"#graph\">Graph</a><a href=\"#schedule\">Schedule</a>"
         "<a href=\"#kernels\">Kernels</a><a href=\"#stats\">Stats</a><a href=\"#code\">Emitted code</a></nav>\n";
  return out;
}

/// One file's lines, each with the kernels that compute it.
std::string sourceTable(const ReportInput &in, const PageIndex &ix, uint32_t file) {
  const Program &p = *in.program;
  std::string out = "<table class=\"src\">\n";
  std::vector<std::string_view> lines = splitLines(in.sm->text(file));
  for (size_t i = 0; i < lines.size(); ++i) {
    uint32_t line = static_cast<uint32_t>(i + 1);
    std::string id = sourceLineId(file, line, in.mainFile);
    auto it = ix.kernelsOfLine.find({file, line});
    std::string links;
    if (it != ix.kernelsOfLine.end()) {
      std::string fwd, bwd;
      for (int k : it->second) (ix.backward[k] ? bwd : fwd) += kernelLink(p, ix, k);
      if (!fwd.empty()) links += "forward " + fwd;
      if (!bwd.empty()) links += std::string(fwd.empty() ? "" : " &nbsp; ") + "backward " + bwd;
    }
    out += fmt::format("<tr id=\"{}\"{}><td class=\"ln\"><a href=\"#{}\">{}</a></td><td class=\"code\">{}</td>"
                       "<td class=\"to\">{}</td></tr>\n",
                       id, links.empty() ? "" : " class=\"computed\"", id, line, escape(lines[i]), links);
  }
  return out + "</table>\n";
}

std::string equationsSection(const ReportInput &in, const PageIndex &ix) {
  std::string out = "<h2 id=\"equations\">Equations</h2>\n<p class=\"note\">The source, each line with the kernels "
                    "that compute it (forward in blue, backward in purple); a kernel links back to its lines.</p>\n";
  for (uint32_t file : ix.files) {
    if (ix.files.size() > 1) out += fmt::format("<h3>{}</h3>\n", escape(in.sm->name(file)));
    out += sourceTable(in, ix, file);
  }
  return out;
}

std::string graphSection(const ReportInput &in) {
  return fmt::format("<h2 id=\"graph\">Graph</h2>\n<p class=\"note legend\"><span>filled red: recurrent (runs step "
                     "by step)</span><span>rounded: inputs and params</span><span>dashed red edge: delayed "
                     "(<code>t-1</code>, <code>t+1</code>)</span><span>click a node for its equation</span></p>\n"
                     "<div class=\"graph\" id=\"graph-svg\">\n{}\n</div>\n",
                     in.svg);
}

std::string stageText(const StageIR &s) {
  if (!s.loop) return "all steps at once";
  return s.direction > 0 ? "loop over t = 0 … T−1" : "loop over t = T−1 … 0";
}

/// One timeline: stages as boxes, a lane per stream, a column per position in
/// time (a stage starts after the last one on its stream and after every stage
/// it waits on, so independent stages on two streams share a column).
std::string timeline(const ReportInput &in, const PageIndex &ix, bool backward) {
  const Program &p = *in.program;
  std::vector<int> members;
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (p.stages[s].backward == backward) members.push_back(static_cast<int>(s));
  bool epilogue = backward && !p.epilogue.empty();
  if (members.empty() && !epilogue) return "<p class=\"note\">none</p>\n";
  std::map<int, int> column;    // stage -> column (1-based)
  std::map<int, int> lastOnStream;
  int streams = 1, columns = 0;
  for (int s : members) {
    const StageIR &st = p.stages[s];
    int col = lastOnStream.count(st.stream) ? lastOnStream[st.stream] + 1 : 1;
    for (int w : st.waits)
      if (column.count(w)) col = std::max(col, column[w] + 1);
    column[s] = col;
    lastOnStream[st.stream] = col;
    streams = std::max(streams, st.stream + 1);
    columns = std::max(columns, col);
  }
  if (epilogue) ++columns;
  std::string out = fmt::format("<div class=\"timeline\" style=\"grid-template-columns: 5.5rem repeat({}, "
                                "minmax(11rem, 1fr))\">\n<div class=\"order\" style=\"grid-row: 1; grid-column: 2 / "
                                "span {}\">time →</div>\n",
                                columns, columns);
  for (int l = 0; l < streams; ++l)
    out += fmt::format("<div class=\"lane\" style=\"grid-row: {}; grid-column: 1\">stream {}</div>\n", l + 2, l);
  auto box = [&](int id, const char *cls, const std::string &what, const std::vector<int> &kernels,
                 const std::string &waits, int row, int col) {
    std::string ks;
    for (int k : kernels) ks += kernelLink(p, ix, k);
    out += fmt::format("<div class=\"stage {}\" id=\"stage-{}\" style=\"grid-row: {}; grid-column: {}\"><div "
                       "class=\"what\">stage {}: {}</div><div>{}</div>{}</div>\n",
                       cls, id, row, col, id, what, ks, waits);
  };
  for (int s : members) {
    const StageIR &st = p.stages[s];
    std::string waits;
    for (int w : st.waits)
      waits += fmt::format("{}<a href=\"#stage-{}\">{}</a>", waits.empty() ? "" : ", ", w, w);
    if (!waits.empty()) waits = "<div class=\"waits\">waits on stage " + waits + " (an event)</div>";
    box(s, st.loop ? "loop" : "parallel", stageText(st), st.kernels, waits, st.stream + 2, column[s] + 1);
  }
  if (epilogue)
    box(static_cast<int>(p.stages.size()), "parallel", "initial-state gradients", p.epilogue, "", 2, columns + 1);
  return out + "</div>\n";
}

std::string scheduleSection(const ReportInput &in, const PageIndex &ix) {
  return "<h2 id=\"schedule\">Schedule</h2>\n<p class=\"note\">Stages in the order they run, one lane per stream. "
         "Red boxes are sequential loops (one launch of each kernel per time step); blue boxes run for all steps "
         "at once.</p>\n<h3>Forward</h3>\n" +
         timeline(in, ix, false) + "<h3>Backward (BPTT)</h3>\n" + timeline(in, ix, true);
}

const char *kindText(KernelIR::Kind k) {
  switch (k) {
  case KernelIR::Kind::Fused: return "fused pointwise";
  case KernelIR::Kind::Gemm: return "GEMM";
  case KernelIR::Kind::GemmT: return "GEMM, transposed weight";
  case KernelIR::Kind::GradMatrix: return "weight gradient (GEMM over all steps)";
  case KernelIR::Kind::GradVector: return "vector gradient (sum over all steps)";
  case KernelIR::Kind::GradEmbed: return "embedding gradient";
  }
  return "kernel";
}

/// Where each kernel is in the emitted code: the line of its `// NAME:` comment,
/// else the first line that names it. Line index per kernel, -1 if none.
std::vector<int> codeAnchors(const Program &p, const std::vector<std::string_view> &lines) {
  std::vector<int> at(p.kernels.size(), -1);
  auto isWordChar = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const std::string &name = p.kernels[k].name;
    int mention = -1;
    for (size_t i = 0; i < lines.size() && at[k] < 0; ++i) {
      std::string_view l = lines[i];
      size_t start = l.find_first_not_of(" \t/");
      if (start != std::string_view::npos && l.substr(0, start).find('/') != std::string_view::npos &&
          l.substr(start).substr(0, name.size() + 1) == name + ":")
        at[k] = static_cast<int>(i);
      for (size_t pos = l.find(name); mention < 0 && pos != std::string_view::npos; pos = l.find(name, pos + 1))
        if ((pos == 0 || !isWordChar(l[pos - 1])) &&
            (pos + name.size() == l.size() || !isWordChar(l[pos + name.size()])))
          mention = static_cast<int>(i);
    }
    if (at[k] < 0) at[k] = mention;
  }
  return at;
}

std::string kernelsSection(const ReportInput &in, const PageIndex &ix, const std::vector<int> &anchors) {
  const Program &p = *in.program;
  std::string out = "<h2 id=\"kernels\">Kernels</h2>\n<table class=\"grid\">\n<tr><th>kernel</th><th>kind</th>"
                    "<th>runs</th><th>stage</th><th>equations</th><th>code</th></tr>\n";
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelIR &kr = p.kernels[k];
    std::string lines;
    std::set<std::pair<uint32_t, uint32_t>> seen;
    for (const SourceRange &r : kr.equations) {
      if (!r.valid()) continue;
      uint32_t line = in.sm->lineCol(r.begin).line;
      if (!seen.insert({r.begin.file, line}).second) continue;
      lines += fmt::format("{}<a href=\"#{}\">{}:{}</a>", lines.empty() ? "" : ", ",
                           sourceLineId(r.begin.file, line, in.mainFile), escape(fileBaseName(in.sm->name(r.begin.file))),
                           line);
    }
    std::string runs = kr.epilogue ? "the steps before the first" : kr.perStep ? "once per step" : "all steps at once";
    int stage = ix.stageOf[k];
    std::string stageCell = stage < 0 ? "" : fmt::format("<a href=\"#stage-{}\">{}</a>", stage, stage);
    std::string code = anchors[k] < 0 ? "" : fmt::format("<a href=\"#code-{}\">source</a>", escape(kr.name));
    out += fmt::format("<tr id=\"kernel-{}\"><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                       escape(kr.name), kernelLink(p, ix, static_cast<int>(k)), kindText(kr.kind),
                       ix.backward[k] ? "backward, " : "forward, ", runs, stageCell, lines, code);
  }
  return out + "</table>\n";
}

std::string statsSection(const ReportInput &in) {
  const nlohmann::json &s = in.stats;
  std::string out = "<h2 id=\"stats\">Stats</h2>\n<p class=\"note\">As <code>rnnc show --stats --json</code> prints "
                    "them: launches and GEMMs per time step inside loops, summed over loops; flops per step and "
                    "sequence.</p>\n<table class=\"grid\">\n<tr><th></th><th>forward</th><th>backward</th></tr>\n";
  if (s.contains("forward") && s["forward"].is_object())
    for (const auto &[key, value] : s["forward"].items()) {
      std::string back = s.contains("backward") && s["backward"].contains(key) ? s["backward"][key].dump() : "";
      out += fmt::format("<tr><th>{}</th><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n", escape(key),
                         escape(value.dump()), escape(back));
    }
  out += "</table>\n<table class=\"grid\">\n";
  for (const auto &[key, value] : s.items())
    if (!value.is_object())
      out += fmt::format("<tr><th>{}</th><td class=\"num\">{}</td></tr>\n", escape(key), escape(value.dump()));
  out += "</table>\n";
  return out + fmt::format("<details><summary>JSON</summary><pre class=\"code\">{}</pre></details>\n",
                           escape(s.dump(2)));
}

std::string codeSection(const ReportInput &in, const std::vector<std::string_view> &lines,
                        const std::vector<int> &anchors) {
  const codegen::Bundle &b = *in.bundle;
  std::map<int, std::vector<std::string>> namesAt; // line -> kernels anchored there
  for (size_t k = 0; k < anchors.size(); ++k)
    if (anchors[k] >= 0) namesAt[anchors[k]].push_back(in.program->kernels[k].name);
  std::string out = fmt::format("<h2 id=\"code\">Emitted code: {}.{}</h2>\n<p class=\"note\">What <code>rnnc compile "
                                "--target {}</code> writes; each kernel's name links back to its row in the "
                                "kernel table.</p>\n<pre class=\"code\">",
                                escape(b.model), escape(b.sourceExtension), escape(codegen::targetName(b.target)));
  for (size_t i = 0; i < lines.size(); ++i) {
    auto it = namesAt.find(static_cast<int>(i));
    if (it == namesAt.end()) {
      out += escape(lines[i]) + "\n";
      continue;
    }
    std::string ids;
    for (size_t n = 1; n < it->second.size(); ++n) ids += fmt::format("<span id=\"code-{}\"></span>", escape(it->second[n]));
    out += fmt::format("{}<a class=\"def\" id=\"code-{}\" href=\"#kernel-{}\">{}</a>\n", ids, escape(it->second[0]),
                       escape(it->second[0]), escape(lines[i]));
  }
  return out + "</pre>\n";
}

} // namespace

std::string reportHtml(const ReportInput &in) {
  PageIndex ix = indexOf(in);
  std::vector<std::string_view> code = splitLines(in.bundle->source);
  std::vector<int> anchors = codeAnchors(*in.program, code);
  return head(in) + summary(in) + equationsSection(in, ix) + graphSection(in) + scheduleSection(in, ix) +
         kernelsSection(in, ix, anchors) + statsSection(in) + codeSection(in, code, anchors) + "</body>\n</html>\n";
}

} // namespace rnnc
