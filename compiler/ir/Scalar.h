// The scalar formulas of runtime/include/rnnc/scalar.h in the compiler, for
// the interpreter, the constant folder and the printers: the text the
// generated code runs, with the standard library's math (fast_exp is
// std::exp), as the host part of every bundle has it (rnnc/workspace.h).
#pragma once

#include "rnnc/workspace.h"

namespace rnnc {
namespace scalar = host::scalar;
} // namespace rnnc
