// `rnnc check FILE.rnn`: diagnostics only. Every root whose dims all have
// values is also lowered and through the passes, so the graph-level errors
// (algebraic loops, mixed directions) are found too.
#include "driver/Command.h"

namespace rnnc {
namespace {

class CheckCommand : public Command {
public:
  explicit CheckCommand(CLI::App &app) : Command(app.add_subcommand("check", "check a .rnn file: diagnostics only")) {
    addCommon(*app_, common_);
  }

  int run() override {
    CompileOptions o;
    if (!compileOptionsOf(common_, o)) return 1;
    auto p = checkProgram(common_.file, o, nullptr, /*pickEntity=*/false);
    if (!p) return 1;
    for (const auto &e : p->file->sema.entities)
      if (e.complete) compileProgram(*p, e, o);
    finishDiagnostics(*p);
    return p->file->ok() ? 0 : 1;
  }

private:
  CommonOptions common_;
};

} // namespace

std::unique_ptr<Command> addCheckCommand(CLI::App &app) { return std::make_unique<CheckCommand>(app); }

} // namespace rnnc
