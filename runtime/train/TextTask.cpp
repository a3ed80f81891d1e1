// A character-level language model on any file (`text:PATH`).
//   1. The file (1 byte to 1 GiB, a regular file) is read whole; the
//      vocabulary is its distinct bytes, sorted, and each byte becomes its
//      rank in that list.
//   2. The text is cut into B equal streams of L = size / B bytes (the tail
//      left over is unused); L must be at least T+1.
//   3. Each segment takes the next T bytes of every stream as tokens and the
//      byte after each as its target; the trainer carries the final states of
//      a segment into the next.
//   4. When a stream has fewer than T+1 bytes left, all streams start over at
//      0 and the carried states are reset (wrapped() says so).
//   5. With a least length (`rnnc train --min-bptt`), each stream's segment
//      runs a length drawn uniformly in [least, T] (Segment::lengths; a
//      --lengths build carries the state after its last step) and the stream
//      moves on by that length. The lengths of segment k are a hash of (seed,
//      k, stream), so the position saved is k, the segments since the streams
//      last started over, and each stream's offset is replayed from it.
//   6. A run that evaluates holds out the text's tail (heldOutBytes: the last
//      10%, at least B·(T+1) bytes): its training task (TaskData::Training)
//      reads the rest, cut into B streams as above, and its evaluation task
//      (TaskData::HeldOut) the tail, cut alike, all T steps every segment.
//      The vocabulary is the whole file's either way.
// Metric: bits per character, the loss (nats, a mean) / ln 2.
#include "train/TaskPorts.h"

#include "io/Array.h"
#include "rnnc/workspace.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace rnnc::rt {
namespace {

constexpr uint64_t kMaxTextBytes = 1ull << 30;

class TextTask final : public Task {
public:
  TextTask(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed, std::string path, std::vector<uint8_t> text,
           int64_t vocabulary, double bits, int tokens, int targets, int64_t least, int64_t heldOut)
      : Task(m, T, B, seed), path_(std::move(path)), text_(std::move(text)), vocabulary_(vocabulary), bits_(bits),
        stream_(static_cast<int64_t>(text_.size()) / B), tokens_(tokens), targets_(targets), least_(least),
        heldOut_(heldOut), seed_(seed), offsets_(static_cast<size_t>(B), 0) {}

  /// "text:PATH", then " --min-bptt MIN" and " (tail held out)" where they
  /// apply: a checkpoint resumes only on the same data.
  std::string spec() const override {
    return "text:" + path_ + (least_ ? fmt::format(" --min-bptt {}", least_) : "") +
           (heldOut_ ? " (tail held out)" : "");
  }
  std::string metricName() const override { return "bpc"; }
  bool carriesState() const override { return true; }
  bool wrapped() const override { return wrapped_; }
  int64_t position() const override { return position_; }
  int64_t vocabulary() const override { return vocabulary_; }
  double unigramBits() const override { return bits_; }
  int64_t heldOut() const override { return heldOut_; }

  bool setPosition(int64_t position, std::string &error) override {
    const int64_t most = least_ ? stream_ / least_ : stream_; // segments: each moves a stream on by least_ or more
    if (position < 0 || position > most) {
      error = fmt::format("data position {} is outside the streams of {} bytes of {}", position, stream_, path_);
      return false;
    }
    position_ = position;
    if (least_) { // replay the lengths of the segments since the start
      std::fill(offsets_.begin(), offsets_.end(), 0);
      for (int64_t k = 0; k < position; ++k)
        for (int64_t b = 0; b < B_; ++b) offsets_[static_cast<size_t>(b)] += length(k, b);
    }
    return true;
  }

  void next(Segment &s) override {
    shape(s);
    if (!least_) {
      wrapped_ = position_ + T_ + 1 > stream_;
      if (wrapped_) position_ = 0;
      std::fill(offsets_.begin(), offsets_.end(), position_);
    } else {
      wrapped_ = *std::max_element(offsets_.begin(), offsets_.end()) + T_ + 1 > stream_;
      if (wrapped_) {
        position_ = 0;
        std::fill(offsets_.begin(), offsets_.end(), 0);
      }
      s.lengths.resize(static_cast<size_t>(B_));
      for (int64_t b = 0; b < B_; ++b) s.lengths[static_cast<size_t>(b)] = static_cast<int32_t>(length(position_, b));
    }
    int32_t *x = s.index[tokens_].data(), *y = s.index[targets_].data();
    for (int64_t t = 0; t < T_; ++t) {
      for (int64_t b = 0; b < B_; ++b) { // past a sequence's length: the text that follows (unused)
        const uint8_t *at = text_.data() + b * stream_ + offsets_[static_cast<size_t>(b)] + t;
        x[t * B_ + b] = at[0];
        y[t * B_ + b] = at[1];
      }
    }
    if (!least_) {
      position_ += T_;
      return;
    }
    for (int64_t b = 0; b < B_; ++b) offsets_[static_cast<size_t>(b)] += s.lengths[static_cast<size_t>(b)];
    ++position_;
  }

