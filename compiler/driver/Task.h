// What `rnnc train` and `rnnc bench` share: the program they compile (a model
// with a loss as it is; a cell wrapped in the model a task needs: an input
// layer, the cell, a readout and the task's loss, written as .rnn text and
// compiled like any other file), the engine it is built into, and its params.
#pragma once

#include "codegen/Bundle.h"
#include "driver/Compiler.h"
#include "io/Array.h"
#include "rnnc/model.h"

#include <optional>
#include <string>
#include <vector>

namespace rnnc {

/// The file, and for a cell trained on a task, the model rnnc wrote around it.
struct TaskProgram {
  CheckedProgram file;
  std::optional<CheckedProgram> wrapper;
  /// What is compiled: the wrapper when there is one.
  const CheckedProgram &compiled() const { return wrapper ? *wrapper : file; }
};

/// Reads `path`; for a cell without a loss and a task (adding, copy,
/// text:PATH; "" for none), writes and reads the wrapper too. nullopt after
/// printing why not.
std::optional<TaskProgram> loadForTask(const std::string &path, const CompileOptions &o, const std::string &task);

/// p compiled with backward (o.gradients) for the engine on `target` (CUDA:
/// kernels by NVRTC), built and loaded. Null after printing why not.
const rnnc_model *loadEngine(const CheckedProgram &p, const CompileOptions &o, codegen::Target target,
                             codegen::CudaOptions cuda);

/// The flat params of m from `tensors` (by name, shapes checked); false after
/// printing what does not fit, naming `from`.
bool flatParams(const rnnc_model &m, const std::vector<io::Tensor> &tensors, const std::string &from,
                std::vector<float> &flat);

} // namespace rnnc
