// Which cell or model of a file a command compiles.
#pragma once

#include "frontend/Frontend.h"

#include <string>

namespace rnnc {

/// --entry NAME, else the file's only model, else its only root cell; its
/// dims must all have values. Null after printing why not.
const Elaboration *selectEntity(const FrontendResult &r, const std::string &file, const std::string &entry);

} // namespace rnnc
