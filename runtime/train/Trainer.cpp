// The training loop (trainer.h). A run, in order:
//   1. check the model (ABI, float32, a loss, the param count) and the sizes;
//   2. make the task (binds the ports) and the optimizer;
//   3. with --resume, load the checkpoint: params, optimizer state, step, the
//      task's RNG and data position, carried states;
//   4. check the plan's bytes against max_memory, then allocate the workspace
//      once (64-byte aligned, workspace_bytes(T, B));
//   5. each step: the task's next segment; forward (with the carried states
//      when the task carries them, zeros after the streams wrap); the loss,
//      backward from the model's own loss; a non-finite loss or gradient stops
//      the run naming the step and the first bad param (or, with
//      skip_nonfinite, skips the step); clipping; the optimizer step (a param
//      that becomes non-finite stops the run); the final states kept for the
//      next segment; the metric from output 0; progress and the CSV row; a
//      checkpoint every save_every steps (the log flushed first) and at the end;
//   6. after every eval_every-th step and the last: the held-out evaluation
//      (HeldOut below), before the step's progress and CSV row.
// Everything runs in a fixed order on the CPU, so the losses depend only on
// the seed and the checkpoint a run starts from (not on the evaluations).
#include "rnnc/trainer.h"

#include "rnnc/device.h"

#include "io/Array.h"
#include "rnnc/checkpoint.h"
#include "rnnc/memory.h"
#include "rnnc/optim.h"
#include "rnnc/progress.h"
#include "rnnc/tasks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>

