// `rnnc train FILE.rnn --task adding|copy|text:PATH [...]`: truncated BPTT on a
// generated task. The program (driver/Task.h) is compiled with the params'
// gradients, built into the engine, given params (from --params or drawn with
// the seed), and runtime/train takes over.
#include "driver/Command.h"

#include "driver/Device.h"
#include "driver/Task.h"
#include "frontend/ParamInit.h"
#include "io/Safetensors.h"
#include "rnnc/memory.h"
#include "rnnc/trainer.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

namespace rnnc {
namespace {

class TrainCommand : public Command {
public:
  explicit TrainCommand(CLI::App &app)
      : Command(app.add_subcommand("train", "train a cell or model on a generated task (truncated BPTT)")) {
    CLI::App &c = *app_;
    rt::TrainOptions &t = train_;
    addCommon(c, common_);
    c.add_option("--task", t.task, "adding, copy or text:PATH")->required();
    c.add_option("--device", device_, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    c.add_option("--batch", t.batch, "B: sequences trained in parallel")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
    c.add_option("--bptt", t.bptt, "T: steps per segment (truncated BPTT)")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
    c.add_option("--min-bptt", t.min_bptt,
                 "text: each sequence's segment runs a length drawn uniformly in [MIN, T] (compiles with --lengths)")
        ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
    c.add_option("--steps", t.steps, "optimizer steps in all (a resumed run counts the steps before it)")
        ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
    c.add_option("--optimizer", t.optimizer, "adam or sgd (with momentum)")->check(CLI::IsMember({"adam", "sgd"}));
    // A plain message for a bad rate (CLI11's range check prints DBL_MAX in full).
    CLI::Validator positiveRate(
        [](std::string &text) -> std::string {
          char *end = nullptr;
          double v = std::strtod(text.c_str(), &end);
          if (text.empty() || *end || !std::isfinite(v) || v <= 0) return "expected a positive number, got '" + text + "'";
          return "";
        },
        "X > 0");
    c.add_option("--lr", t.lr, "learning rate (default: adam 1e-3, sgd 0.1)")->check(positiveRate);
    c.add_option("--momentum", t.momentum, "sgd momentum")->check(CLI::Range(0.0, 1.0));
    c.add_option("--clip", t.clip, "clip the gradient's global L2 norm (0: off)")->check(CLI::NonNegativeNumber);
    c.add_option("--seed", t.seed, "seeds the initial params and the task's data");
    c.add_option("--params", params_, "initial params (safetensors) instead of drawing them")->type_name("P.safetensors");
    c.add_option("--save", t.save, "write a checkpoint here (at the end, and every --save-every steps)")->type_name("CKPT");
    c.add_option("--save-every", t.save_every, "steps between checkpoints")->check(CLI::NonNegativeNumber);
    c.add_option("--resume", t.resume, "continue from this checkpoint")->type_name("CKPT");
    c.add_option("--log", t.log, "a CSV log: step, loss, metric, grad norm, lr, seconds, eval loss, eval metric")
        ->type_name("FILE.csv");
    // A count of 0 or more, said plainly (CLI11's range check prints its bounds in full).
    CLI::Validator count(
        [](std::string &text) -> std::string {
          char *end = nullptr;
          errno = 0;
          long long v = std::strtoll(text.c_str(), &end, 10);
          if (text.empty() || *end || errno || v < 0) return "expected a whole number, 0 or more, got '" + text + "'";
          return "";
        },
        "N >= 0");
    c.add_option("--eval-every", t.eval_every,
                 "steps between evaluations on held-out data in eval mode, and one after the last step "
                 "(0: only after the last)")
        ->check(count);
    c.add_option("--eval-batches", t.eval_batches,
                 "segments per evaluation (0: no evaluation, and text trains on all of the file)")
        ->check(count);
    c.add_flag("--quiet", t.quiet, "no progress, only errors");
    c.add_flag("--skip-nonfinite", t.skip_nonfinite,
               "skip a step whose loss or gradient is not finite, and count it (default: stop there)");
    c.add_option_function<std::string>(
         "--loss-scale",
         [&t](const std::string &text) {
           // "dynamic", "dynamic:S0" or a fixed scale S.
           const bool dynamic = text.rfind("dynamic", 0) == 0;
           const std::string number = dynamic ? (text.size() > 8 && text[7] == ':' ? text.substr(8) : "") : text;
           if (dynamic && text.size() > 7 && number.empty())
             throw CLI::ValidationError("--loss-scale", "expected dynamic, dynamic:S0 or a scale, got '" + text + "'");
           double v = 0;
           if (!number.empty()) {
             char *end = nullptr;
             errno = 0;
             v = std::strtod(number.c_str(), &end);
             if (*end || errno || !(v > 0) || !std::isfinite(v))
               throw CLI::ValidationError("--loss-scale", "a scale must be a finite number above 0, got '" + number + "'");
           }
           if (dynamic) {
             t.loss_scale = -1;
             if (v > 0) t.loss_scale_start = v;
           } else {
             t.loss_scale = v;
           }
         },
         "what backward multiplies the loss by, and the gradients are divided by: a fixed S, or dynamic[:S0] "
         "(f16's default, from 65536: halved and the step skipped when the gradients overflow, doubled after "
         "2000 good steps; docs/precision.md)")
        ->type_name("S|dynamic[:S0]");
    addMaxMemory(c, t.max_memory);
    c.add_flag("--tf32", cuda_.tf32, "cuda: float GEMMs may use TF32 tensor cores");
    c.add_flag("--cuda-graphs", cuda_.cudaGraphs, "cuda: replay each loop as a CUDA graph");
  }

  int run() override {
    CompileOptions o;
    if (!compileOptionsOf(common_, o)) return 1;
    if (o.dtype == DType::F64) {
      fmt::print(stderr, "rnnc: error: rnnc train trains in f32, or in bf16 or f16 storage with f32 master weights "
                         "(docs/precision.md); not in f64\n");
      return 1;
    }
    o.lengths = train_.min_bptt > 0;
    auto device = resolveDevice(device_);
    if (!device) return 1;
    auto program = loadForTask(common_.file, o, train_.task);
    if (!program) return 1;
    // Training needs neither dL/dx nor the initial states' gradients.
    o.gradients = Gradients::Params;
    const rnnc_model *m = loadEngine(program->compiled(), o, *device, cuda_);
    if (!m) return 1;
    // Refused before the params are drawn: the plan counts them.
    if (std::string error; !rt::checkTrainingPlan(*m, train_, error)) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return 1;
    }
    std::vector<float> params;
    if (!params_.empty()) {
      std::string error;
      auto tensors = io::readSafetensors(params_, error);
      if (!tensors) {
        fmt::print(stderr, "rnnc: error: {}\n", error);
        return 1;
      }
      if (!flatParams(*m, *tensors, params_, params)) return 1;
    } else if (!flatParams(*m, initialParams(*program->compiled().entity, train_.seed), "the initial params", params)) {
      return 1;
    }
    return rt::train(*m, params, train_);
  }

private:
  CommonOptions common_;
  rt::TrainOptions train_;
  std::string params_, device_ = "auto";
  codegen::CudaOptions cuda_;
};

} // namespace

std::unique_ptr<Command> addTrainCommand(CLI::App &app) { return std::make_unique<TrainCommand>(app); }

} // namespace rnnc
