// inspect(): the whole reading of one emitted source, as a straight list of
// steps over Parse.h, Collect.h and Problems.h. The rules themselves are in
// those files and spelled out in docs/inspect.md.
//
// 1. Parse the file (a .cu as CUDA host code, a .cpp as C++17 with OpenMP)
//    and collect its kernels, call sites and kernel strings.
// 2. A kernel string found in a C++ parse (a --jit host part) is parsed again
//    as NVRTC sees it; its kernels and calls join the host part's, lines
//    mapped to the .cpp.
// 3. Launches are tied to kernels by name, library calls kept with their
//    launcher's equations, and the problems named.
#include "Inspect.h"

#include "Parse.h"
#include "Problems.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

namespace rnnc::inspect {

std::optional<Inspection> inspect(const std::string &path, const Options &options, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = buffer.getError().message();
    return std::nullopt;
  }
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  std::string code = (*buffer)->getBuffer().str();
  // Step 1.
  std::optional<Parsed> host = parse(code, absolute.str().str(), options.language, 0, options, error);
  if (!host) return std::nullopt;
  std::vector<Kernel> kernels = std::move(host->kernels);
  std::string kernelString;
  // Step 2: a --jit host part's kernels, parsed as NVRTC would.
  for (const KernelString &s : host->kernelStrings) {
    std::string name = absolute.str().str() + ":" + s.variable + ".cu";
    std::optional<Parsed> device = parse(s.text, name, "nvrtc", s.line - 1, options, error);
    if (!device) {
      error = "the kernel string " + s.variable + ": " + error;
      return std::nullopt;
    }
    for (Kernel &k : device->kernels) kernels.push_back(std::move(k));
    for (Site &site : device->sites) host->sites.push_back(std::move(site));
    kernelString = s.variable;
  }
  // Step 3.
  return assemble(path, options.language, host->sites, std::move(kernels), kernelString);
}

} // namespace rnnc::inspect
