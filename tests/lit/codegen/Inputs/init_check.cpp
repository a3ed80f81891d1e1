// Draws a bundle's params with the runtime's initializer and prints them, one
// per line, in the order of the param table, for comparison with `rnnc init`.
#include "LSTM.h"
#include "rnnc/init.h"

#include <cstdio>
#include <vector>

int main() {
  const rnnc_model &m = *rnnc_model_LSTM();
  std::vector<float> p(m.param_elements);
  rnnc::rt::initParams(m, 7, p.data());
  for (int32_t k = 0; k < m.n_params; ++k) {
    int64_t n = m.params[k].shape[0] * (m.params[k].rank > 1 ? m.params[k].shape[1] : 1);
    for (int64_t i = 0; i < n; ++i) std::printf("%s %.9g\n", m.params[k].name, p[m.params[k].offset + i]);
  }
}
