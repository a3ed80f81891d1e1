#include "rnnc/init.h"

#include <cmath>
#include <vector>

namespace rnnc::rt {

void drawParam(std::mt19937_64 &rng, bool normal, double scale, int64_t n, double *out) {
  if (normal) {
    std::normal_distribution<double> dist(0.0, scale);
    for (int64_t i = 0; i < n; ++i) out[i] = dist(rng);
  } else {
    std::uniform_real_distribution<double> dist(-scale, scale);
    for (int64_t i = 0; i < n; ++i) out[i] = dist(rng);
  }
}

void initParams(const rnnc_model &m, uint64_t seed, float *params) {
  std::mt19937_64 rng(seed);
  std::vector<double> values;
  for (int32_t k = 0; k < m.n_params; ++k) {
    const rnnc_tensor &p = m.params[k];
    const int64_t n = tensorElements(p);
    double scale = p.init_scale > 0 ? p.init_scale : 1.0 / std::sqrt(static_cast<double>(p.rank > 1 ? p.shape[1] : p.shape[0]));
    values.resize(static_cast<size_t>(n));
    drawParam(rng, p.init_normal != 0, scale, n, values.data());
    for (int64_t i = 0; i < n; ++i) params[p.offset + i] = static_cast<float>(values[i]);
  }
}

} // namespace rnnc::rt
