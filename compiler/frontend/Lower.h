// Lowering: the AST of a checked cell or model, with the dims Sema bound for
// each instance, becomes one graph (ir/Graph.h). Instances are inlined and
// their params named by the instance prefix (`h1.W_ih`); a read with a time
// offset becomes an edge with that delay. Then the graph-level user errors:
// algebraic loops (a cycle of delay-0 edges) and values that only copy
// themselves through delays; unused params are a warning.
#pragma once

#include "frontend/Sema.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <optional>

namespace rnnc {

/// Lowers a complete elaboration (every dim known). Returns nullopt after
/// reporting a user error.
std::optional<Graph> lowerToGraph(const Elaboration &elab, DiagnosticEngine &diags);

} // namespace rnnc
