// safetensors files: named tensors of F32, F64, I32 or I64, little-endian, C
// order, as safetensors.torch.load_file / save_file read and write them.
// See docs/formats.md.
#pragma once

#include "io/Array.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rnnc::io {

/// Reads `path`: an 8-byte little-endian header length N (at most 100 MB and
/// within the file), N bytes of JSON, then the data buffer. Every entry is
/// checked before any data is read: dtype, shape, data_offsets in range and of
/// the size the shape needs, and the entries tiling the data buffer exactly
/// (no overlap, no hole). Duplicate keys are refused; "__metadata__" is
/// checked to be a string→string map and, when `metadata` is given, returned
/// there. Tensors come back in the order of their data offsets. On failure
/// returns nullopt and sets `error` to one line that starts with the path.
std::optional<std::vector<Tensor>> readSafetensors(const std::string &path, std::string &error,
                                                   std::map<std::string, std::string> *metadata = nullptr);

/// When `path` looks like a safetensors file cut short (its header, or the
/// data its header describes, runs past the end of the file), says so in a
/// few words ("the header promises 4104 bytes, the file has 4000"); nullopt
/// otherwise. Used to tell a truncated copy from a corrupt one.
std::optional<std::string> describeTruncation(const std::string &path);

/// Writes `tensors` (names unique, non-empty, not "__metadata__"), data in
/// the order given, the JSON header padded with spaces to a multiple of 8,
/// through a temporary file that is fsynced and renamed onto `path`: on
/// failure nothing is written. A non-empty `metadata` becomes the header's
/// "__metadata__" map (written first, as safetensors.torch does).
bool writeSafetensors(const std::string &path, const std::vector<Tensor> &tensors, std::string &error,
                      const std::map<std::string, std::string> &metadata = {});

}  // namespace rnnc::io
