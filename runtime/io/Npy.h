// NumPy .npy files (format versions 1.0, 2.0 and 3.0): one array of float32,
// float64, int32 or int64, little-endian, C order. See docs/formats.md.
#pragma once

#include "io/Array.h"

#include <optional>
#include <string>

namespace rnnc::io {

/// Reads `path`. The file is checked before anything is allocated: magic,
/// version, header length, the header dict (descr, fortran_order, shape and no
/// other key), the shape's product, and that the data fills the rest of the
/// file exactly. On failure returns nullopt and sets `error` to one line that
/// starts with the path.
std::optional<Array> readNpy(const std::string &path, std::string &error);

/// Writes `a` in its own dtype as a version 1.0 file (2.0 when the header
/// needs more than 65535 bytes), header padded to 64 bytes, through a
/// temporary file that is renamed onto `path`: on failure nothing is written.
bool writeNpy(const std::string &path, const Array &a, std::string &error);

}  // namespace rnnc::io
