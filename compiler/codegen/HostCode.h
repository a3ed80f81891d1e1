// Host-code text every target prints the same way: the Workspace struct and
// its layout, the row copies that put inputs, states and seeds into the
// padded buffers and take outputs and gradients out, and the padding clears.
// A target says how a call statement is spelled (CUDA checks each one and
// passes its stream) through HostCall.
#pragma once

#include "codegen/KernelIR.h"

#include <string>

namespace rnnc::codegen {

/// How a host call is written: `prefix` + name(args + `close`.
/// C++: "  copy_rows(...);"; CUDA: "  RNNC_CUDA_CHECK(copy_rows(..., s0));".
struct HostCall {
  std::string prefix = "  ";
  std::string close = ");\n";
  std::string call(const std::string &nameAndArgs) const { return prefix + nameAndArgs + close; }
};

/// The rows a buffer has in the workspace ("T + 1", "1", "3").
std::string rowsOf(const Buffer &b);

/// `struct Workspace { ... };` with one member per buffer, `extraMembers`
/// (already formatted lines) and the loss seed.
std::string workspaceStruct(const Program &p, const std::string &extraMembers = "");

/// `int64_t layout(T, B, base, ws)` carving every buffer, then `extraTakes`.
std::string workspaceLayout(const Program &p, const std::string &extraTakes = "");

/// Clears of the padding rows (and rings) of forward's or backward's buffers.
std::string paddingClears(const Program &p, bool backward, const HostCall &c);

/// Forward's copies of the inputs and initial states into their buffers.
std::string inputCopies(const Program &p, const HostCall &c);

/// Backward's copies of the seeds (or clears where a seed is null).
std::string seedCopies(const Program &p, const HostCall &c);

/// Backward's copies of input and state gradients out (`stateLeaf` writes a
/// state gradient that is a constant: its text given the destination); a
/// state the objective does not reach gets zeros.
std::string gradientReads(const Program &p, const HostCall &c,
                          std::string (*stateLeaf)(const PortIR &g, const std::string &dst));

/// The cases of read_output and of read_final_state's switch.
std::string outputReadCases(const Program &p, const HostCall &c);
std::string finalStateReadCases(const Program &p, const HostCall &c);

} // namespace rnnc::codegen
