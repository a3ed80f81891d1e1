// The compiled CPU engine: a bundle built into a shared library with the
// system C++ compiler, cached under $RNNC_CACHE (default ~/.cache/rnnc) by a
// hash of the generated source, the flags and the compiler, and loaded with
// dlopen. `rnnc --print-cflags` prints the flags a user needs for the same.
#pragma once

#include "codegen/Bundle.h"
#include "rnnc/model.h"

#include <string>

namespace rnnc {

/// -I for the runtime headers (what `rnnc --print-cflags` prints).
std::string runtimeCflags();

/// Builds (or finds) and loads `b`; f64 compiles it with double reals. Null
/// with a one-line `error` when the compiler fails or the library does not load.
const rnnc_model *loadCompiledModel(const codegen::Bundle &b, DType dtype, std::string &error);

/// n values as model m's real arrays hold them (f32, f64, bf16 or f16 bytes).
std::vector<char> storedReals(const rnnc_model &m, const float *v, int64_t n);

} // namespace rnnc

#include "interp/Interpreter.h"

namespace rnnc {

/// Runs a loaded model on the interpreter's inputs (same layout) and returns
/// what the interpreter would: outputs, final states, the loss and, with
/// `grad`, the gradients. False with `error` when the model refuses the input.
bool runLoadedModel(const rnnc_model &m, const InterpInputs &in, bool grad, InterpResult &out, std::string &error,
                    int64_t maxMemory = 0);

} // namespace rnnc
