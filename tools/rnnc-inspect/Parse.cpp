// The compiler invocation of each parse: clang's arguments per language, the
// stand-in headers (Shims.h) mapped under kShimDir first on the include path,
// and the forced-include prelude for CUDA. docs/inspect.md, "How each file is
// parsed", is the table this follows.
#include "Parse.h"

#include "Shims.h"

#include <clang/Frontend/ASTUnit.h>
#include <clang/Tooling/Tooling.h>

#include <memory>

namespace rnnc::inspect {
namespace {

constexpr const char *kShimDir = "/rnnc-inspect/include";
constexpr const char *kPrelude = "/rnnc-inspect/include/rnnc_inspect_cuda.h";

/// Clang's arguments for `language` ("cuda", "c++", or "nvrtc": a kernel string).
std::vector<std::string> arguments(const std::string &language, const Options &options) {
  std::vector<std::string> args = {"-resource-dir", RNNC_INSPECT_RESOURCE_DIR, "-isystem", kShimDir,
                                   "-I",           options.runtimeInclude,    "-w",       "-ferror-limit=20"};
  if (language == "c++") {
    args.insert(args.end(), {"-x", "c++", "-std=c++17", "-fopenmp"});
  } else {
    args.insert(args.end(), {"-x", "cuda", "-std=c++17", "--cuda-host-only", "-nocudainc", "-nocudalib", "-include",
                             kPrelude});
    if (language == "nvrtc") args.push_back("-D__CUDACC_RTC__");
  }
  return args;
}

/// The stand-in headers as virtual files under kShimDir.
clang::tooling::FileContentMappings shims() {
  clang::tooling::FileContentMappings files;
  for (size_t i = 0; i < kShimCount; ++i)
    files.emplace_back(std::string(kShimDir) + "/" + kShims[i].name, kShims[i].text);
  return files;
}

} // namespace

std::optional<Parsed> parse(const std::string &code, const std::string &path, const std::string &language,
                            unsigned lineOffset, const Options &options, std::string &error) {
  // The AST's buffers of the headers point into `headers` (not copied): it lives as long as the AST.
  clang::tooling::FileContentMappings headers = shims();
  std::unique_ptr<clang::ASTUnit> ast = clang::tooling::buildASTFromCodeWithArgs(
      code, arguments(language, options), path, "rnnc-inspect", std::make_shared<clang::PCHContainerOperations>(),
      clang::tooling::getClangStripDependencyFileAdjuster(), headers);
  if (!ast) {
    error = "clang could not be run on it";
    return std::nullopt;
  }
  if (ast->getDiagnostics().hasErrorOccurred()) {
    error = "does not parse";
    return std::nullopt;
  }
  return collect(ast->getASTContext(), language != "c++", lineOffset);
}

} // namespace rnnc::inspect
