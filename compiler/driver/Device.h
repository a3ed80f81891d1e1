// Which device runs `rnnc run/train/bench`: --device cpu, cuda, or auto (CUDA
// when a GPU is there). The driver is found with dlopen, so rnnc starts on
// machines with no CUDA driver and says "no CUDA device" when one is asked for.
#pragma once

#include "codegen/Bundle.h"

#include <optional>
#include <string>

namespace rnnc {

/// True when libcuda.so.1 loads and reports at least one device; else `why`.
bool cudaDeviceAvailable(std::string &why);

/// The target that runs for `asked` (auto, cpu, cuda); nullopt after printing
/// an error when cuda is asked for and there is none.
std::optional<codegen::Target> resolveDevice(const std::string &asked);

} // namespace rnnc
