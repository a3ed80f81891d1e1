// rnnc: the command line. Each subcommand reads a .rnn file through the
// frontend and reports diagnostics clang style; exit 0 when clean, 1 for a user
// error (bad input or bad command line), kExitInternal for a bug in rnnc.
#include "frontend/ASTDump.h"
#include "frontend/Frontend.h"
#include "support/Crash.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fmt/format.h>
#include <new>
#include <unistd.h>

namespace rnnc {
namespace {

struct CommonOptions {
  std::string file;
  std::vector<std::string> defines;
};

void addCommon(CLI::App &cmd, CommonOptions &o) {
  cmd.add_option("FILE", o.file, "the .rnn file")->required();
  cmd.add_option("-D", o.defines, "override a dim: -D NAME=VALUE (repeatable)")
      ->allow_extra_args(false)
      ->type_name("NAME=VALUE");
}

/// Runs the frontend; prints diagnostics and a summary. Null on a -D error.
std::unique_ptr<FrontendResult> readFile(const CommonOptions &o) {
  FrontendOptions fo;
  fo.color = ::isatty(STDERR_FILENO) && !std::getenv("NO_COLOR");
  for (const auto &d : o.defines) {
    std::string error;
    auto parsed = parseDimOverride(d, error);
    if (!parsed) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return nullptr;
    }
    fo.dims.push_back(*parsed);
  }
  auto r = runFrontend(o.file, fo);
  unsigned e = r->diags->errorCount(), w = r->diags->warningCount();
  if (e || w) {
    std::string summary;
    if (w) summary = fmt::format("{} warning{}", w, w == 1 ? "" : "s");
    if (e) summary += fmt::format("{}{} error{}", w ? " and " : "", e, e == 1 ? "" : "s");
    fmt::print(stderr, "{} generated.\n", summary);
  }
  return r;
}

std::string widthText(const std::optional<int64_t> &w) { return w ? std::to_string(*w) : "?"; }

void printParams(const FrontendResult &r) {
  for (const auto &e : r.sema.entities) {
    fmt::print("{} {}{}\n", e.decl->keyword(), e.decl->name.name,
               e.complete ? "" : " (generic: some dims have no value)");
    for (const auto &p : e.inputs)
      fmt::print("  input {}: {}[{}]\n", p.name, p.type.isIndex ? "index" : "", widthText(p.type.width));
    for (const auto &p : e.outputs)
      fmt::print("  output {}: [{}]\n", p.name, widthText(p.type.width));
    for (const auto &p : e.params) {
      std::string shape;
      for (const auto &s : p.shape) shape += (shape.empty() ? "" : ", ") + widthText(s);
      fmt::print("  param {}: [{}]\n", p.name, shape);
    }
  }
}

int run(int argc, char **argv) {
  CLI::App app{"rnnc: an ahead-of-time compiler for recurrent neural network cells"};
  app.set_version_flag("--version", std::string("rnnc ") + RNNC_VERSION);
  app.require_subcommand(1);

  CommonOptions checkOpts;
  CLI::App *check = app.add_subcommand("check", "check a .rnn file: diagnostics only");
  addCommon(*check, checkOpts);

  CommonOptions showOpts;
  bool ast = false, params = false;
  CLI::App *show = app.add_subcommand("show", "show what rnnc made of a .rnn file");
  addCommon(*show, showOpts);
  show->add_flag("--ast", ast, "print the syntax tree");
  show->add_flag("--params", params, "print every param with its full name and shape, instances inlined");

  auto isCommand = [&](const std::string &name) {
    for (const CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; }))
      if (sub->get_name() == name) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !isCommand(argv[1])) {
    fmt::print(stderr, "rnnc: error: unknown command '{}' (the commands are: check, show)\n", argv[1]);
    return kExitUserError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    fmt::print(stderr, "rnnc: error: {}\n", e.what());
    fmt::print(stderr, "run 'rnnc --help' for usage\n");
    return kExitUserError;
  }

  if (check->parsed()) {
    auto r = readFile(checkOpts);
    return r && r->ok() ? kExitOk : kExitUserError;
  }
  if (show->parsed()) {
    if (!ast && !params) {
      fmt::print(stderr, "rnnc: error: nothing to show: pass --ast or --params\n");
      return kExitUserError;
    }
    auto r = readFile(showOpts);
    if (!r || !r->ok()) return kExitUserError;
    if (ast) fmt::print("{}", dumpAST(r->program.root().module, r->sm));
    if (params) printParams(*r);
    std::fflush(stdout);
    return kExitOk;
  }
  return kExitUserError;
}

} // namespace
} // namespace rnnc

int main(int argc, char **argv) {
  rnnc::installCrashHandlers();
  try {
    return rnnc::run(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "rnnc: internal compiler error: out of memory\n");
    return rnnc::kExitInternal;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rnnc: internal compiler error: %s\n", e.what());
    return rnnc::kExitInternal;
  }
}
