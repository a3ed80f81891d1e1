// rnnc-opt: reads a graph written as text (what `rnnc show --after PASS`
// prints, or one written by hand: docs/rnnc-opt.md), runs one pass of the
// registry on it and prints what `rnnc show --after PASS` prints; like mlir-opt,
// so that a lit test checks a pass on the smallest graph that shows it.
// Exit 0 when clean, 1 for a user error, kExitInternal for a bug in rnnc.
#include "driver/Compiler.h"
#include "driver/Show.h"
#include "ir/Printer.h"
#include "ir/Reader.h"
#include "passes/Pipeline.h"
#include "support/Crash.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <new>
#include <optional>
#include <unistd.h>

namespace rnnc {
namespace {

struct OptOptions {
  std::string file;
  std::string pass;
  bool o0 = false;
  bool list = false;
  std::string timeParallel = "auto";
  int newtonIterations = 3;
};

const char *dumpName(PassDump dump) {
  switch (dump) {
  case PassDump::Graph: return "the graph";
  case PassDump::GraphTimeClasses: return "the graph and its time classes";
  case PassDump::LoopPlans: return "the loop plans";
  case PassDump::Schedule: return "the schedule";
  case PassDump::Memory: return "the memory plan";
  }
  return "?";
}

/// `--list`: every pass in pipeline order with its contract.
std::string passList() {
  std::string out;
  auto facts = [](const std::vector<const char *> &list) {
    std::string s;
    for (const char *f : list) s += (s.empty() ? "" : ", ") + std::string(f);
    return s.empty() ? std::string("nothing") : s;
  };
  for (const PassInfo &p : passRegistry()) {
    out += fmt::format("{}\n  {}\n", p.name, p.contract);
    if (!p.run) {
      out += "  rnnc-opt runs nothing for it: it prints the graph as read\n";
      continue;
    }
    out += fmt::format("  needs {}; provides {}; {}; prints {}\n", facts(p.needs), facts(p.provides),
                       p.atO0 ? "runs at -O0 too" : "not at -O0", dumpName(p.dump));
  }
  return out;
}

/// The file named on the command line, or stdin for `-`, as a buffer of `sm`.
std::optional<uint32_t> readInput(const std::string &path, SourceManager &sm) {
  std::string error;
  if (path != "-") {
    auto id = sm.loadFile(path, error);
    if (!id) fmt::print(stderr, "rnnc-opt: error: cannot read '{}': {}\n", path, error);
    return id;
  }
  std::string text;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, stdin)) > 0) {
    text.append(chunk, n);
    if (text.size() > SourceManager::kMaxFileBytes) {
      fmt::print(stderr, "rnnc-opt: error: stdin is too large (the limit is {} bytes)\n", SourceManager::kMaxFileBytes);
      return std::nullopt;
    }
  }
  if (std::ferror(stdin)) {
    fmt::print(stderr, "rnnc-opt: error: cannot read stdin\n");
    return std::nullopt;
  }
  return sm.addBuffer("<stdin>", std::move(text));
}

void printSummary(const DiagnosticEngine &d) {
  unsigned e = d.errorCount(), w = d.warningCount();
  if (!e && !w) return;
  std::string summary = w ? fmt::format("{} warning{}", w, w == 1 ? "" : "s") : "";
  if (e) summary += fmt::format("{}{} error{}", w ? " and " : "", e, e == 1 ? "" : "s");
  fmt::print(stderr, "{} generated.\n", summary);
}

int run(int argc, char **argv) {
  OptOptions o;
  CLI::App app{"rnnc-opt: one pass of rnnc on a graph written as text (docs/rnnc-opt.md)", "rnnc-opt"};
  app.add_option("FILE", o.file, "the graph (.rnnir; - reads stdin)");
  app.add_option("--pass", o.pass, "the pass to run (--list names them); without it, the graph is printed as read")
      ->type_name("NAME");
  app.add_flag("--list", o.list, "print every pass with its contract");
  // CLI11 takes one-letter short options only; -O0 is rewritten to --O0 below.
  app.add_flag("--O0", o.o0, "-O0: the passes as `rnnc -O0` runs them (no analysis, a launch per op)");
  app.add_option("--time-parallel", o.timeParallel,
                 "loops in parallel over time: off, scan, newton, auto (the default)")
      ->check(CLI::IsMember({"off", "scan", "newton", "auto"}));
  app.add_option("--newton-iterations", o.newtonIterations, "Newton iterations of a nonlinear loop run in parallel (3)")
      ->check(CLI::Range(1, 100000));
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string &a : args)
    if (a == "-O0") a = "--O0";
  std::reverse(args.begin(), args.end()); // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    fmt::print(stderr, "rnnc-opt: error: {}\nrun 'rnnc-opt --help' for usage\n", e.what());
    return kExitUserError;
  }

  if (o.list) {
    fmt::print("{}", passList());
    return kExitOk;
  }
  if (o.file.empty()) {
    fmt::print(stderr, "rnnc-opt: error: no FILE: name a .rnnir file, or - for stdin\n");
    return kExitUserError;
  }
  const PassInfo *pass = nullptr;
  if (!o.pass.empty() && !(pass = findPass(o.pass))) {
    fmt::print(stderr, "rnnc-opt: error: no pass '{}' (the passes are: {})\n", o.pass, passNameList());
    return kExitUserError;
  }
  if (pass && o.o0 && !pass->atO0) {
    std::string atO0;
    for (const PassInfo &p : passRegistry())
      if (p.atO0) atO0 += (atO0.empty() ? "" : ", ") + std::string(p.name);
    fmt::print(stderr, "rnnc-opt: error: {} does not run at -O0 (it runs {})\n", pass->name, atO0);
    return kExitUserError;
  }

  SourceManager sm;
  std::optional<uint32_t> file = readInput(o.file, sm);
  if (!file) return kExitUserError;
  DiagnosticEngine diags(sm);
  diags.setColor(::isatty(STDERR_FILENO) && !std::getenv("NO_COLOR"));
  Compilation c;
  c.optimize = !o.o0;
  c.timeParallel.mode = timeParallelMode(o.timeParallel);
  c.timeParallel.newtonIterations = o.newtonIterations;
  bool ok = false;
  try {
    std::optional<Graph> g = readGraph(sm, *file, diags);
    if (g) {
      c.graph = std::move(*g);
      bool changed = false;
      ok = !pass || runPass(*pass, c, diags, changed);
    }
  } catch (TooManyErrors &) {}
  printSummary(diags);
  if (!ok) return kExitUserError;
  std::string out = pass ? fmt::format("// ----- after {} -----\n{}", pass->name, passDumpText(pass->dump, c, sm))
                         : printGraph(c.graph, sm);
  fmt::print("{}", out);
  std::fflush(stdout);
  return kExitOk;
}

} // namespace
} // namespace rnnc

int main(int argc, char **argv) {
  rnnc::installCrashHandlers();
  try {
    return rnnc::run(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "rnnc-opt: internal compiler error: out of memory\n");
    return rnnc::kExitInternal;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rnnc-opt: internal compiler error: %s\n", e.what());
    return rnnc::kExitInternal;
  }
}
