// Initial params, drawn as `rnnc init --seed S` draws them: the params in
// declaration order, each element in row-major order, from one
// std::mt19937_64(seed), uniform in ±scale or normal N(0, scale²) as the
// model's param table says (rnnc_tensor::init_scale, init_normal; a table
// without a rule gets ±1/sqrt(fan-in): columns of a matrix, length of a vector).
#pragma once

#include "rnnc/model.h"

#include <cstdint>
#include <random>

namespace rnnc::rt {

/// `n` values of one param: N(0, scale²) when `normal`, else U(-scale, scale).
void drawParam(std::mt19937_64 &rng, bool normal, double scale, int64_t n, double *out);

/// Every param of m into the flat array `params` (param_elements floats).
void initParams(const rnnc_model &m, uint64_t seed, float *params);

} // namespace rnnc::rt
