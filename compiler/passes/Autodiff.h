// autodiff: reverse mode on the graph, so backpropagation through time is an
// ordinary graph the same pipeline schedules. Every node gets an adjoint (the
// gradient of the objective with respect to its value at each step); an input
// edge with delay d sends its contribution back with delay -d, so the
// backward recurrence runs in reverse time, and weight gradients
// (dW = sum_t delta_t x_t^T) are accumulations over all steps after the loop.
// Needs a verified lowered graph; adds the backward nodes and Graph::grads.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <string>
#include <vector>

namespace rnnc {

/// The name of a final state's seed is this prefix and the state's name.
inline const std::string kFinalSeedPrefix = "grad.final.";

/// What the objective is: L = sum over steps and sequences of <y, dy> for the
/// outputs named, plus the loss (a mean over steps and sequences) if asked.
struct Objective {
  std::vector<std::string> outputs;
  bool loss = false;
  /// Gradients of the inputs and of the initial states too (`rnnc run --grad`);
  /// training does not need them (truncated BPTT stops at a segment's start).
  bool inputGrads = true;
  bool stateGrads = true;
  /// Plus sum <s, ds> over each state's final value (its last `depth` steps):
  /// seeds named "final.<state>", zero but at those steps.
  bool stateSeeds = true;
};

/// Returns false after reporting a user error (an output that cannot be
/// differentiated, a loss asked of a graph without one).
bool differentiate(Graph &g, const Objective &objective, DiagnosticEngine &diags);

/// The default objective: the loss when the graph has one, else every output.
Objective defaultObjective(const Graph &g);

} // namespace rnnc
