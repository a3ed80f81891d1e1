// An Inspection printed: as text (one block per kernel, its launches
// indented; problems clang style) or as JSON (the schema of docs/inspect.md).
#pragma once

#include "Inspection.h"

#include <string>

namespace rnnc::inspect {

std::string textReport(const Inspection &inspection);
std::string jsonReport(const Inspection &inspection);

} // namespace rnnc::inspect
