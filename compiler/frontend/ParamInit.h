// How `rnnc init` draws each param of a cell or model, and the draws: torch's
// rules (a recurrent cell's params U(±1/sqrt(H)), embedding tables N(0, 1), a
// model's other params U(±1/sqrt(fan-in))), from one std::mt19937_64 per seed.
#pragma once

#include "frontend/Sema.h"
#include "io/Array.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rnnc {

/// How a param is drawn: N(0, scale²) when normal, else U(±scale).
struct InitRule {
  bool normal = false;
  double scale = 0;
};

/// The rule of every param of e, by full name.
std::map<std::string, InitRule> initRules(const Elaboration &e);

/// Params drawn with `seed`, in declaration order (float32).
std::vector<io::Tensor> initialParams(const Elaboration &e, uint64_t seed);

/// The number of param values of e (a double: a product of dims may overflow int64).
double paramElements(const Elaboration &e);

} // namespace rnnc