namespace rnnc::rt {
namespace {

/// Arrays the loop allocates beyond the workspace are refused above this.
constexpr int64_t kMaxBufferBytes = int64_t(1) << 34;

/// Step 1: what the loop needs of the model and the options.
bool checkRun(const rnnc_model &m, const std::vector<float> &params, const TrainOptions &o, std::string &error) {
  if (m.abi_version != RNNC_ABI_VERSION) {
    error = fmt::format("model '{}' has ABI version {}, this runtime drives version {}", m.name, m.abi_version,
                        RNNC_ABI_VERSION);
    return false;
  }
  const bool half = m.dtype == RNNC_DTYPE_BF16 || m.dtype == RNNC_DTYPE_F16;
  if (!(m.dtype == RNNC_DTYPE_F32 && m.real_bytes == 4) && !(half && m.real_bytes == 2)) {
    error = fmt::format("model '{}' computes in {}-byte reals; training runs in float32 only (compile it for float)",
                        m.name, m.real_bytes);
    return false;
  }
  if (!m.has_loss) {
    error = fmt::format("model '{}' has no loss to train (add `loss = ...` to the model)", m.name);
    return false;
  }
  if (static_cast<int64_t>(params.size()) != m.param_elements) {
    error = fmt::format("model '{}' has {} param values, {} were given", m.name, m.param_elements, params.size());
    return false;
  }
  if (o.steps < 0 || o.save_every < 0) {
    error = fmt::format("the steps and the save interval must not be negative, not {} and {}", o.steps, o.save_every);
    return false;
  }
  if (o.eval_every < 0 || o.eval_batches < 0) {
    error = fmt::format("--eval-every and --eval-batches must not be negative, not {} and {}", o.eval_every,
                        o.eval_batches);
    return false;
  }
  if (o.batch < 1 || o.bptt < 1) {
    error = fmt::format("the batch and the BPTT length must be positive, not {} and {}", o.batch, o.bptt);
    return false;
  }
  auto fits = [&](const rnnc_tensor &t, int64_t rows, const char *what) {
    auto bytes = io::checkedBytes({rows, o.batch, t.shape[0]}, 4);
    if (bytes && *bytes <= kMaxBufferBytes) return true;
    error = fmt::format("{} '{}' of {} steps x {} sequences x {} floats is too large ({} at most)", what, t.name, rows,
                        o.batch, t.shape[0], bytesText(static_cast<double>(kMaxBufferBytes)));
    return false;
  };
  for (int k = 0; k < m.n_inputs; ++k)
    if (!fits(m.inputs[k], o.bptt, "input")) return false;
  for (int k = 0; k < m.n_outputs; ++k)
    if (!fits(m.outputs[k], o.bptt, "output")) return false;
  for (int k = 0; k < m.n_states; ++k)
    if (!fits(m.states[k], m.states[k].depth, "state")) return false;
  return true;
}

/// "nan" (never "-nan"), "inf", "-inf" or the number.
std::string valueText(double v) { return std::isnan(v) ? "nan" : fmt::format("{:g}", v); }

/// "'h1.W_hh' [3, 1]": param p's element i, by its indices.
std::string elementName(const rnnc_tensor &p, int64_t i) {
  std::string at;
  for (int32_t d = p.rank - 1; d >= 0; --d) {
    at = std::to_string(i % p.shape[d]) + (at.empty() ? "" : ", ") + at;
    i /= p.shape[d];
  }
  return fmt::format("'{}' [{}]", p.name, at);
}

/// The first param (in the model's order) with a value that is not finite in
/// `values`, a flat array laid out as the params: "'h1.W_hh' [3, 1] is nan";
/// "" when all are finite.
std::string firstNonFinite(const rnnc_model &m, const float *values) {
  for (int32_t k = 0; k < m.n_params; ++k) {
    const rnnc_tensor &p = m.params[k];
    for (int64_t i = 0, n = tensorElements(p); i < n; ++i)
      if (!std::isfinite(values[p.offset + i])) return elementName(p, i) + " is " + valueText(values[p.offset + i]);
  }
  return "";
}

/// The param value of largest magnitude: "'h1.W_hh' [3, 1] = 1.2e+31" (what a
/// non-finite loss with finite params most often comes from).
std::string largestParam(const rnnc_model &m, const float *values) {
  std::string name;
  float largest = -1;
  for (int32_t k = 0; k < m.n_params; ++k) {
    const rnnc_tensor &p = m.params[k];
    for (int64_t i = 0, n = tensorElements(p); i < n; ++i)
      if (std::fabs(values[p.offset + i]) > largest) {
        largest = std::fabs(values[p.offset + i]);
        name = fmt::format("{} = {:g}", elementName(p, i), values[p.offset + i]);
      }
  }
  return name;
}

/// Everything a run owns between steps.
struct Run {
  const rnnc_model &m;
  const TrainOptions &o;
  std::vector<float> &params;
  std::unique_ptr<Task> task;
  std::unique_ptr<Optimizer> opt;
  std::vector<std::vector<float>> carry;  // per state [depth][B][w]; empty when the task carries none
  int64_t step = 0;

  Checkpoint snapshot() const {
    Checkpoint c;
    c.task = task->spec();
    c.optimizer = opt->name();
    c.step = step;
    c.batch = o.batch;
    c.rng = task->rngState();
    c.position = task->position();
    c.params = params;
    c.slots = opt->slots();
    c.carry = carry;
    c.skipped = skipped;
    if (dynamicScale) {
      c.loss_scale = scale;
      c.scale_good_steps = goodSteps;
      c.scale_skips = scaleSkips;
    }
    return c;
  }

  /// Step 3.
  bool resume(std::string &error) {
    Checkpoint c = snapshot();
    if (!loadCheckpoint(o.resume, m, c, error)) return false;
    if (c.step > o.steps) {
      error = fmt::format("{}: the checkpoint is at step {}, past the {} steps asked for", o.resume, c.step, o.steps);
      return false;
    }
    if (!task->setRngState(c.rng)) {
      error = fmt::format("{}: the task RNG state in the checkpoint is malformed", o.resume);
      return false;
    }
    if (!task->setPosition(c.position, error)) {
      error = fmt::format("{}: {}", o.resume, error);
      return false;
    }
    params = std::move(c.params);
    opt->slots() = std::move(c.slots);
    opt->setSteps(c.step);
    carry = std::move(c.carry);
    step = c.step;
    skipped = c.skipped;
    if (dynamicScale && c.loss_scale > 0) { // where the checkpointed run's scaling stood
      scale = c.loss_scale;
      goodSteps = c.scale_good_steps;
      scaleSkips = c.scale_skips;
    }
    return true;
  }

