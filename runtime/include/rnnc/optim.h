// Optimizers over the flat float32 param array of a compiled model: SGD with
// momentum and Adam, plus gradient clipping by global L2 norm. An optimizer's
// state is a list of named flat arrays and a step count, so a checkpoint can
// save and restore it exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rnnc::rt {

/// One flat array of optimizer state, as long as the param array ("m", "v").
struct OptimizerSlot {
  std::string name;
  std::vector<float> values;
};

class Optimizer {
public:
  virtual ~Optimizer() = default;
  /// "sgd" or "adam": names the optimizer in checkpoints and messages.
  virtual const char *name() const = 0;
  /// One update of `params` from `grads` (both `elements()` floats); counts a step.
  virtual void step(float *params, const float *grads) = 0;

  int64_t elements() const { return elements_; }
  double learningRate() const { return lr_; }
  /// Steps taken (Adam's bias correction uses it).
  int64_t steps() const { return steps_; }
  void setSteps(int64_t steps) { steps_ = steps; }
  /// The state arrays, in a fixed order; a checkpoint writes and refills them.
  std::vector<OptimizerSlot> &slots() { return slots_; }
  const std::vector<OptimizerSlot> &slots() const { return slots_; }

protected:
  Optimizer(int64_t elements, double lr) : elements_(elements), lr_(lr) {}
  int64_t elements_;
  double lr_;
  int64_t steps_ = 0;
  std::vector<OptimizerSlot> slots_;
};

/// Classic momentum: v = mu*v + g; p -= lr*v. State: "v".
class Sgd final : public Optimizer {
public:
  Sgd(int64_t elements, double lr, double momentum);
  const char *name() const override { return "sgd"; }
  void step(float *params, const float *grads) override;

private:
  double momentum_;
};

/// Adam (Kingma & Ba 2015) with bias correction: m = b1*m + (1-b1)*g,
/// v = b2*v + (1-b2)*g², p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps).
/// State: "m", "v".
class Adam final : public Optimizer {
public:
  Adam(int64_t elements, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  const char *name() const override { return "adam"; }
  void step(float *params, const float *grads) override;

private:
  double beta1_, beta2_, eps_;
};

/// The learning rate used when none is given: adam 1e-3, sgd 0.1.
double defaultLearningRate(const std::string &optimizer);

/// "adam" or "sgd" over `elements` floats; `lr` 0 means the default. On an
/// unknown name returns null and sets `error` to one line.
std::unique_ptr<Optimizer> makeOptimizer(const std::string &name, int64_t elements, double lr, double momentum,
                                         std::string &error);

/// Scales `grads` so their global L2 norm is at most `maxNorm` (as
/// torch.nn.utils.clip_grad_norm_: by maxNorm / (norm + 1e-6) when norm >
/// maxNorm). Returns the norm before clipping (accumulated in double); a
/// non-finite norm is returned and nothing is scaled. maxNorm <= 0: no clipping.
double clipGradNorm(float *grads, int64_t n, double maxNorm);

}  // namespace rnnc::rt
