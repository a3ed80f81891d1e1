// Forward-mode derivatives of the scalar ops, as printed expressions: what a
// scan's step needs for its Jacobian (the coefficients of an affine step,
// Newton's linearization of a nonlinear one). The rules are those of reverse
// mode (passes/Autodiff.cpp, localDerivatives) read the other way: there each
// input gets d·∂y/∂x, here y gets Σ dx·∂y/∂x. The pointwise functions' rules
// are their rows of ir/Pointwise.cpp; the algebra's are here.
#pragma once

#include "ir/Graph.h"

#include <functional>
#include <string>
#include <vector>

namespace rnnc::codegen {

/// The tangent of `y = op(x...)`: `x` the operands' texts, `dx` their
/// tangents ("" where zero), `y` the value's name, `math` the target's name of
/// a math function ("tanh" -> "std::tanh"). "" when the tangent is zero.
std::string tangentExpr(Op op, const std::vector<std::string> &x, const std::vector<std::string> &dx, const std::string &y,
                        const std::function<std::string(const char *)> &math);

} // namespace rnnc::codegen
