// Training tasks: data made on the fly (nothing is downloaded), bound to a
// compiled model's ports, deterministic from a std::mt19937_64 seeded by the
// user's seed. A task fills the model's inputs for one training segment of T
// steps and B sequences (time-major) and scores the model's first output.
// A task made for the held-out evaluation (TaskData::HeldOut) draws data the
// training task never draws: text's held-out tail, or, for adding and copy,
// a stream of its own seeded with heldOutSeed(seed).
//   adding     Hochreiter & Schmidhuber 1997, experiment 4 (dense supervision)
//   copy       copy memory, Arjovsky et al. 2016 (10 symbols)
//   text:PATH  character-level language model on any file (states carried)
// See docs/training.md for the port binding and the data of each task.
#pragma once

#include "rnnc/model.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace rnnc::rt {

/// One segment's inputs, in the model's input order: dense inputs [T][B][w]
/// float, index inputs [T][B] int32. `pointers[k]` is what forward takes.
struct Segment {
  std::vector<std::vector<float>> dense;    // per input (empty for index inputs)
  std::vector<std::vector<int32_t>> index;  // per input (empty for dense inputs)
  std::vector<const void *> pointers;
  std::vector<int32_t> lengths;             // [B]: each sequence's steps (text --min-bptt); empty: all T
};

class Task {
public:
  virtual ~Task() = default;
  /// The spec it was made from: "adding", "copy", "text:PATH".
  virtual std::string spec() const = 0;
  /// "mse", "accuracy" or "bpc".
  virtual std::string metricName() const = 0;
  /// True when the final states of a segment start the next one.
  virtual bool carriesState() const { return false; }
  /// Fills `segment` with the next T steps of B sequences.
  virtual void next(Segment &segment) = 0;
  /// True when the last `next` started the streams over (carried states reset).
  virtual bool wrapped() const { return false; }
  /// The metric of the last segment from output 0 ([T][B][w] float) and the loss.
  virtual double metric(const float *output, double loss) const = 0;

  /// Where the data is read (text: the offset in each stream); 0 for the others.
  virtual int64_t position() const { return 0; }
  /// Restores a position saved from `position()`; false (with error) when out of range.
  virtual bool setPosition(int64_t position, std::string &error);

  /// Text only: the vocabulary size and the unigram entropy of the text in bits.
  virtual int64_t vocabulary() const { return 0; }
  virtual double unigramBits() const { return 0; }
  /// Text in a run that evaluates: the bytes of the file's tail held out for evaluation.
  virtual int64_t heldOut() const { return 0; }

  std::mt19937_64 &rng() { return rng_; }
  /// The RNG state as text (operator<<) and back (operator>>; false if malformed).
  std::string rngState() const;
  bool setRngState(const std::string &text);

  int64_t steps() const { return T_; }
  int64_t batch() const { return B_; }

protected:
  Task(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed);
  /// Sizes `segment` for the model's inputs (dense or index) and sets its pointers.
  void shape(Segment &segment) const;
  /// A double in [0, 1) from the top 53 bits of one draw.
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1p-53; }
  /// An integer in [0, n) (n small: the modulo bias is below 2^-50).
  int64_t below(int64_t n) { return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n)); }

  const rnnc_model &m_;
  int64_t T_, B_;
  std::mt19937_64 rng_;
};

/// The data a task draws.
enum class TaskData {
  All,       // all of it: a run that does not evaluate
  Training,  // a run that evaluates: text without its held-out tail (heldOutBytes)
  HeldOut,   // the evaluation's: text's held-out tail; adding and copy from heldOutSeed(seed)
};

/// The bytes of a text of `size` bytes held out for evaluation: the last 10%
/// (rounded up), or B·(T+1) bytes (one segment per stream) when that is more.
int64_t heldOutBytes(int64_t size, int64_t T, int64_t B);

/// The seed of the held-out stream of a synthetic task trained with `seed`
/// (a splitmix64 hash: no seed of the training draws it).
uint64_t heldOutSeed(uint64_t seed);

/// Makes the task named by `spec` for `m` with T steps and B sequences per
/// segment, binding its ports. Ports: the first inputs in port order that fit
/// (dense by width, or index by range; tokens before targets); output 0 is
/// scored. Any other input, or a port that is missing or too small, is an
/// error: returns null and sets `error` to one line naming what is wrong.
/// `least` > 0 (text only, a --lengths build): each segment's sequences run
/// lengths uniform in [least, T] (Segment::lengths; not with TaskData::HeldOut,
/// whose segments run all T steps). `data`: which data it draws (TaskData).
std::unique_ptr<Task> makeTask(const std::string &spec, const rnnc_model &m, int64_t T, int64_t B, uint64_t seed,
                               std::string &error, int64_t least = 0, TaskData data = TaskData::All);

}  // namespace rnnc::rt
