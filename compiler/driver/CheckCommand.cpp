// `rnnc check FILE.rnn`: diagnostics only. Every root whose dims all have
// values (with --entry, that root alone) is also lowered and through the
// passes, so the graph-level errors (algebraic loops, mixed directions) are
// found too.
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
    const bool one = !common_.entry.empty(); // --entry: that cell or model alone, which must exist
    auto p = checkProgram(common_.file, o, nullptr, /*pickEntity=*/one);
    if (!p) return 1;
    for (const auto &e : p->file->sema.entities)
      if (e.complete && (!one || &e == p->entity)) compileProgram(*p, e, o);
    finishDiagnostics(*p);
    return p->file->ok() ? 0 : 1;
  }

private:
  CommonOptions common_;
};

} // namespace

std::unique_ptr<Command> addCheckCommand(CLI::App &app) { return std::make_unique<CheckCommand>(app); }

} // namespace rnnc