  bool save(std::string &error) const { return saveCheckpoint(o.save, m, snapshot(), error); }

  /// Whether a step whose loss or gradient is not finite (`what`) may be
  /// skipped; if not, `error` says where training stopped.
  bool nonFinite(int64_t step, const std::string &what, std::string &error) {
    if (!o.skip_nonfinite) {
      error = fmt::format("step {}: {}; training stopped (try a smaller --lr or --clip, or --skip-nonfinite)", step, what);
      return false;
    }
    if (!o.quiet && skipped < 10)
      fmt::print(stderr, "rnnc: warning: step {}: {}; step skipped{}\n", step, what,
                 skipped == 9 ? " (further skips are only counted)" : "");
    ++skipped;
    return true;
  }
  int64_t skipped = 0;
  // Loss scaling: backward differentiates scale · loss; the gradients are divided back.
  bool dynamicScale = false;
  double scale = 1;
  int64_t goodSteps = 0;  // since the scale last changed
  int64_t scaleSkips = 0; // steps dynamic scaling skipped, a resumed run's included
};

/// The held-out evaluation (run with eval_batches > 0): its own task on data
/// the training never reads (TaskData::HeldOut), replayed from its start at
/// every evaluation so that each sees the same segments; its own carried
/// states (zero at the start of each evaluation, carried from segment to
/// segment when the task carries them). Forward only, in eval mode (no masks:
/// dropout is the identity, zoneout its expectation). It shares the run's
/// workspace, params, inputs and output 0, which nothing reads across steps,
/// and leaves the training's task, carried states and optimizer alone.
struct HeldOut {
  std::unique_ptr<Task> task;
  std::mt19937_64 start;                  // the task's RNG before its first segment
  std::vector<std::vector<float>> carry;  // per state [depth][B][w]; empty when the task carries none
  std::vector<std::vector<float>> finals; // what forward writes into, the next segment's carry
  Segment segment;

