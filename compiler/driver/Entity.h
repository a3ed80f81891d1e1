// What the commands share about a file they read: which cell or model to
// compile, and the closing line of its diagnostics.
#pragma once

#include "frontend/Frontend.h"

#include <string>

namespace rnnc {

/// --entry NAME, else the file's only model, else its only root cell; its
/// dims must all have values. Null after printing why not.
const Elaboration *selectEntity(const FrontendResult &r, const std::string &file, const std::string &entry);

/// "2 warnings and 1 error generated." on stderr (nothing when clean).
void printSummary(const DiagnosticEngine &d);

} // namespace rnnc
