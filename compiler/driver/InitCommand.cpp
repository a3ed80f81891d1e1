// `rnnc init FILE.rnn --seed S -o P.safetensors`: the initial params, drawn as
// torch draws them (frontend/ParamInit.h), the same numbers for the same seed.
#include "driver/Command.h"

#include "driver/Run.h"

namespace rnnc {
namespace {

class InitCommand : public Command {
public:
  explicit InitCommand(CLI::App &app) : Command(app.add_subcommand("init", "write initial params (safetensors)")) {
    addCommon(*app_, common_);
    app_->add_option("--seed", seed_, "the random seed")->required();
    app_->add_option("-o", out_, "the safetensors file to write")->required()->type_name("P.safetensors");
    addMaxMemory(*app_, maxMemory_);
  }

  int run() override {
    CompileOptions o;
    if (!compileOptionsOf(common_, o)) return 1;
    auto p = checkProgram(common_.file, o);
    if (!p) return 1;
    finishDiagnostics(*p); // the warnings
    return initParams(*p->entity, seed_, out_, maxMemory_);
  }

private:
  CommonOptions common_;
  uint64_t seed_ = 0;
  std::string out_;
  int64_t maxMemory_ = 0;
};

} // namespace

std::unique_ptr<Command> addInitCommand(CLI::App &app) { return std::make_unique<InitCommand>(app); }

} // namespace rnnc
