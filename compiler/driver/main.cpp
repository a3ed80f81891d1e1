// rnnc: the command line. Each command is a file of its own (driver/*Command.cpp)
// that compiles through the one entry point (driver/Compiler.h); this file
// parses the command line and runs the command it names. Exit 0 when clean, 1
// for a user error (bad input or bad command line), kExitInternal for a bug.
#include "driver/Command.h"
#include "driver/Engine.h"
#include "support/Crash.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <new>

namespace rnnc {
namespace {

int run(int argc, char **argv) {
  // CLI11 takes one-letter short options only: -O0 is spelled --O0 for it.
  std::vector<std::string> args(argv, argv + argc);
  for (auto &a : args)
    if (a == "-O0") a = "--O0";
  std::vector<char *> argp;
  for (auto &a : args) argp.push_back(a.data());
  argv = argp.data();
  if (argc == 2 && std::string(argv[1]) == "--print-cflags") {
    fmt::print("{}\n", runtimeCflags());
    return kExitOk;
  }

  CLI::App app{"rnnc: an ahead-of-time compiler for recurrent neural network cells"};
  app.set_version_flag("--version", std::string("rnnc ") + RNNC_VERSION);
  app.require_subcommand(1);
  app.footer("rnnc --print-cflags prints the flags that compile a bundle against the runtime headers.");
  std::vector<std::unique_ptr<Command>> commands;
  for (auto add : {addCheckCommand, addShowCommand, addCompileCommand, addInitCommand, addRunCommand, addTrainCommand,
                   addBenchCommand})
    commands.push_back(add(app));

  auto isCommand = [&](const std::string &name) {
    for (const CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; }))
      if (sub->get_name() == name) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !isCommand(argv[1])) {
    fmt::print(stderr, "rnnc: error: unknown command '{}' (the commands are: check, show, compile, init, run, train, bench)\n",
               argv[1]);
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
  for (auto &command : commands)
    if (command->parsed()) return command->run();
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
