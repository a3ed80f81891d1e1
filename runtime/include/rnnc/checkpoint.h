// Training checkpoints: a safetensors file that safetensors.torch.load_file
// reads, holding the params by their full names, the optimizer state
// ("adam.m/<param>", "adam.v/<param>", "sgd.v/<param>"), the carried states
// ("carry/<state>", [depth, B, width]) and, in "__metadata__", where training
// stands (step, task RNG, data position) and what it belongs to (model name
// and source hash, task, optimizer), with a checksum over all of it. Written
// atomically; loading refuses anything that does not fit the run exactly.
// See docs/training.md.
#pragma once

#include "rnnc/model.h"
#include "rnnc/optim.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rnnc::io {
struct Tensor;
}

namespace rnnc::rt {

constexpr const char *kCheckpointFormat = "rnnc-checkpoint";
constexpr const char *kCheckpointVersion = "1";

/// The state of a training run between two steps.
struct Checkpoint {
  std::string task;       // the task spec, "adding", "text:data.txt"
  std::string optimizer;  // "adam" or "sgd"
  int64_t step = 0;       // steps done (also the optimizer's step count)
  int64_t batch = 0;      // B: the streams (and carried states) depend on it
  std::string rng;        // the task RNG as text
  int64_t position = 0;   // the task's data position (text)
  int64_t skipped = 0;    // steps skipped as non-finite so far (metadata "skipped"; absent: 0)
  /// Dynamic loss scaling (docs/precision.md) where the run uses it: the
  /// scale, the good steps since it last changed and the steps it skipped
  /// (metadata "loss_scale", "loss_scale_good_steps", "loss_scale_skips");
  /// loss_scale 0: none recorded (a run without it, or an older file).
  double loss_scale = 0;
  int64_t scale_good_steps = 0;
  int64_t scale_skips = 0;
  std::vector<float> params;                // flat, param_elements
  std::vector<OptimizerSlot> slots;         // flat, param_elements each
  std::vector<std::vector<float>> carry;    // per state [depth][B][w]; empty: none carried
};

/// Writes `c` for model `m` to `path` (temporary file, fsync, rename). False
/// with a one-line error naming the file when it cannot.
bool saveCheckpoint(const std::string &path, const rnnc_model &m, const Checkpoint &c, std::string &error);

/// Reads `path` into `c`, which says what the run expects: `task`,
/// `optimizer`, `batch`, the slots' names, `params` and every slot sized
/// param_elements, `carry` sized per state (or empty). Refuses, with one line
/// that starts with the path: a file that is not safetensors, truncated or
/// corrupt (checksum mismatch); not an rnnc checkpoint or another format
/// version; another model (name or source hash), task, optimizer or batch; a
/// missing, misshaped or unexpected tensor. On failure `c` may be half filled.
bool loadCheckpoint(const std::string &path, const rnnc_model &m, Checkpoint &c, std::string &error);

/// The checksum a checkpoint records in its metadata: FNV-1a 64 over every
/// metadata entry but "checksum" (key and value, in key order, each
/// NUL-terminated) and every tensor (name NUL-terminated, then its float32
/// bytes), in the order given. Tools and tests use it to seal an edited file.
uint64_t checkpointChecksum(const std::map<std::string, std::string> &metadata,
                            const std::vector<io::Tensor> &tensors);

/// FNV-1a 64 of `bytes`, continuing from `hash`.
uint64_t fnv1a(const void *bytes, size_t n, uint64_t hash = 0xcbf29ce484222325ull);

}  // namespace rnnc::rt
