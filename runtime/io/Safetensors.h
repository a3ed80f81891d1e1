// safetensors files: named tensors of F32, F64, I32 or I64, little-endian, C
// order, as safetensors.torch.load_file / save_file read and write them.
// See docs/formats.md.
#pragma once

#include "io/Array.h"

#include <optional>
#include <string>
#include <vector>

namespace rnnc::io {

/// Reads `path`: an 8-byte little-endian header length N (at most 100 MB and
/// within the file), N bytes of JSON, then the data buffer. Every entry is
/// checked before any data is read: dtype, shape, data_offsets in range and of
/// the size the shape needs, and the entries tiling the data buffer exactly
/// (no overlap, no hole). Duplicate keys are refused; "__metadata__" is
/// checked to be a string→string map and ignored. Tensors come back in the
/// order of their data offsets. On failure returns nullopt and sets `error` to
/// one line that starts with the path.
std::optional<std::vector<Tensor>> readSafetensors(const std::string &path, std::string &error);

/// Writes `tensors` (names unique, non-empty, not "__metadata__"), data in
/// the order given, the JSON header padded with spaces to a multiple of 8,
/// through a temporary file renamed onto `path`: on failure nothing is written.
bool writeSafetensors(const std::string &path, const std::vector<Tensor> &tensors, std::string &error);

}  // namespace rnnc::io