  double metric(const float *, double loss) const override { return loss / std::log(2.0); }

private:
  std::string path_;
  std::vector<uint8_t> text_;  // vocabulary ranks
  int64_t vocabulary_;
  double bits_;
  int64_t stream_;  // L
  /// Stream b's length in segment k: uniform in [least_, T] from a hash of (seed, k, b).
  int64_t length(int64_t k, int64_t b) const {
    using host::scalar::splitmix64;
    const uint64_t h = splitmix64(splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(k))) ^ static_cast<uint64_t>(b));
    return least_ + static_cast<int64_t>(h % static_cast<uint64_t>(T_ - least_ + 1));
  }

  int tokens_, targets_;
  int64_t least_;               // 0: every segment T steps
  int64_t heldOut_;             // the bytes of the file's tail held out for evaluation (0: none)
  uint64_t seed_;
  std::vector<int64_t> offsets_; // each stream's offset at the next segment
  int64_t position_ = 0;        // the offset (bytes) of every stream, or with least_ the segments since the start
  bool wrapped_ = false;
};

/// Reads `path` whole, refusing what is not a regular file of 1 byte to 1 GiB
/// holding B streams of T+1 bytes (twice that with `heldOut`: as many for
/// the evaluation).
bool readText(const std::string &path, int64_t T, int64_t B, bool heldOut, std::vector<uint8_t> &out,
              std::string &error) {
  uint64_t least = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(B), static_cast<uint64_t>(T) + 1, &least) ||
      __builtin_mul_overflow(least, heldOut ? 2u : 1u, &least))
    least = UINT64_MAX;
  auto file = io::InputFile::open(path, error);
  if (!file) return false;
  if (file->size() == 0) {
    error = fmt::format("{}: the file is empty", path);
    return false;
  }
  if (file->size() > kMaxTextBytes) {
    error = fmt::format("{}: the file is {} bytes, more than the text task's limit of 1 GiB", path, file->size());
    return false;
  }
  if (file->size() < least && !heldOut) {
    error = fmt::format("{}: the file is {} bytes; {} streams of {}+1 bytes need at least {}", path, file->size(), B, T,
                        least);
    return false;
  }
  if (file->size() < least) {
    error = fmt::format("{}: the file is {} bytes, too short to hold out a part for evaluation: {} streams of {}+1 "
                        "bytes for training and as many held out need at least {} (--eval-batches 0: no evaluation, "
                        "all of it trains)",
                        path, file->size(), B, T, least);
    return false;
  }
  out.resize(file->size());
  return file->read(0, file->size(), reinterpret_cast<char *>(out.data()), error);
}

}  // namespace

std::unique_ptr<Task> makeTextTask(const std::string &path, const rnnc_model &m, int64_t T, int64_t B, uint64_t seed,
                                   int64_t least, TaskData data, std::string &error) {
  if (least < 0 || least > T) {
    error = fmt::format("--min-bptt {} is not in 1..{} (the --bptt)", least, T);
    return nullptr;
  }
  if (least && !m.has_lengths) {
    error = fmt::format("--min-bptt needs a model compiled with --lengths; '{}' was not", m.name);
    return nullptr;
  }
  if (path.empty()) {
    error = "task text needs a file: text:PATH";
    return nullptr;
  }
  std::vector<uint8_t> text;
  if (!readText(path, T, B, data != TaskData::All, text, error)) return nullptr;

  std::array<uint64_t, 256> counts{};
  for (uint8_t c : text) ++counts[c];
  std::array<uint8_t, 256> rank{};
  int64_t vocabulary = 0;
  double bits = 0;
  for (int c = 0; c < 256; ++c) {
    if (counts[c] == 0) continue;
    rank[c] = static_cast<uint8_t>(vocabulary++);
    const double p = static_cast<double>(counts[c]) / static_cast<double>(text.size());
    bits -= p * std::log2(p);
  }
  for (uint8_t &c : text) c = rank[c];

  PortBinder ports(m, "text");
  auto covers = [vocabulary](const rnnc_tensor &t) { return t.shape[0] >= vocabulary; };
  auto tooSmall = [&](const char *role) {
    for (int k = 0; k < m.n_inputs; ++k) {
      if (m.inputs[k].is_index && m.inputs[k].shape[0] < vocabulary) {
        error = fmt::format("task {}: the index input '{}' ({}) has range {}, the vocabulary of {} has {} symbols",
                            "text", m.inputs[k].name, role, m.inputs[k].shape[0], path, vocabulary);
        return true;
      }
    }
    return false;
  };
  const std::string need = fmt::format("an index input of range at least the vocabulary size {}", vocabulary);
  int tokens = ports.take(true, covers, need + " (tokens)", error);
  if (tokens < 0) {
    tooSmall("tokens");
    return nullptr;
  }
  int targets = ports.take(true, covers, need + " (targets)", error);
  if (targets < 0) {
    tooSmall("targets");
    return nullptr;
  }
  if (!ports.allBound(error) ||
      !ports.output(covers, fmt::format("logits of width at least the vocabulary size {}", vocabulary), error))
    return nullptr;
  // A run that evaluates: the training reads the text up to its held-out tail, the evaluation the tail.
  const int64_t size = static_cast<int64_t>(text.size());
  const int64_t heldOut = data == TaskData::All ? 0 : heldOutBytes(size, T, B);
  if (data == TaskData::Training) text.resize(static_cast<size_t>(size - heldOut));
  if (data == TaskData::HeldOut) text.erase(text.begin(), text.end() - heldOut);
  text.shrink_to_fit();
  return std::make_unique<TextTask>(m, T, B, seed, path, std::move(text), vocabulary, bits, tokens, targets, least,
                                    heldOut);
}

}  // namespace rnnc::rt
