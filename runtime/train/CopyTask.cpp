// The copy-memory task (Arjovsky, Shah & Bengio 2016) with S = 10 symbols.
// Per sequence of T >= 2S+1 steps (tokens, targets):
//   1. steps [0, S): S symbols drawn from 1..8;
//   2. then blanks (0) up to step T-S-1, which holds the delimiter 9;
//   3. the last S steps are blanks; their targets are the S symbols, every
//      other target is 0 (blank).
// Metric: accuracy of argmax(output 0) over the last S steps. Fresh sequences
// every segment; no state is carried.
#include "train/TaskPorts.h"

#include <fmt/format.h>

#include <algorithm>

namespace rnnc::rt {
namespace {

constexpr int64_t kSymbols = 10;    // S
constexpr int64_t kAlphabet = 10;   // 0 blank, 1..8 symbols, 9 delimiter
constexpr int32_t kDelimiter = 9;

class CopyTask final : public Task {
public:
  CopyTask(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed, int tokens, int targets)
      : Task(m, T, B, seed), tokens_(tokens), targets_(targets) {}

  std::string spec() const override { return "copy"; }
  std::string metricName() const override { return "accuracy"; }

  void next(Segment &s) override {
    shape(s);
    int32_t *x = s.index[tokens_].data(), *y = s.index[targets_].data();
    std::fill(x, x + T_ * B_, 0);
    std::fill(y, y + T_ * B_, 0);
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t i = 0; i < kSymbols; ++i) {
        const auto symbol = static_cast<int32_t>(1 + below(8));
        x[i * B_ + b] = symbol;
        y[(T_ - kSymbols + i) * B_ + b] = symbol;
      }
      x[(T_ - kSymbols - 1) * B_ + b] = kDelimiter;
    }
    last_ = s.index[targets_];
  }

  double metric(const float *output, double) const override {
    const int64_t w = m_.outputs[0].shape[0];
    int64_t right = 0;
    for (int64_t t = T_ - kSymbols; t < T_; ++t) {
      for (int64_t b = 0; b < B_; ++b) {
        const float *logits = output + (t * B_ + b) * w;
        const int64_t best = std::max_element(logits, logits + w) - logits;
        right += best == last_[t * B_ + b];
      }
    }
    return static_cast<double>(right) / static_cast<double>(kSymbols * B_);
  }

private:
  int tokens_, targets_;
  std::vector<int32_t> last_;  // the targets of the last segment
};

}  // namespace

std::unique_ptr<Task> makeCopyTask(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed, std::string &error) {
  if (T < 2 * kSymbols + 1) {
    error = fmt::format("task copy needs at least {} steps ({} symbols, the delimiter, {} answers), not {}",
                        2 * kSymbols + 1, kSymbols, kSymbols, T);
    return nullptr;
  }
  PortBinder ports(m, "copy");
  auto wide = [](const rnnc_tensor &t) { return t.shape[0] >= kAlphabet; };
  const std::string range = fmt::format("of range at least {}", kAlphabet);
  int tokens = ports.take(true, wide, "an index input " + range + " (tokens)", error);
  if (tokens < 0) return nullptr;
  int targets = ports.take(true, wide, "a second index input " + range + " (targets)", error);
  if (targets < 0 || !ports.allBound(error) ||
      !ports.output(wide, fmt::format("logits of width at least {}", kAlphabet), error))
    return nullptr;
  return std::make_unique<CopyTask>(m, T, B, seed, tokens, targets);
}

}  // namespace rnnc::rt