  /// Back to the first segment, with zero states.
  bool rewind(std::string &error) {
    task->rng() = start;
    for (auto &c : carry) std::fill(c.begin(), c.end(), 0.0f);
    return task->setPosition(0, error);
  }
};

/// Makes the evaluation of a run of `o` (null when o.eval_batches is 0, or on error).
std::unique_ptr<HeldOut> makeHeldOut(const rnnc_model &m, const TrainOptions &o, std::string &error) {
  if (o.eval_batches == 0) return nullptr;
  auto held = std::make_unique<HeldOut>();
  held->task = makeTask(o.task, m, o.bptt, o.batch, o.seed, error, o.min_bptt, TaskData::HeldOut);
  if (!held->task) return nullptr;
  held->start = held->task->rng();
  if (held->task->carriesState())
    for (int k = 0; k < m.n_states; ++k)
      held->carry.emplace_back(static_cast<size_t>(m.states[k].depth * o.batch * m.states[k].shape[0]), 0.0f);
  held->finals = held->carry;
  return held;
}

/// Whether an evaluation follows `step`: every eval_every steps and after the last.
bool evaluationDue(const TrainOptions &o, int64_t step) {
  return o.eval_batches > 0 && (step == o.steps || (o.eval_every > 0 && step % o.eval_every == 0));
}

/// ", evaluated in eval mode on 8 held-out segments (the last 4096 bytes) every 100 steps and at the end".
std::string evaluationText(const Run &r) {
  if (r.o.eval_batches == 0) return "";
  const int64_t held = r.task->heldOut();
  return fmt::format(", evaluated in eval mode on {} held-out segment{}{} {}", r.o.eval_batches,
                     r.o.eval_batches == 1 ? "" : "s", held ? fmt::format(" (the last {} bytes)", held) : "",
                     r.o.eval_every > 0 ? fmt::format("every {} steps and at the end", r.o.eval_every) : "at the end");
}

std::string startLine(const Run &r) {
  std::string line = fmt::format("train {}: model '{}', {} params, batch {}, bptt {}, {} lr {}", r.task->spec(),
                                 r.m.name, r.m.param_elements, r.o.batch, r.o.bptt, r.opt->name(),
                                 r.opt->learningRate());
  if (r.task->vocabulary() > 0)
    line += fmt::format(", vocabulary {} (unigram entropy {:.3f} bits)", r.task->vocabulary(), r.task->unigramBits());
  line += evaluationText(r);
  if (r.step > 0) line += fmt::format(", resuming at step {} from {}", r.step, r.o.resume);
  return line;
}

bool trainChecked(const rnnc_model &m, std::vector<float> &params, const TrainOptions &o, TrainResult &result,
                  std::string &error) {
  result = TrainResult{};
  if (!checkRun(m, params, o, error)) return false;
  // Step 4's check comes first: the optimizer's slots are part of the plan.
  if (!checkTrainingPlan(m, o, error)) return false;
  Run r{m, o, params, nullptr, nullptr, {}, 0};
  r.dynamicScale = o.loss_scale < 0 || (o.loss_scale == 0 && m.dtype == RNNC_DTYPE_F16);
  r.scale = o.loss_scale > 0 ? o.loss_scale : r.dynamicScale ? o.loss_scale_start : 1;
  const int64_t T = o.bptt, B = o.batch;
  r.task = makeTask(o.task, m, T, B, o.seed, error, o.min_bptt, o.eval_batches > 0 ? TaskData::Training : TaskData::All);
  if (!r.task) return false;
  std::unique_ptr<HeldOut> held = makeHeldOut(m, o, error);
  if (o.eval_batches > 0 && !held) return false;
  r.opt = makeOptimizer(o.optimizer, m.param_elements, o.lr, o.momentum, error);
  if (!r.opt) return false;
  if (r.task->carriesState()) {
    for (int k = 0; k < m.n_states; ++k)
      r.carry.emplace_back(static_cast<size_t>(m.states[k].depth * B * m.states[k].shape[0]), 0.0f);
  }
  if (!o.resume.empty() && !r.resume(error)) return false;
  result.metric_name = r.task->metricName();
  result.steps_done = r.step;

  const int64_t wsBytes = m.workspace_bytes(T, B);
  // Params, gradients and the optimizer stay on the host; a CUDA model gets
  // device copies of what it reads and writes each step.
  // A 16-bit model (--dtype bf16|f16) gets its own copies of every float
  // array, rounded from the float32 params (the master copies the optimizer
  // updates), inputs and states; its gradients come back as floats.
  ModelMemory mem(m);
  RealArrays reals(m, mem);
  void *ws = mem.alloc(wsBytes);
  std::vector<float> grads(static_cast<size_t>(m.param_elements));
  std::vector<float> output(static_cast<size_t>(T * B * m.outputs[0].shape[0]));
  const int64_t paramCount = m.param_elements, outputCount = static_cast<int64_t>(output.size());
  void *dParams = reals.mirror(params.data(), paramCount), *dGrads = reals.mirror(grads.data(), paramCount);
  void *dOutput = reals.mirror(output.data(), outputCount);
  std::vector<void *> dInputs, dStates;
  for (int32_t k = 0; k < m.n_inputs && (mem.onDevice() || reals.converts()); ++k)
    dInputs.push_back(m.inputs[k].is_index ? mem.alloc(T * B * 4) : reals.alloc(T * B * m.inputs[k].shape[0]));
  auto count = [](const std::vector<float> &v) { return static_cast<int64_t>(v.size()); };
  for (auto &c : r.carry) dStates.push_back(reals.mirror(c.data(), count(c)));
  // What forward writes: the first output and the final states (the next
  // segment's carry, once the step is kept). The loss is read_loss's mean,
  // in double (forward's would be a real).
  std::vector<std::vector<float>> finals = r.carry;
  std::vector<void *> dFinals, dOutputs(static_cast<size_t>(m.n_outputs), nullptr);
  for (auto &f : finals) dFinals.push_back(reals.mirror(f.data(), count(f)));
  dOutputs[0] = dOutput;
  // The evaluation's states where the model reads and writes them (its own, not the training's).
  std::vector<void *> dHeldStates, dHeldFinals;
  for (size_t k = 0; held && k < held->carry.size(); ++k) {
    dHeldStates.push_back(reals.mirror(held->carry[k].data(), count(held->carry[k])));
    dHeldFinals.push_back(reals.mirror(held->finals[k].data(), count(held->finals[k])));
  }
  if (!ws || !dParams || !dGrads || !dOutput || !mem.error().empty()) {
    error = fmt::format("model '{}': {}", m.name, mem.error());
    return false;
  }
  auto moved = [&](bool copied) {
    if (!copied) error = fmt::format("model '{}': {}", m.name, mem.error());
    return copied;
  };
  std::vector<const void *> states(dStates.begin(), dStates.end());
  std::vector<const void *> heldStates(dHeldStates.begin(), dHeldStates.end());
  Segment segment;
  // The inputs of a segment where the model reads them: uploaded on CUDA.
  auto placeInputs = [&](const Segment &s, std::vector<const void *> &inputs) {
    inputs = s.pointers;
    for (size_t k = 0; k < dInputs.size(); ++k) {
      const bool placed = m.inputs[k].is_index
                              ? mem.upload(dInputs[k], s.pointers[k], T * B * 4)
                              : reals.upload(dInputs[k], static_cast<const float *>(s.pointers[k]),
                                             T * B * m.inputs[k].shape[0]);
      if (!moved(placed)) return false;
      inputs[k] = dInputs[k];
    }
    return true;
  };
  // Step 6: eval_batches segments of the held-out data with the params as they
  // are after `step`; the loss and metric, each the mean over the segments.
  auto evaluate = [&](int64_t step, Evaluation &e) {
    if (!held->rewind(error)) return false;
    if (!moved(reals.upload(dParams, params.data(), paramCount))) return false;
    const rnnc_run_options evalMode{0, o.seed, 0, nullptr, 0};
    double loss = 0, metric = 0;
    std::vector<const void *> inputs;
    for (int64_t k = 0; k < o.eval_batches; ++k) {
      held->task->next(held->segment);
      if (held->task->wrapped())
        for (auto &c : held->carry) std::fill(c.begin(), c.end(), 0.0f);
      if (!placeInputs(held->segment, inputs)) return false;
      for (size_t j = 0; j < dHeldStates.size(); ++j)
        if (!moved(reals.upload(dHeldStates[j], held->carry[j].data(), count(held->carry[j])))) return false;
      if (m.forward(ws, T, B, dParams, inputs.data(), held->carry.empty() ? nullptr : heldStates.data(),
                    dOutputs.data(), dHeldFinals.data(), nullptr, &evalMode, nullptr)) {
        error = fmt::format("model '{}': forward failed in the evaluation after step {}: {}", m.name, step,
                            m.last_error());
        return false;
      }
      const double segmentLoss = m.read_loss(ws, T, B, nullptr);
      for (size_t j = 0; j < held->carry.size(); ++j) {
        if (!moved(reals.download(held->finals[j].data(), dHeldFinals[j], count(held->finals[j])))) return false;
        held->carry[j] = held->finals[j];
      }
      if (!moved(reals.download(output.data(), dOutput, outputCount))) return false;
      loss += segmentLoss;
      metric += held->task->metric(output.data(), segmentLoss);
    }
    e = Evaluation{step, loss / static_cast<double>(o.eval_batches), metric / static_cast<double>(o.eval_batches)};
    result.evaluations.push_back(e);
    return true;
  };

  if (!o.quiet) fmt::print(stderr, "{}\n", startLine(r));
  Progress progress(r.step, o.steps, r.task->metricName(), o.quiet ? nullptr : stderr, isTerminal(stderr));
  if (!o.log.empty() && !progress.openLog(o.log, !o.resume.empty(), error)) return false;
  // A checkpoint every save_every steps; the log first has every row it has.
  auto checkpointIfDue = [&](int64_t step) {
    if (o.save.empty() || o.save_every <= 0 || step % o.save_every != 0 || step >= o.steps) return true;
    progress.flushLog();
    return r.save(error);
  };
  // The step's progress and CSV row, after its evaluation if one is due.
  auto report = [&](int64_t step, double loss, double metric, double norm) {
    Evaluation e;
    const bool evaluated = evaluationDue(o, step);
    if (evaluated && !evaluate(step, e)) return false;
    progress.update(step, loss, metric, norm, r.opt->learningRate(), evaluated ? &e : nullptr);
    return true;
  };
  const bool dynamicScale = r.dynamicScale;
  double &scale = r.scale;
  int64_t &goodSteps = r.goodSteps;
  while (r.step < o.steps) {
    const int64_t step = r.step + 1;
    r.task->next(segment);
    if (r.task->wrapped())
      for (auto &c : r.carry) std::fill(c.begin(), c.end(), 0.0f);
    std::vector<const void *> inputs;
    if (!placeInputs(segment, inputs)) return false;
    for (size_t k = 0; k < dStates.size(); ++k)
      if (!moved(reals.upload(dStates[k], r.carry[k].data(), count(r.carry[k])))) return false;
    if (!moved(reals.upload(dParams, params.data(), paramCount))) return false;
    // Training mode: each step draws its own masks (dropout, zoneout) from the run's seed.
    // Text with --min-bptt: each sequence's length (a --lengths build carries the state after it).
    const rnnc_run_options options{1, o.seed, static_cast<uint64_t>(step),
                                   segment.lengths.empty() ? nullptr : segment.lengths.data(), scale};
    if (m.forward(ws, T, B, dParams, inputs.data(), r.carry.empty() ? nullptr : states.data(), dOutputs.data(),
                  dFinals.data(), nullptr, &options, nullptr)) {
      error = fmt::format("model '{}': forward failed at step {}: {}", m.name, step, m.last_error());
      return false;
    }
    const double loss = m.read_loss(ws, T, B, nullptr);
    double norm = 0;
    std::string bad;
    bool overflowed = false; // dynamic loss scaling skips the step
    if (!std::isfinite(loss)) {
      const std::string first = firstNonFinite(m, params.data()), largest = largestParam(m, params.data());
      bad = "the loss is " + valueText(loss) +
            (!first.empty()      ? " (param " + first + ")"
             : !largest.empty() ? " (the params are finite; the largest is " + largest + ")"
                                : std::string());
    } else {
      if (m.backward(ws, T, B, dParams, inputs.data(), nullptr, nullptr, dGrads, nullptr, nullptr, nullptr)) {
        error = fmt::format("model '{}': backward failed at step {}: {}", m.name, step, m.last_error());
        return false;
      }
      if (!moved(reals.download(grads.data(), dGrads, paramCount))) return false;
      if (scale != 1)
        for (float &g : grads) g = static_cast<float>(g / scale);
      norm = clipGradNorm(grads.data(), m.param_elements, o.clip);
      if (!std::isfinite(norm) && dynamicScale) {
        // An overflow of the scaled gradients: skipped as a non-finite step is, at half the scale.
        if (!o.quiet && r.scaleSkips < 10)
          fmt::print(stderr, "rnnc: warning: step {}: the gradients overflowed at loss scale {:g}; step skipped, "
                             "the scale halved{}\n",
                     step, scale, r.scaleSkips == 9 ? " (further skips are only counted)" : "");
        ++r.scaleSkips;
        scale /= 2;
        goodSteps = 0;
        overflowed = true;
      } else if (!std::isfinite(norm)) {
        const std::string first = firstNonFinite(m, grads.data());
        bad = first.empty() ? "the gradient norm is " + valueText(norm) : "the gradient of " + first;
      } else if (dynamicScale && ++goodSteps == TrainOptions::kLossScaleInterval) {
        scale *= 2;
        goodSteps = 0;
      }
    }
    if (overflowed || !bad.empty()) {
      // Skipped: params, optimizer state and carried states stay as they
      // were; the data moves on, and the step counts (Adam's too), so that a
      // resumed run skips the same steps.
      if (!overflowed && !r.nonFinite(step, bad, error)) return false;
      r.opt->setSteps(step);
      r.step = step;
      result.losses.push_back(loss);
      result.steps_done = step;
      if (!report(step, loss, std::nan(""), norm) || !checkpointIfDue(step)) return false;
      continue;
    }
    r.opt->step(params.data(), grads.data());
    if (const std::string first = firstNonFinite(m, params.data()); !first.empty()) {
      error = fmt::format("step {}: after the update, param {}; training stopped (try a smaller --lr or --clip)", step,
                          first);
      return false;
    }
    for (size_t k = 0; k < r.carry.size(); ++k) {
      if (!moved(reals.download(finals[k].data(), dFinals[k], count(finals[k])))) return false;
      r.carry[k] = finals[k];
    }
    if (!moved(reals.download(output.data(), dOutput, outputCount))) return false;
    const double metric = r.task->metric(output.data(), loss);
    r.step = step;
    result.losses.push_back(loss);
    result.steps_done = step;
    result.last_loss = loss;
    result.last_metric = metric;
    if (!report(step, loss, metric, norm) || !checkpointIfDue(step)) return false;
  }
  result.skipped = r.skipped;
  result.loss_scale = scale;
  result.scale_skips = r.scaleSkips;
  progress.finish();
  if (!result.losses.empty()) result.first_loss = result.losses.front();
  if (!o.save.empty() && !r.save(error)) return false;
  if (!o.quiet && !result.losses.empty())
    fmt::print(stderr, "final {} {:.4f}, loss {:.4f} after {} steps{}{}\n", result.metric_name, result.last_metric,
               result.last_loss, result.steps_done,
               r.skipped ? fmt::format(" ({} skipped as non-finite)", r.skipped)
               : result.scale_skips
                   ? fmt::format(" ({} skipped by loss scaling, now {:g})", result.scale_skips, scale)
                   : "",
               result.evaluations.empty() ? ""
                                          : fmt::format("; eval {} {:.4f}, loss {:.4f}", result.metric_name,
                                                        result.evaluations.back().metric,
                                                        result.evaluations.back().loss));
  return true;
}

}  // namespace

double trainingPlanBytes(const rnnc_model &m, const TrainOptions &o) {
  PlanParts parts;
  parts.params = 2 + (o.optimizer == "sgd" ? 1 : 2);  // params, gradients, the optimizer's slots
  parts.inputs = o.eval_batches > 0 ? 2 : 1;           // the evaluation's segment too
  parts.outputs = 1;
  parts.firstOutputOnly = true;
  parts.states = true;
  return planBytes(m, o.bptt, o.batch, parts);
}

bool checkTrainingPlan(const rnnc_model &m, const TrainOptions &o, std::string &error) {
  const double plan = trainingPlanBytes(m, o);
  if (plan < 0) {
    error = fmt::format("model '{}': the workspace for {} steps x {} sequences is too large "
                        "(over 64 TiB, or T x B over 2^31 - 1 rows)",
                        m.name, o.bptt, o.batch);
    return false;
  }
  const std::string why =
      planShortfall(m, plan, fmt::format("training with --batch {} --bptt {}", o.batch, o.bptt), o.max_memory);
  if (!why.empty()) error = fmt::format("model '{}': {}", m.name, why);
  return why.empty();
}

int train(const rnnc_model &m, std::vector<float> &params, const TrainOptions &o, TrainResult *result) {
  TrainResult local;
  std::string error;
  if (!trainChecked(m, params, o, result ? *result : local, error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return 1;
  }
  return 0;
}

}  // namespace rnnc::rt
