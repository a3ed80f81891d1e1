// The reference interpreter: evaluates any graph (forward, or forward and
// backward after autodiff) over T steps and B sequences, plainly, in float64
// or rounding every value to float32. It is the oracle every compiled engine is
// checked against, so it is written to be read: one switch over the ops, one
// loop per recurrent component, nothing fused or reordered.
#pragma once

#include "ir/Graph.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rnnc {

/// Arrays are flat, time-major: [T][B][width] for per-step values, the
/// param's shape for params, [k][B][width] for the k steps before the first
/// (t = -k .. -1) for states.
struct InterpInputs {
  int64_t T = 0, B = 0;
  bool f32 = false;
  std::map<std::string, std::vector<double>> inputs; // every input port (index inputs hold integers)
  std::map<std::string, std::vector<double>> params; // every param
  std::map<std::string, std::vector<double>> states; // optional; missing states start at zero
  std::map<std::string, std::vector<double>> seeds;  // dL/dy for each seeded output (not "loss")
  /// dL/d(final state) [k][B][w] by state (seeds "final.<state>"); missing: zero
  std::map<std::string, std::vector<double>> finalSeeds;
  /// How the masks of dropout and zoneout draw (rnnc_run_options): training
  /// or evaluation, and their key.
  bool train = false;
  uint64_t seed = 0, call = 0;
  /// The steps each sequence runs, 1..T, for a graph built with --lengths
  /// (empty: all T).
  std::vector<int32_t> lengths;
};

struct InterpResult {
  std::map<std::string, std::vector<double>> outputs;     // [T][B][w]
  std::map<std::string, std::vector<double>> finalStates; // [k][B][w]: the last k steps
  std::optional<double> loss;                              // mean over steps and sequences
  std::map<std::string, std::vector<double>> paramGrads;  // param shape
  std::map<std::string, std::vector<double>> inputGrads;  // [T][B][w]
  std::map<std::string, std::vector<double>> stateGrads;  // [k][B][w]: the initial state's
};

InterpResult interpret(const Graph &g, const InterpInputs &in);

/// The bytes `interpret` holds for T steps of B sequences: every live value at
/// every step (doubles), so that a run too large is refused before it starts.
double interpreterBytes(const Graph &g, int64_t T, int64_t B);

} // namespace rnnc
