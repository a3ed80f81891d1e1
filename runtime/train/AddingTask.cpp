// The adding problem (Hochreiter & Schmidhuber 1997, experiment 4), densely
// supervised. Per sequence of T steps:
//   1. each step's value is U(0,1); one marker at a random step of the first
//      half [0, T/2), one in the second half [T/2, T);
//   2. the input is (value, marker), marker 1 or 0;
//   3. the target at step t is the sum of the marked values seen up to t, so
//      at the last step it is the classic target (the sum of both).
// Metric: MSE of output 0 at the last step against the classic target
// (predicting the mean, 1, gives about 1/6 = 0.17). Sequences are fresh every
// segment; no state is carried.
#include "train/TaskPorts.h"

#include <fmt/format.h>

namespace rnnc::rt {
namespace {

class AddingTask final : public Task {
public:
  AddingTask(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed, int input, int target)
      : Task(m, T, B, seed), input_(input), target_(target), classic_(static_cast<size_t>(B)) {}

  std::string spec() const override { return "adding"; }
  std::string metricName() const override { return "mse"; }

  void next(Segment &s) override {
    shape(s);
    float *x = s.dense[input_].data(), *y = s.dense[target_].data();
    const int64_t half = T_ / 2;
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t t = 0; t < T_; ++t) {
        x[(t * B_ + b) * 2] = static_cast<float>(uniform());
        x[(t * B_ + b) * 2 + 1] = 0.0f;
      }
      const int64_t first = below(half), second = half + below(T_ - half);
      x[(first * B_ + b) * 2 + 1] = 1.0f;
      x[(second * B_ + b) * 2 + 1] = 1.0f;
      float sum = 0.0f;
      for (int64_t t = 0; t < T_; ++t) {
        if (t == first || t == second) sum += x[(t * B_ + b) * 2];
        y[t * B_ + b] = sum;
      }
      classic_[b] = sum;
    }
  }

  double metric(const float *output, double) const override {
    double sum = 0;
    for (int64_t b = 0; b < B_; ++b) {
      const double d = static_cast<double>(output[(T_ - 1) * B_ + b]) - classic_[b];
      sum += d * d;
    }
    return sum / static_cast<double>(B_);
  }

private:
  int input_, target_;
  std::vector<float> classic_;  // per sequence, of the last segment
};

}  // namespace

std::unique_ptr<Task> makeAddingTask(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed, std::string &error) {
  if (T < 2) {
    error = fmt::format("task adding needs at least 2 steps (one marker in each half), not {}", T);
    return nullptr;
  }
  PortBinder ports(m, "adding");
  auto width = [](int64_t w) { return [w](const rnnc_tensor &t) { return t.shape[0] == w; }; };
  int input = ports.take(false, width(2), "a dense input of width 2 (value, marker)", error);
  if (input < 0) return nullptr;
  int target = ports.take(false, width(1), "a dense input of width 1 (the target)", error);
  if (target < 0 || !ports.allBound(error) || !ports.output(width(1), "an output of width 1", error)) return nullptr;
  return std::make_unique<AddingTask>(m, T, B, seed, input, target);
}

}  // namespace rnnc::rt
