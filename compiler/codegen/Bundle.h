// A bundle (DESIGN.md §4): the generated source, a header with the C ABI and
// a C++ class, and the manifest. Shared by every target: the ABI table, the
// header and the manifest do not depend on where the kernels run.
#pragma once

#include "codegen/KernelIR.h"
#include "support/SourceManager.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace rnnc::codegen {

/// Where a bundle's kernels run: C++ with OpenMP and CBLAS, or CUDA with cuBLAS.
enum class Target : uint8_t { Cpu, Cuda };

/// "cpu" or "cuda": how the command line, the manifest and the page spell it.
const char *targetName(Target t);

/// The target spelled `name`, or nullopt.
std::optional<Target> parseTarget(std::string_view name);

struct Bundle {
  std::string model;    // the C identifier files and symbols are named after
  Target target = Target::Cpu;
  std::string source;   // <model>.cpp, or <model>.cu
  std::string sourceExtension = "cpp";
  std::string header;   // <model>.h
  nlohmann::json manifest;
  std::string hash;     // of the generated source as printed (before formatting), hex
  std::string clangFormat; // DIR/.clang-format when not empty: the style the code is formatted in
};

/// The C identifier of a model ("CharLM" stays, "my-cell" -> "my_cell").
std::string modelIdentifier(const std::string &name);

/// The ABI table and its entry point `rnnc_model_<model>` (end of the source);
/// a CUDA model's arrays live on the device.
std::string abiTable(const Program &p, Target target);

struct CudaOptions;

/// Prints the bundle for `target` (for CUDA, `cuda` says how).
Bundle printBundle(const Program &p, const SourceManager &sm, Target target, const CudaOptions *cuda = nullptr);

/// Writes DIR/<model>.{cpp or cu,h,json} and DIR/.clang-format, each through a
/// temporary file renamed into place. A .clang-format already there with other
/// content is the user's: it stays, and `warning` says so. On failure sets
/// `error` (one line naming the file).
bool writeBundle(const Bundle &b, const std::string &dir, std::string &error, std::string *warning = nullptr);

} // namespace rnnc::codegen
