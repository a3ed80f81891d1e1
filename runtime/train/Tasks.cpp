// The task base (segment shapes, the RNG as text), the port binder, the
// held-out data's rules and the factory that reads a task spec.
#include "train/TaskPorts.h"

#include "rnnc/workspace.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

namespace rnnc::rt {

Task::Task(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed) : m_(m), T_(T), B_(B), rng_(seed) {}

bool Task::setPosition(int64_t position, std::string &error) {
  if (position == 0) return true;
  error = fmt::format("task {} has no data position, but {} was given", spec(), position);
  return false;
}

std::string Task::rngState() const {
  std::ostringstream out;
  out << rng_;
  return out.str();
}

bool Task::setRngState(const std::string &text) {
  std::istringstream in(text);
  std::mt19937_64 restored;
  in >> restored;
  if (in.fail()) return false;
  in >> std::ws;
  if (!in.eof()) return false;
  rng_ = restored;
  return true;
}

void Task::shape(Segment &segment) const {
  size_t n = static_cast<size_t>(m_.n_inputs);
  segment.dense.resize(n);
  segment.index.resize(n);
  segment.pointers.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const rnnc_tensor &in = m_.inputs[k];
    if (in.is_index) {
      segment.index[k].resize(static_cast<size_t>(T_ * B_));
      segment.pointers[k] = segment.index[k].data();
    } else {
      segment.dense[k].resize(static_cast<size_t>(T_ * B_ * in.shape[0]));
      segment.pointers[k] = segment.dense[k].data();
    }
  }
}

int PortBinder::take(bool index, const std::function<bool(const rnnc_tensor &)> &fits, const std::string &what,
                     std::string &error) {
  for (int k = 0; k < m_.n_inputs; ++k) {
    const rnnc_tensor &in = m_.inputs[k];
    if (taken_[k] || (in.is_index != 0) != index || !fits(in)) continue;
    taken_[k] = true;
    return k;
  }
  error = fmt::format("task {} needs {}; model '{}' has none left", task_, what, m_.name);
  return -1;
}

bool PortBinder::allBound(std::string &error) const {
  for (int k = 0; k < m_.n_inputs; ++k) {
    if (taken_[k]) continue;
    error = fmt::format("model '{}' has an input '{}' that task {} does not feed", m_.name, m_.inputs[k].name, task_);
    return false;
  }
  return true;
}

bool PortBinder::output(const std::function<bool(const rnnc_tensor &)> &fits, const std::string &what,
                        std::string &error) const {
  if (m_.n_outputs >= 1 && fits(m_.outputs[0])) return true;
  if (m_.n_outputs < 1)
    error = fmt::format("task {} needs {} as output 0; model '{}' has no output", task_, what, m_.name);
  else
    error = fmt::format("task {} needs {} as output 0; model '{}' has '{}' of width {}", task_, what, m_.name,
                        m_.outputs[0].name, m_.outputs[0].shape[0]);
  return false;
}

int64_t heldOutBytes(int64_t size, int64_t T, int64_t B) { return std::max((size + 9) / 10, B * (T + 1)); }

uint64_t heldOutSeed(uint64_t seed) {
  using host::scalar::splitmix64;
  constexpr uint64_t kHeldOut = 0x68656c642d6f7574;  // "held-out"
  return splitmix64(seed ^ splitmix64(kHeldOut));
}

std::unique_ptr<Task> makeTask(const std::string &spec, const rnnc_model &m, int64_t T, int64_t B, uint64_t seed,
                               std::string &error, int64_t least, TaskData data) {
  if (T < 1 || B < 1) {
    error = fmt::format("the batch and the BPTT length must be positive, not {} and {}", B, T);
    return nullptr;
  }
  if (least && spec.rfind("text:", 0) != 0) {
    error = fmt::format("--min-bptt goes with the text task (text:PATH), not {}", spec);
    return nullptr;
  }
  const uint64_t synthetic = data == TaskData::HeldOut ? heldOutSeed(seed) : seed;
  if (spec == "adding") return makeAddingTask(m, T, B, synthetic, error);
  if (spec == "copy") return makeCopyTask(m, T, B, synthetic, error);
  if (spec.rfind("text:", 0) == 0)
    return makeTextTask(spec.substr(5), m, T, B, seed, data == TaskData::HeldOut ? 0 : least, data, error);
  error = fmt::format("unknown task '{}' (expected adding, copy or text:PATH)", spec);
  return nullptr;
}

}  // namespace rnnc::rt
