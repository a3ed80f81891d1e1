#include "driver/Device.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace rnnc {

bool cudaDeviceAvailable(std::string &why) {
  static int known = -1;
  static std::string reason;
  if (known < 0) {
    known = 0;
    // Kept loaded: the CUDA runtime the engine uses loads it again anyway.
    void *driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) {
      reason = "the CUDA driver, libcuda.so.1, does not load";
    } else {
      using Init = int (*)(unsigned);
      using Count = int (*)(int *);
      auto init = reinterpret_cast<Init>(::dlsym(driver, "cuInit"));
      auto count = reinterpret_cast<Count>(::dlsym(driver, "cuDeviceGetCount"));
      int devices = 0, rc = 0;
      if (!init || !count) reason = "libcuda.so.1 has no cuInit";
      else if ((rc = init(0)) != 0) reason = fmt::format("cuInit failed with CUDA error {}", rc);
      else if ((rc = count(&devices)) != 0 || devices == 0) reason = "the driver reports no device";
      else known = 1;
    }
  }
  why = reason;
  return known == 1;
}

std::optional<codegen::Target> resolveDevice(const std::string &asked) {
  std::string why;
  if (codegen::parseTarget(asked) == codegen::Target::Cpu) return codegen::Target::Cpu;
  if (cudaDeviceAvailable(why)) return codegen::Target::Cuda;
  if (asked == "auto") return codegen::Target::Cpu;
  fmt::print(stderr, "rnnc: error: --device cuda: no CUDA device: {}; --device cpu runs the generated C++\n", why);
  return std::nullopt;
}

} // namespace rnnc
