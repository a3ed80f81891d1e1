// What the three tasks share inside the runtime: their constructors and the
// port binding (first fitting input in port order; every input fed; output 0
// checked), so each task file states only its own ports and data.
#pragma once

#include "rnnc/tasks.h"

#include <functional>

namespace rnnc::rt {

/// Takes the model's inputs in port order for one task, remembering which are
/// bound, and words the errors: "task adding needs ...; model 'M' has none".
class PortBinder {
public:
  PortBinder(const rnnc_model &m, std::string task) : m_(m), task_(std::move(task)), taken_(m.n_inputs, false) {}
  /// The first input not yet bound that is an index input (or dense) and fits
  /// `fits`; -1 and the error "... needs <what>" when there is none.
  int take(bool index, const std::function<bool(const rnnc_tensor &)> &fits, const std::string &what, std::string &error);
  /// True when every input is bound; otherwise names the first one left.
  bool allBound(std::string &error) const;
  /// True when the model has an output 0 that fits; otherwise says what is needed.
  bool output(const std::function<bool(const rnnc_tensor &)> &fits, const std::string &what, std::string &error) const;

private:
  const rnnc_model &m_;
  std::string task_;
  std::vector<bool> taken_;
};

std::unique_ptr<Task> makeAddingTask(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed, std::string &error);
std::unique_ptr<Task> makeCopyTask(const rnnc_model &m, int64_t T, int64_t B, uint64_t seed, std::string &error);
std::unique_ptr<Task> makeTextTask(const std::string &path, const rnnc_model &m, int64_t T, int64_t B, uint64_t seed,
                                   int64_t least, TaskData data, std::string &error);

}  // namespace rnnc::rt
