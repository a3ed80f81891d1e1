// The stand-in CUDA headers of tools/rnnc-inspect/include, compiled into the
// binary (embed.cmake writes Shims.cpp). Each parse maps them as virtual
// files, so the tool needs neither CUDA nor its source tree to run.
#pragma once

#include <cstddef>

namespace rnnc::inspect {

struct ShimFile {
  const char *name; // "cuda_runtime.h"
  const char *text;
};

extern const ShimFile kShims[];
extern const size_t kShimCount;

} // namespace rnnc::inspect
