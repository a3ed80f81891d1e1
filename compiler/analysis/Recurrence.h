// Recurrence classes: for each recurrent component (a sequential loop of
// TimeClasses), whether its step is affine or nonlinear in its state and how
// its step Jacobian d state_t / d state_{t-k} is shaped (diagonal, blocks of
// diagonals, dense), from which a parallel-over-time plan follows: affine with
// a (block-)diagonal Jacobian is a scan candidate, nonlinear with one a Newton
// candidate, a dense Jacobian stays sequential. An analysis: it rewrites
// nothing; plan-time-parallel turns candidates into plans (PlanTimeParallel.h)
// and `show --schedule` prints it.
#pragma once

#include "analysis/TimeClasses.h"
#include "ir/Graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rnnc {

/// How a value depends on the loop's state (a lattice, in this order).
enum class StateDependence : uint8_t {
  Free,     // reads no state: inputs, params, constants, values from outside the loop
  Affine,   // A · state + b with A and b state-free
  Nonlinear // anything else
};

/// The shape of the step Jacobian over the loop's state.
enum class JacobianShape : uint8_t {
  Diagonal,      // each state element depends only on its own previous value
  BlockDiagonal, // the state elements split into small independent groups (blocks of diagonals)
  Dense          // a GEMM, a reduction or a broadcast over the state, or large groups
};

/// What the class allows (passes/PlanTimeParallel.h decides what runs).
enum class TimeParallelPlan : uint8_t { Scan, Newton, Sequential };

struct RecurrenceClass {
  int loop = -1; // index into TimeClasses::loops
  StateDependence kind = StateDependence::Nonlinear;
  JacobianShape jacobian = JacobianShape::Dense;
  int64_t blockSize = 0; // elements in the largest independent group (1: diagonal; 0: dense)
  /// The values read through a delay inside the loop, in id order.
  std::vector<NodeId> states;

  TimeParallelPlan plan() const;
};

/// The class of every loop of `time`, in loop order. `time` must be the time
/// classes of `g` as it is now.
std::vector<RecurrenceClass> classifyRecurrences(const Graph &g, const TimeClasses &time);

/// One line for `show --schedule`: "affine in c, diagonal Jacobian -> scan candidate".
std::string recurrenceSummary(const Graph &g, const RecurrenceClass &r);

const char *planName(TimeParallelPlan plan); // "scan", "newton", "sequential"

} // namespace rnnc
