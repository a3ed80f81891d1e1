// SGD with momentum, Adam and global-norm clipping (optim.h). Each update is
// one pass over the flat arrays, in index order, so the same inputs give the
// same bits on every run (the resume guarantee rests on it).
#include "rnnc/optim.h"

#include <fmt/format.h>

#include <cmath>

namespace rnnc::rt {

Sgd::Sgd(int64_t elements, double lr, double momentum) : Optimizer(elements, lr), momentum_(momentum) {
  slots_.push_back({"v", std::vector<float>(static_cast<size_t>(elements), 0.0f)});
}

void Sgd::step(float *params, const float *grads) {
  float *v = slots_[0].values.data();
  const float mu = static_cast<float>(momentum_), lr = static_cast<float>(lr_);
  for (int64_t i = 0; i < elements_; ++i) {
    v[i] = mu * v[i] + grads[i];
    params[i] -= lr * v[i];
  }
  ++steps_;
}

Adam::Adam(int64_t elements, double lr, double beta1, double beta2, double eps)
    : Optimizer(elements, lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  slots_.push_back({"m", std::vector<float>(static_cast<size_t>(elements), 0.0f)});
  slots_.push_back({"v", std::vector<float>(static_cast<size_t>(elements), 0.0f)});
}

void Adam::step(float *params, const float *grads) {
  ++steps_;
  float *m = slots_[0].values.data(), *v = slots_[1].values.data();
  const double t = static_cast<double>(steps_);
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
  const float a1 = static_cast<float>(1.0 - beta1_), a2 = static_cast<float>(1.0 - beta2_);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(beta1_, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(beta2_, t)));
  const float lr = static_cast<float>(lr_), eps = static_cast<float>(eps_);
  for (int64_t i = 0; i < elements_; ++i) {
    const float g = grads[i];
    m[i] = b1 * m[i] + a1 * g;
    v[i] = b2 * v[i] + a2 * g * g;
    params[i] -= lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
  }
}

double defaultLearningRate(const std::string &optimizer) { return optimizer == "sgd" ? 0.1 : 1e-3; }

std::unique_ptr<Optimizer> makeOptimizer(const std::string &name, int64_t elements, double lr, double momentum,
                                         std::string &error) {
  if (lr == 0) lr = defaultLearningRate(name);
  if (!(lr > 0) || !std::isfinite(lr)) {
    error = fmt::format("the learning rate must be a positive number, not {}", lr);
    return nullptr;
  }
  if (name == "adam") return std::make_unique<Adam>(elements, lr);
  if (name == "sgd") {
    if (!(momentum >= 0 && momentum < 1)) {
      error = fmt::format("the momentum must be in [0, 1), not {}", momentum);
      return nullptr;
    }
    return std::make_unique<Sgd>(elements, lr, momentum);
  }
  error = fmt::format("unknown optimizer '{}' (expected adam or sgd)", name);
  return nullptr;
}

double clipGradNorm(float *grads, int64_t n, double maxNorm) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  const double norm = std::sqrt(sum);
  if (maxNorm > 0 && std::isfinite(norm) && norm > maxNorm) {
    const float scale = static_cast<float>(maxNorm / (norm + 1e-6));
    for (int64_t i = 0; i < n; ++i) grads[i] *= scale;
  }
  return norm;
}

}  // namespace rnnc::rt
