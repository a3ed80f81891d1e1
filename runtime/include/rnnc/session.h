// A compiled model with its workspace, params and gradients, for programs
// that embed a bundle: the C ABI (rnnc/model.h) behind a small C++ class.
// Header-only; float models (the default build of a bundle). For a CUDA
// model the workspace is device memory and so are the arrays forward,
// backward and the readers take; `params` and `grads` stay on the host
// (uploaded by forward, downloaded by backward) so the optimizers of
// rnnc/optim.h work on either.
#pragma once

#include "rnnc/device.h"
#include "rnnc/model.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rnnc {

namespace rt {
class Optimizer;
}

class Session {
public:
  /// Room for T steps of B sequences. Throws std::runtime_error when the
  /// model is not a float model of this ABI or the workspace cannot be had.
  Session(const rnnc_model &m, int64_t T, int64_t B) : m_(m), T_(T), B_(B), memory_(m) {
    if (m.abi_version != RNNC_ABI_VERSION) throw std::runtime_error("rnnc: model built for another ABI version");
    if (m.real_bytes != sizeof(float)) throw std::runtime_error("rnnc: Session needs a float model");
    int64_t bytes = m.workspace_bytes(T, B);
    if (bytes <= 0) throw std::runtime_error("rnnc: " + std::string(m.name) + ": T and B too large");
    ws_ = memory_.alloc(bytes);
    if (!ws_) throw std::runtime_error("rnnc: no memory for the workspace: " + memory_.error());
    params.assign(static_cast<size_t>(m.param_elements), 0.0f);
    grads.assign(static_cast<size_t>(m.param_elements), 0.0f);
    if (memory_.onDevice()) {
      deviceParams_ = memory_.alloc(paramBytes());
      deviceGrads_ = memory_.alloc(paramBytes());
      if (!deviceParams_ || !deviceGrads_) throw std::runtime_error("rnnc: no device memory for the params: " + memory_.error());
    }
  }

  const rnnc_model &model() const { return m_; }
  int64_t steps() const { return T_; }
  int64_t batch() const { return B_; }

  /// inputs[k]: [T][B][width] floats, or [T][B] int32 for an index input;
  /// states[k]: [depth][B][width] or null (zeros). Device pointers for a
  /// CUDA model. `options` (null: evaluation) is training or evaluation and
  /// the masks' seed. Throws on a bad index or a failed CUDA call. backward
  /// reads the inputs again: keep them, unchanged, until it has run.
  void forward(const void *const *inputs, const void *const *states = nullptr, const rnnc_run_options *options = nullptr) {
    inputs_.assign(inputs, inputs ? inputs + m_.n_inputs : inputs);
    const void *p = params.data();
    if (deviceParams_) {
      if (!memory_.upload(deviceParams_, params.data(), paramBytes())) throw std::runtime_error(memory_.error());
      p = deviceParams_;
    }
    if (m_.forward(ws_, T_, B_, p, inputs, states, nullptr, nullptr, nullptr, options, nullptr) != 0)
      throw std::runtime_error(m_.last_error());
  }
  /// Gradients of the loss (and of sum <y, dy> for seeded outputs, and of
  /// sum <s, ds> for seeded final states) into grads.
  void backward(const void *const *seeds = nullptr, void *const *inputGrads = nullptr,
                void *const *stateGrads = nullptr, const void *const *stateSeeds = nullptr) {
    const void *p = deviceParams_ ? deviceParams_ : params.data();
    void *g = deviceGrads_ ? deviceGrads_ : grads.data();
    if (m_.backward(ws_, T_, B_, p, inputs_.data(), seeds, stateSeeds, g, inputGrads, stateGrads, nullptr) != 0)
      throw std::runtime_error(m_.last_error());
    if (deviceGrads_ && !memory_.download(grads.data(), deviceGrads_, paramBytes())) throw std::runtime_error(memory_.error());
  }
  double loss() const { return m_.read_loss(ws_, T_, B_, nullptr); }
  /// out: [T][B][width] (a device pointer for a CUDA model).
  void readOutput(int k, float *out) const { m_.read_output(ws_, T_, B_, k, out, nullptr); }
  void readFinalState(int k, float *out) const { m_.read_final_state(ws_, T_, B_, k, out, nullptr); }

  /// Params drawn as `rnnc init --seed S` draws them (rnnc/init.h; links rnnc_runtime).
  void initParams(uint64_t seed);

  /// One optimizer step from `grads` (after backward), the gradient first
  /// clipped to global L2 norm `clip` (0: not clipped). Returns the norm
  /// before clipping. (rnnc/optim.h; links rnnc_runtime.)
  double step(rt::Optimizer &optimizer, double clip = 0);

  /// The param called `name` (null if none).
  float *param(const std::string &name) {
    for (int32_t i = 0; i < m_.n_params; ++i)
      if (name == m_.params[i].name) return params.data() + m_.params[i].offset;
    return nullptr;
  }

  std::vector<float> params, grads;

private:
  int64_t paramBytes() const { return m_.param_elements * static_cast<int64_t>(sizeof(float)); }
  const rnnc_model &m_;
  int64_t T_, B_;
  rt::ModelMemory memory_; // owns the workspace (and a CUDA model's params and gradients)
  void *ws_ = nullptr;
  void *deviceParams_ = nullptr, *deviceGrads_ = nullptr;
  std::vector<const void *> inputs_; // forward's, for backward
};

} // namespace rnnc

#include "rnnc/init.h"
#include "rnnc/optim.h"

inline void rnnc::Session::initParams(uint64_t seed) { rt::initParams(m_, seed, params.data()); }

inline double rnnc::Session::step(rt::Optimizer &optimizer, double clip) {
  double norm = rt::clipGradNorm(grads.data(), static_cast<int64_t>(grads.size()), clip);
  optimizer.step(params.data(), grads.data());
  return norm;
}
