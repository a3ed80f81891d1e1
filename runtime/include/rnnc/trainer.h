// The CPU training loop: truncated BPTT over B parallel streams of a
// compiled model (rnnc/model.h, float32), fed by a task (rnnc/tasks.h),
// updated by an optimizer (rnnc/optim.h), with progress, a CSV log, and
// checkpoints (rnnc/checkpoint.h) from which a resumed run continues with the
// same losses, bit for bit, as one that never stopped; and held-out
// evaluations in eval mode (no masks, forward only) on data the training never
// reads, which change nothing the training reads. See docs/training.md.
#pragma once

#include "rnnc/model.h"
#include "rnnc/progress.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rnnc::rt {

struct TrainOptions {
  std::string task;                 // "adding", "copy", "text:PATH"
  int64_t batch = 32, bptt = 50, steps = 1000;
  int64_t min_bptt = 0;             // text: each sequence's segment runs a length uniform in [min_bptt, bptt]; 0: bptt
  std::string optimizer = "adam";   // or "sgd"
  double lr = 0;                    // 0: the optimizer's default (adam 1e-3, sgd 0.1)
  double momentum = 0.9, clip = 1.0;
  uint64_t seed = 0;
  std::string save, resume, log;    // checkpoint out, checkpoint in, CSV log
  int64_t save_every = 0;           // 0: save only at the end (when save is set)
  bool quiet = false;               // no start line, progress or final line (errors still print)
  bool skip_nonfinite = false;      // skip a step whose loss or gradient is not finite (else: stop)
  int64_t max_memory = 0;           // bytes a run may allocate; 0: the machine's physical memory
  int64_t eval_every = 0;           // steps between held-out evaluations; 0: only after the last step
  int64_t eval_batches = 8;         // segments per evaluation; 0: no evaluation (text: all of it trains)
  /// Loss scaling (docs/precision.md): > 0 a fixed scale; < 0 dynamic; 0 (the
  /// default) dynamic for an f16 model, none for others. Dynamic scaling
  /// starts at loss_scale_start, halves on a
  /// gradient that is not finite (the step skipped) and doubles after
  /// kLossScaleInterval good steps in a row. A checkpoint keeps where it stands:
  /// a resumed run goes on with the same scale.
  double loss_scale = 0;
  double loss_scale_start = 65536;
  static constexpr int64_t kLossScaleInterval = 2000;
};

struct TrainResult {
  int64_t steps_done = 0;           // the step reached (counting steps before a resume)
  double first_loss = 0, last_loss = 0, last_metric = 0;
  std::string metric_name;
  std::vector<double> losses;       // the loss of each step this call ran (a skipped step's too)
  int64_t skipped = 0;              // steps skipped as non-finite (--skip-nonfinite), resumed runs included
  int64_t scale_skips = 0;          // steps dynamic loss scaling skipped (an overflow: the scale halved), a resumed run's too
  double loss_scale = 1;            // the loss scale after the last step
  std::vector<Evaluation> evaluations;  // the held-out evaluations this call ran, in order
};

/// The bytes a run of `m` with `o` allocates: the workspace, params,
/// gradients and optimizer slots, a segment of inputs and output 0, the
/// carried states. -1 when the workspace is too large to say (workspace_bytes 0).
double trainingPlanBytes(const rnnc_model &m, const TrainOptions &o);

/// Whether the plan of a run of `m` with `o` fits in o.max_memory (else the
/// machine; a CUDA model without a limit always fits). False with `error`
/// "model 'X': ..." naming the figures, or saying the workspace is too large.
/// train() checks it too; a caller may check before drawing the params.
bool checkTrainingPlan(const rnnc_model &m, const TrainOptions &o, std::string &error);

/// Trains `m` (float32, or bf16 and f16 with float32 master weights) on the task for `o.steps` steps in total.
/// params: the flat initial params (param_elements floats), overwritten with
/// the trained ones. Prints errors as one line "rnnc: error: ..." to stderr
/// and returns exit code 1; 0 on success. Progress goes to stderr.
int train(const rnnc_model &m, std::vector<float> &params, const TrainOptions &o, TrainResult *result = nullptr);

}  // namespace rnnc::rt
