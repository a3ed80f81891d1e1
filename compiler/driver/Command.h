// The commands of the rnnc executable, one file each (CheckCommand.cpp, ...):
// a command adds its subcommand and options to the CLI11 app, and runs when the
// command line names it, returning the exit code (0, 1 for a user error).
#pragma once

#include "driver/Compiler.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rnnc {

/// The options of every command that reads a .rnn file.
struct CommonOptions {
  std::string file;
  std::vector<std::string> defines;
  bool o0 = false;
  std::string entry;
  std::string timeParallel = "auto";
  int newtonIterations = 3;
  std::string dtype = "f32";
};

/// FILE, -D, -O0, --entry, --time-parallel, --newton-iterations on `cmd`.
void addCommon(CLI::App &cmd, CommonOptions &o);

/// The compile options they give; false after printing a bad -D.
bool compileOptionsOf(const CommonOptions &c, CompileOptions &o);

/// --max-memory SIZE on a command that allocates arrays: bytes in `bytes`.
void addMaxMemory(CLI::App &cmd, int64_t &bytes);

/// Diagnostics in color: stderr is a terminal and NO_COLOR is unset.
bool colorDiagnostics();

/// NAME=FILE arguments into `out`; false after printing what is wrong.
bool namedFiles(const std::vector<std::string> &args, const char *flag, std::map<std::string, std::string> &out);

class Command {
public:
  explicit Command(CLI::App *app) : app_(app) {}
  virtual ~Command() = default;
  bool parsed() const { return app_->parsed(); }
  /// Runs the command after parsing; the exit code.
  virtual int run() = 0;

protected:
  CLI::App *app_;
};

std::unique_ptr<Command> addCheckCommand(CLI::App &app);
std::unique_ptr<Command> addShowCommand(CLI::App &app);
std::unique_ptr<Command> addCompileCommand(CLI::App &app);
std::unique_ptr<Command> addInitCommand(CLI::App &app);
std::unique_ptr<Command> addRunCommand(CLI::App &app);
std::unique_ptr<Command> addTrainCommand(CLI::App &app);
std::unique_ptr<Command> addBenchCommand(CLI::App &app);

} // namespace rnnc
