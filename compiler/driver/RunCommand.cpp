// `rnnc run FILE.rnn --params P --input NAME=X.npy ... [--grad ...] --out DIR`:
// a cell or model run on arrays from files, by the generated code or the
// reference interpreter (driver/Run.h does the running and the checks).
#include "driver/Command.h"

#include "driver/Device.h"
#include "driver/Entity.h"
#include "driver/Run.h"
#include "frontend/Lower.h"
#include "passes/ApplyLengths.h"

#include <fmt/format.h>

namespace rnnc {
namespace {

class RunCommand : public Command {
public:
  explicit RunCommand(CLI::App &app)
      : Command(app.add_subcommand("run", "run a cell or model on arrays from .npy files (and its gradients)")) {
    CLI::App &c = *app_;
    addCommon(c, common_);
    c.add_option("--params", ro_.params, "the params (safetensors)")->required()->type_name("P.safetensors");
    c.add_option("--input", inputs_, "an input: time-major [T, B, n], or [T, B] for an index")
        ->allow_extra_args(false)
        ->type_name("NAME=X.npy");
    c.add_option("--state", states_, "an initial state: [B, n] (or [k, B, n] for k steps)")
        ->allow_extra_args(false)
        ->type_name("NAME=S.npy");
    grad_ = c.add_option("--grad", grads_, "gradients of L = sum <y, dy> (alone: of the loss)")
                ->expected(0, -1)
                ->type_name("NAME=DY.npy");
    c.add_option("--final-grad", finalGrads_, "with --grad: L += <s, ds> for a state's final value: [B, n] (or [k, B, n])")
        ->allow_extra_args(false)
        ->type_name("NAME=DS.npy");
    c.add_flag("--tf32", ro_.cuda.tf32, "cuda: float GEMMs may use TF32 tensor cores");
    c.add_flag("--cuda-graphs", ro_.cuda.cudaGraphs, "cuda: replay each loop as a CUDA graph");
    c.add_flag("--param-grads-only", ro_.paramGradsOnly,
               "with --grad: only the params' gradients (what training computes), no grad/<input> or grad/initial");
    c.add_option("--out", ro_.out, "where the results go")->required()->type_name("DIR");
    c.add_option("--device", device_, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    addMaxMemory(c, ro_.maxMemory);
    c.add_option("--mode", mode_, "eval (default: dropout and zoneout are their expectations) or train (random masks)")
        ->check(CLI::IsMember({"eval", "train"}));
    c.add_option("--seed", ro_.seed, "train: the masks' seed (default 0); the same seed draws the same masks on every engine")
        ->type_name("S");
    c.add_option("--lengths", ro_.lengths, "each sequence's length, 1..T: int32 or int64 [B] (docs/lengths.md)")
        ->type_name("L.npy");
    c.add_option("--engine", engine_, "compiled (default: the generated code) or interp (the reference interpreter)")
        ->check(CLI::IsMember({"compiled", "interp"}));
  }

  int run() override {
    ro_.train = mode_ == "train";
    ro_.grad = grad_->count() > 0;
    if (ro_.paramGradsOnly && !ro_.grad) {
      fmt::print(stderr, "rnnc: error: --param-grads-only goes with --grad\n");
      return 1;
    }
    if (!finalGrads_.empty() && (!ro_.grad || ro_.paramGradsOnly)) {
      fmt::print(stderr, "rnnc: error: --final-grad goes with --grad (and not --param-grads-only)\n");
      return 1;
    }
    if (!namedFiles(inputs_, "--input", ro_.inputs) || !namedFiles(states_, "--state", ro_.states) ||
        !namedFiles(grads_, "--grad", ro_.seeds) || !namedFiles(finalGrads_, "--final-grad", ro_.finalSeeds))
      return 1;
    ro_.compiled = engine_ == "compiled";
    if (ro_.compiled) {
      auto device = resolveDevice(device_);
      if (!device) return 1;
      ro_.device = *device;
    } else if (codegen::parseTarget(device_) == codegen::Target::Cuda) {
      fmt::print(stderr, "rnnc: error: --engine interp runs on the CPU; --device cuda goes with the compiled engine\n");
      return 1;
    }
    if (!compileOptionsOf(common_, ro_.compile)) return 1;
    ro_.f64 = ro_.compile.dtype == DType::F64;
    if (isHalf(ro_.compile.dtype) && !ro_.compiled) {
      fmt::print(stderr, "rnnc: error: --dtype {} goes with the compiled engine (the interpreter computes in f32 or f64)\n",
                 common_.dtype);
      return 1;
    }
    auto p = checkProgram(common_.file, ro_.compile);
    if (!p) return 1;
    // Lowered here; runGraph differentiates it for the objective --grad names.
    std::optional<Graph> g;
    try {
      g = lowerToGraph(*p->entity, *p->file->diags);
    } catch (TooManyErrors &) {
    }
    if (g && !ro_.lengths.empty() && !applyLengths(*g, *p->file->diags)) g.reset();
    finishDiagnostics(*p);
    if (!g) return 1;
    ro_.compile.lengths = !ro_.lengths.empty();
    ro_.sm = &p->file->sm;
    return runGraph(std::move(*g), ro_);
  }

private:
  CommonOptions common_;
  RunOptions ro_;
  std::vector<std::string> inputs_, states_, grads_, finalGrads_;
  CLI::Option *grad_ = nullptr;
  std::string device_ = "auto", engine_ = "compiled", mode_ = "eval";
};

} // namespace

std::unique_ptr<Command> addRunCommand(CLI::App &app) { return std::make_unique<RunCommand>(app); }

} // namespace rnnc
