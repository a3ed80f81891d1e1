// The scalar formulas of runtime/include/rnnc/scalar.h in the compiler, for
// the interpreter and the constant folder: the text the generated code runs,
// with the standard library's math (fast_exp is std::exp).
#pragma once

#include <algorithm>
#include <cmath>

namespace rnnc::scalar {

namespace math {
using std::exp;
using std::log1p;
using std::max;
using std::min;
inline double fast_exp(double x) { return std::exp(x); }
} // namespace math

#define RNNC_SCALAR inline
#include "rnnc/scalar.h"
#undef RNNC_SCALAR

} // namespace rnnc::scalar
