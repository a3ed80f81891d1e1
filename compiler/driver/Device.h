// Which device runs `rnnc run/train/bench`: --device cpu, cuda, or auto (CUDA
// when a GPU is there). The driver is found with dlopen, so rnnc starts on
// machines with no CUDA driver and says "no CUDA device" when one is asked for.
#pragma once

#include <string>

namespace rnnc {

/// True when libcuda.so.1 loads and reports at least one device; else `why`.
bool cudaDeviceAvailable(std::string &why);

/// "cpu" or "cuda" for `asked` (auto, cpu, cuda); "" after printing an error
/// when cuda is asked for and there is none.
std::string resolveDevice(const std::string &asked);

} // namespace rnnc
