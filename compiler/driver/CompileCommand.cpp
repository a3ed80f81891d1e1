// `rnnc compile FILE.rnn --target cpu|cuda [--jit] [--tf32] [--cuda-graphs]
// [--no-format] -o DIR`: the bundle (source, header, manifest), compiled with
// backward, formatted by clang-format unless asked not to, written file by
// file through temporary names.
#include "driver/Command.h"

#include "codegen/Format.h"
#include "rnnc/memory.h"
#include "support/Crash.h"

#include <fmt/format.h>

namespace rnnc {
namespace {

class CompileCommand : public Command {
public:
  explicit CompileCommand(CLI::App &app)
      : Command(app.add_subcommand("compile", "write the bundle: <model>.cpp (or .cu), <model>.h, <model>.json")) {
    CLI::App &c = *app_;
    addCommon(c, common_);
    c.add_option("--target", target_, "cpu or cuda")->required()->check(CLI::IsMember({"cpu", "cuda"}));
    c.add_option("-o", out_, "the directory to write the bundle to")->required()->type_name("DIR");
    c.add_flag("--jit", cuda_.jit, "cuda: kernels as a string for NVRTC, host code as plain C++");
    c.add_flag("--tf32", cuda_.tf32, "cuda: float GEMMs may use TF32 tensor cores (about 1e-3 relative error)");
    c.add_flag("--cuda-graphs", cuda_.cudaGraphs, "cuda: capture each loop's steps once as a CUDA graph and replay it");
    c.add_flag("--forward-only", forwardOnly_,
               "no backward: the workspace keeps nothing for it (inference); backward returns 1");
    c.add_flag("--lengths", lengths_, "forward takes each sequence's length (rnnc_run_options.lengths; docs/lengths.md)");
    c.add_flag("--no-format", noFormat_, "write the code as printed, not formatted with clang-format (and no .clang-format)");
  }

  int run() override {
    BundleOptions b;
    b.target = *codegen::parseTarget(target_);
    b.cuda = cuda_;
    if (cuda_.jit && b.target == codegen::Target::Cpu) {
      fmt::print(stderr, "rnnc: error: --jit goes with --target cuda (it puts the CUDA kernels in a string for NVRTC)\n");
      return 1;
    }
    if ((cuda_.tf32 || cuda_.cudaGraphs) && b.target != codegen::Target::Cuda) {
      fmt::print(stderr, "rnnc: error: {} goes with --target cuda\n", cuda_.tf32 ? "--tf32" : "--cuda-graphs");
      return 1;
    }
    CompileOptions o;
    if (!compileOptionsOf(common_, o)) return 1;
    o.gradients = forwardOnly_ ? Gradients::None : Gradients::All;
    o.lengths = lengths_;
    auto bundle = compileToBundle(common_.file, o, b);
    if (!bundle) return 1;
    std::string error;
    if (!noFormat_) {
      std::string skipped;
      if (!codegen::formatBundle(*bundle, error, skipped)) {
        fmt::print(stderr, "rnnc: internal compiler error: formatting the generated code: {}\n", error);
        return kExitInternal;
      }
      if (!skipped.empty())
        fmt::print(stderr, "rnnc: note: {} is {}; it is written as printed (rnnc formats up to {})\n", skipped,
                   rt::bytesText(bundle->source.size()), rt::bytesText(codegen::kFormatLimitBytes));
      else
        bundle->clangFormat = codegen::clangFormatStyle();
    }
    std::string warning;
    if (!codegen::writeBundle(*bundle, out_, error, &warning)) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return 1;
    }
    if (!warning.empty()) fmt::print(stderr, "rnnc: warning: {}\n", warning);
    return 0;
  }

private:
  CommonOptions common_;
  std::string target_, out_;
  codegen::CudaOptions cuda_;
  bool noFormat_ = false, forwardOnly_ = false, lengths_ = false;
};

} // namespace

std::unique_ptr<Command> addCompileCommand(CLI::App &app) { return std::make_unique<CompileCommand>(app); }

} // namespace rnnc
