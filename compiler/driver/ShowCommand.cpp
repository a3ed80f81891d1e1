// `rnnc show FILE.rnn --ast | --params | --after PASS | --all | --dot |
// --schedule | --stats [--json] | --html -o PAGE`: what rnnc made of a file.
// The graph views compile through the one entry point with an observer that
// prints after the pass asked for (what each pass prints is the registry's).
#include "driver/Command.h"

#include "codegen/CudaPersist.h"
#include "codegen/Format.h"
#include "driver/Graphviz.h"
#include "driver/Report.h"
#include "driver/Show.h"
#include "frontend/ASTDump.h"
#include "io/Array.h"
#include "ir/Printer.h"
#include "passes/Stats.h"

#include <cstdio>
#include <fmt/format.h>

namespace rnnc {
namespace {

std::string widthText(const std::optional<int64_t> &w) { return w ? std::to_string(*w) : "?"; }

/// --params: every entity with its ports and params, full names.
std::string paramsText(const FrontendResult &r) {
  std::string out;
  for (const auto &e : r.sema.entities) {
    out += fmt::format("{} {}{}\n", e.decl->keyword(), e.decl->name.name,
                       e.complete ? "" : " (generic: some dims have no value)");
    for (const auto &p : e.inputs)
      out += fmt::format("  input {}: {}[{}]\n", p.name, p.type.isIndex ? "index" : "", widthText(p.type.width));
    for (const auto &p : e.outputs) out += fmt::format("  output {}: [{}]\n", p.name, widthText(p.type.width));
    for (const auto &p : e.params) {
      std::string shape;
      for (const auto &s : p.shape) shape += (shape.empty() ? "" : ", ") + widthText(s);
      out += fmt::format("  param {}: [{}]\n", p.name, shape);
    }
  }
  return out;
}

/// --html: the report page of `full` (compiled with backward), with `drawn`'s
/// graph, written to `path` through a temporary file.
int writeReport(const CheckedProgram &p, const Compilation &drawn, const Compilation &full, codegen::Target target,
                const std::string &path) {
  std::string error;
  codegen::Program program;
  if (!kernelsOf(full, &p, program, error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return 1;
  }
  const FrontendResult &r = *p.file;
  codegen::Bundle bundle = codegen::printBundle(program, r.sm, target);
  std::string skipped;
  // Formatted as `rnnc compile` writes it; a page is still worth having if formatting fails.
  if (!codegen::formatBundle(bundle, error, skipped))
    fmt::print(stderr, "rnnc: warning: the page shows the code unformatted: {}\n", error);
  error.clear();
  ReportInput in;
  in.sm = &r.sm;
  in.mainFile = r.program.root().module.file;
  in.drawn = &drawn;
  in.program = &program;
  in.bundle = &bundle;
  in.stats = statsJson(computeStats(full));
  in.title = full.graph.name;
  auto nodeLink = [&](const Node &n) {
    if (n.locs.empty() || !n.locs.front().valid()) return std::string();
    SourceLoc loc = n.locs.front().begin;
    return "#" + sourceLineId(loc.file, r.sm.lineCol(loc).line, in.mainFile);
  };
  if (!graphSvg(graphDot(drawn, r.sm, nodeLink), in.svg, error) ||
      !io::writeFileAtomically(path, reportHtml(in), error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return 1;
  }
  return 0;
}

class ShowCommand : public Command {
public:
  explicit ShowCommand(CLI::App &app) : Command(app.add_subcommand("show", "show what rnnc made of a .rnn file")) {
    CLI::App &c = *app_;
    addCommon(c, common_);
    c.add_flag("--ast", ast_, "print the syntax tree");
    c.add_flag("--lengths", lengths_, "the model as compiled with --lengths (sequences of their own lengths)");
    c.add_flag("--params", params_, "print every param with its full name and shape, instances inlined");
    c.add_option("--after", after_, "print the graph after this pass (lower, canonicalize, ...)")->type_name("PASS");
    c.add_flag("--all", all_, "print the graph after every pass that changed it");
    c.add_flag("--dot", dot_, "print the graph for Graphviz (recurrent nodes and delayed edges marked)");
    c.add_flag("--schedule", schedule_, "print stages, loops, streams and each launch with its equations");
    c.add_flag("--stats", stats_, "print loops, launches, GEMMs, flops and memory per step");
    c.add_flag("--json", json_, "with --stats: as JSON");
    c.add_flag("--backward", backward_,
               "include the backward graph (BPTT of the loss, or of every output) in what is shown; --stats always does");
    c.add_flag("--html", html_, "write one self-contained HTML page (equations, graph, schedule, stats, code) to -o FILE");
    c.add_option("-o", htmlOut_, "with --html: the page to write")->type_name("FILE");
    c.add_option("--target", htmlTarget_,
                 "with --html: whose emitted code the page shows, cpu (default) or cuda; with --schedule or --stats, "
                 "cuda adds how each loop runs on a GPU (persistent or step by step)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
  }

  int run() override {
    if (!optionsAgree()) return 1;
    CompileOptions o;
    if (!compileOptionsOf(common_, o)) return 1;
    o.lengths = lengths_;
    auto p = checkProgram(common_.file, o, nullptr, /*pickEntity=*/graphWanted());
    if (!p) return 1;
    std::string out;
    if (ast_) out += dumpAST(p->file->program.root().module, p->file->sm);
    if (graphWanted()) {
      std::string dumps;
      PassObserver observe = [&](const std::string &pass, const Compilation &c, bool changed) {
        if (pass == after_ || (all_ && changed))
          dumps += fmt::format("// ----- after {} -----\n", pass) + passDumpText(findPass(pass)->dump, c, p->file->sm);
      };
      o.gradients = backward_ ? Gradients::All : Gradients::None;
      std::unique_ptr<Compilation> c = compileProgram(*p, o, observe), withBackward;
      // The stats (and the page's kernels) always count the backward pass too.
      if (c && (stats_ || html_) && !backward_) {
        o.gradients = Gradients::All;
        withBackward = compileProgram(*p, o);
      }
      finishDiagnostics(*p);
      if (!c || ((stats_ || html_) && !backward_ && !withBackward)) return 1;
      const Compilation &full = withBackward ? *withBackward : *c;
      if (html_) return writeReport(*p, *c, full, *codegen::parseTarget(htmlTarget_), htmlOut_);
      out += dumps;
      if (dot_) out += graphDot(*c, p->file->sm);
      const bool cuda = htmlTarget_ == "cuda";
      codegen::Program program, fullProgram;
      std::string error;
      if (cuda && ((schedule_ && !kernelsOf(*c, nullptr, program, error)) ||
                   (stats_ && !kernelsOf(full, nullptr, fullProgram, error)))) {
        fmt::print(stderr, "rnnc: error: {}\n", error);
        return 1;
      }
      if (schedule_) out += scheduleText(*c, p->file->sm) + (cuda ? codegen::CudaPersistPrinter::loopsText(program) : "");
      if (stats_ && json_) {
        nlohmann::json stats = statsJson(computeStats(full));
        if (cuda) stats["cuda_loops"] = codegen::CudaPersistPrinter::loopsJson(fullProgram);
        out += stats.dump(2) + "\n";
      } else if (stats_) {
        out += statsText(computeStats(full)) + (cuda ? codegen::CudaPersistPrinter::loopsText(fullProgram) : "");
      }
    }
    if (params_) out += paramsText(*p->file);
    fmt::print("{}", out);
    std::fflush(stdout);
    return 0;
  }

private:
  bool graphWanted() const { return !after_.empty() || all_ || dot_ || schedule_ || stats_ || html_; }

  /// The flags make sense together; false after saying why not.
  bool optionsAgree() const {
    if (app_->count("--target") && !html_ && (schedule_ || stats_) && !ast_ && !params_ && after_.empty() && !all_ && !dot_) {
      // --target with --schedule or --stats: how the loops run on that target.
    } else if (html_ || !htmlOut_.empty() || app_->count("--target")) {
      const char *other = ast_ ? "--ast" : params_ ? "--params" : !after_.empty() ? "--after" : all_ ? "--all"
                          : dot_ ? "--dot" : schedule_ ? "--schedule" : stats_ ? "--stats" : json_ ? "--json" : nullptr;
      if (!html_) {
        fmt::print(stderr, "rnnc: error: {}\n", htmlOut_.empty() ? "--target goes with --html, --schedule or --stats"
                                                                  : "-o goes with --html");
        return false;
      }
      if (htmlOut_.empty()) {
        fmt::print(stderr, "rnnc: error: --html needs -o FILE: the page to write\n");
        return false;
      }
      if (other) {
        fmt::print(stderr, "rnnc: error: --html writes a page of its own; it does not combine with {}\n", other);
        return false;
      }
    }
    if (!ast_ && !params_ && !graphWanted()) {
      fmt::print(stderr, "rnnc: error: nothing to show: pass --ast, --params, --after PASS, --all, --dot, "
                         "--schedule, --stats or --html\n");
      return false;
    }
    if (json_ && !stats_) {
      fmt::print(stderr, "rnnc: error: --json goes with --stats\n");
      return false;
    }
    const PassInfo *afterPass = after_.empty() ? nullptr : findPass(after_);
    if (!after_.empty() && !afterPass) {
      fmt::print(stderr, "rnnc: error: no pass '{}' (the passes are: {})\n", after_, passNameList());
      return false;
    }
    if (common_.o0 && afterPass && !afterPass->atO0) {
      std::string atO0;
      for (const PassInfo &pass : passRegistry())
        if (pass.atO0) atO0 += (atO0.empty() ? "" : ", ") + std::string(pass.name);
      fmt::print(stderr, "rnnc: error: {} does not run at -O0 (it runs {})\n", after_, atO0);
      return false;
    }
    return true;
  }

  CommonOptions common_;
  bool lengths_ = false;
  bool ast_ = false, params_ = false, all_ = false, dot_ = false, schedule_ = false, stats_ = false, json_ = false;
  bool backward_ = false, html_ = false;
  std::string after_, htmlOut_, htmlTarget_ = "cpu";
};

} // namespace

std::unique_ptr<Command> addShowCommand(CLI::App &app) { return std::make_unique<ShowCommand>(app); }

} // namespace rnnc
