// Formats the code rnnc emits with clang-format's library, in the style of the
// .clang-format every bundle ships (docs/codegen.md, "Formatting"). A build
// without Clang (RNNC_WITH_CLANG=OFF) leaves the code as the printers wrote it.
#pragma once

#include "codegen/Bundle.h"

#include <string>

namespace rnnc::codegen {

/// The text of the .clang-format that ships in a bundle and that rnnc formats with.
const std::string &clangFormatStyle();

/// Whether this rnnc was built with clang-format's library.
bool formatterAvailable();

/// Formats `code` as the language of `fileName` (".cu", ".cpp", ".h"); the kernel
/// source a --jit bundle holds in its raw string is formatted as CUDA in place.
/// On failure sets `error` and leaves `code` as it was.
bool formatSource(std::string &code, const std::string &fileName, std::string &error);

/// clang-format takes about 2 s and 200 MB per MiB of generated code; a source
/// larger than this (a cell of thousands of equations) is left as printed.
constexpr size_t kFormatLimitBytes = size_t(1) << 20;

/// Formats the bundle's source and header. Returns false on failure (`error`);
/// `skipped` names a file left as printed because it exceeds kFormatLimitBytes.
bool formatBundle(Bundle &b, std::string &error, std::string &skipped);

} // namespace rnnc::codegen
