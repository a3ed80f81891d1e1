// Formats the code rnnc emits with clang-format's library, in the style of the
// .clang-format every bundle ships. Formatting changes whitespace only: the
// printers decide what the code says, this decides where the lines break.
#include "codegen/Format.h"

#ifdef RNNC_HAVE_CLANG_FORMAT
#include <clang/Format/Format.h>
#include <clang/Tooling/Core/Replacement.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#endif

#include <sstream>
#include <vector>

namespace rnnc::codegen {

const std::string &clangFormatStyle() {
  static const std::string style = R"(# The style rnnc formats its generated code with (rnnc compile; --no-format
# turns formatting off). clang-format 14 and later read it.
BasedOnStyle: LLVM
ColumnLimit: 120
IndentWidth: 2
PointerAlignment: Right
AllowShortFunctionsOnASingleLine: All
AllowShortIfStatementsOnASingleLine: AllIfsAndElse
AllowShortLoopsOnASingleLine: true
AllowShortBlocksOnASingleLine: Empty
AttributeMacros: [RNNC_KERNEL, __forceinline__]
SortIncludes: Never
ReflowComments: false
)";
  return style;
}

namespace {

// The raw string a --jit bundle keeps its kernels in (CudaModule.cpp).
constexpr const char kKernelsOpen[] = "R\"rnnc_cuda(";
constexpr const char kKernelsClose[] = ")rnnc_cuda\"";

/// clang-format puts every preprocessor line at column 0; an `#pragma omp simd`
/// or `#pragma unroll` reads better indented like the loop it annotates, and
/// so does a comment right above it.
std::string indentPragmas(const std::string &code) {
  std::vector<std::string> lines;
  std::istringstream in(code);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("#pragma ", 0) != 0) continue;
    size_t next = i + 1;
    while (next < lines.size() && (lines[next].empty() || lines[next].rfind("#pragma ", 0) == 0)) ++next;
    if (next == lines.size()) continue;
    size_t indent = lines[next].find_first_not_of(' ');
    if (indent == std::string::npos || indent == 0) continue;
    lines[i] = std::string(indent, ' ') + lines[i];
    // A comment above the pragma went to column 0 with it.
    for (size_t above = i; above-- > 0 && lines[above].rfind("//", 0) == 0;)
      lines[above] = std::string(indent, ' ') + lines[above];
  }
  std::string out;
  out.reserve(code.size() + 1024);
  for (const std::string &line : lines) out += line + "\n";
  if (!code.empty() && code.back() != '\n') out.pop_back();
  return out;
}

#ifdef RNNC_HAVE_CLANG_FORMAT
bool reformat(std::string &code, const std::string &fileName, std::string &error) {
  clang::format::FormatStyle style = clang::format::getLLVMStyle(clang::format::FormatStyle::LK_Cpp);
  if (std::error_code ec = clang::format::parseConfiguration(llvm::MemoryBufferRef(clangFormatStyle(), ".clang-format"),
                                                             &style)) {
    error = "the built-in .clang-format does not parse: " + ec.message();
    return false;
  }
  clang::format::FormattingAttemptStatus status;
  clang::tooling::Replacements replacements = clang::format::reformat(
      style, code, {clang::tooling::Range(0, static_cast<unsigned>(code.size()))}, fileName, &status);
  if (!status.FormatComplete) {
    error = "clang-format could not format " + fileName + " (line " + std::to_string(status.Line) + ")";
    return false;
  }
  llvm::Expected<std::string> formatted = clang::tooling::applyAllReplacements(code, replacements);
  if (!formatted) {
    error = "clang-format's edits of " + fileName + " do not apply: " + llvm::toString(formatted.takeError());
    return false;
  }
  code = std::move(*formatted);
  return true;
}
#endif

} // namespace

bool formatterAvailable() {
#ifdef RNNC_HAVE_CLANG_FORMAT
  return true;
#else
  return false;
#endif
}

bool formatSource(std::string &code, const std::string &fileName, std::string &error) {
#ifdef RNNC_HAVE_CLANG_FORMAT
  std::string text = code;
  size_t open = text.find(kKernelsOpen);
  if (open != std::string::npos) {
    size_t begin = open + sizeof(kKernelsOpen) - 1;
    size_t end = text.find(kKernelsClose, begin);
    if (end == std::string::npos) {
      error = "the kernel source in " + fileName + " has no end";
      return false;
    }
    std::string kernels = text.substr(begin, end - begin);
    if (!reformat(kernels, fileName + " (kernels).cu", error)) return false;
    text.replace(begin, end - begin, kernels);
  }
  if (!reformat(text, fileName, error)) return false;
  code = indentPragmas(text);
  return true;
#else
  (void)code, (void)fileName, (void)error;
  return true;
#endif
}

bool formatBundle(Bundle &b, std::string &error, std::string &skipped) {
  std::string sourceName = b.model + "." + b.sourceExtension;
  if (b.source.size() > kFormatLimitBytes) skipped = sourceName;
  else if (!formatSource(b.source, sourceName, error)) return false;
  return formatSource(b.header, b.model + ".h", error);
}

} // namespace rnnc::codegen
