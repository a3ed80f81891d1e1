// How much memory a run may have, so that one whose plan needs more is refused
// with the figures before anything is allocated (Linux overcommits: a large
// allocation that "succeeds" is killed later, when it is touched). The limit
// is --max-memory when given, else the machine's physical memory; a plan is
// the workspace and the arrays a caller names (PlanParts).
#pragma once

#include "rnnc/model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace rnnc::rt {

/// Physical memory in bytes (0 if unknown).
inline int64_t physicalMemory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<int64_t>(pages) * size : 0;
}

/// "512 bytes", "3.0 KiB", "1.5 GiB".
inline std::string bytesText(double bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  char text[64];
  if (bytes < 1024) {
    std::snprintf(text, sizeof text, "%.0f bytes", bytes);
    return text;
  }
  int u = 0;
  bytes /= 1024;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  std::snprintf(text, sizeof text, "%.1f %s", bytes, units[u]);
  return text;
}

/// Parses a --max-memory value: bytes, or a number with a binary suffix K, M,
/// G or T (also KB/KiB, ...; 1K = 1024 bytes), e.g. "512M", "1.5G". 0 on a
/// malformed, non-positive or overflowing value.
inline int64_t parseBytes(const std::string &text) {
  const char *s = text.c_str();
  char *end = nullptr;
  const double value = std::strtod(s, &end);
  if (end == s || !std::isfinite(value) || value <= 0 || std::isspace(static_cast<unsigned char>(*s))) return 0;
  std::string unit(end);
  for (char &c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (!unit.empty() && unit != "B") {
    const std::string letters = "KMGT";
    const size_t at = letters.find(unit[0]);
    const std::string rest = unit.substr(1);
    if (at == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB")) return 0;
    scale = std::ldexp(1.0, 10 * static_cast<int>(at + 1));
  }
  const double bytes = std::floor(value * scale);
  if (bytes < 1 || bytes >= 9.2e18) return 0;
  return static_cast<int64_t>(bytes);
}

/// "" when `bytes` fit in `limit` (0: the machine's physical memory), else a
/// message naming both figures: "<what> needs 3.0 GiB, more than --max-memory 1.0 GiB".
inline std::string memoryShortfall(double bytes, const std::string &what, int64_t limit = 0) {
  const double have = static_cast<double>(limit > 0 ? limit : physicalMemory());
  if (have <= 0 || bytes <= have) return "";
  return what + " needs " + bytesText(bytes) +
         (limit > 0 ? ", more than --max-memory " + bytesText(have) : ", the machine has " + bytesText(have));
}

/// What a run holds besides the workspace, for T steps of B sequences, in
/// values of `realBytes` bytes (an index input's position counts as one).
struct PlanParts {
  int64_t realBytes = 4;
  int params = 1;                // flat param arrays: params, gradients, optimizer slots
  int inputs = 1;                // copies of each input over T steps (2: with its gradient)
  int outputs = 0;               // copies of each output over T steps (2: with its seed)
  bool firstOutputOnly = false;  // output 0 alone (what the training loop reads)
  bool seeds = false;            // a dL/dy over T steps for each seeded output
  bool states = false;           // each state's [depth][B][width] (carried between segments)
};

/// The bytes a run of `m` over T steps of B sequences allocates: the
/// workspace and `parts`. -1 when the workspace is too large to say
/// (workspace_bytes 0).
inline double planBytes(const rnnc_model &m, int64_t T, int64_t B, const PlanParts &parts) {
  const int64_t ws = m.workspace_bytes(T, B);
  if (ws <= 0) return -1;
  const double value = static_cast<double>(parts.realBytes), rows = static_cast<double>(T) * static_cast<double>(B);
  double bytes = static_cast<double>(ws) + value * static_cast<double>(m.param_elements) * parts.params;
  for (int32_t k = 0; k < m.n_inputs; ++k)
    bytes += value * rows * (m.inputs[k].is_index ? 1 : m.inputs[k].shape[0]) * parts.inputs;
  const int32_t outputs = parts.firstOutputOnly ? std::min(m.n_outputs, 1) : m.n_outputs;
  for (int32_t k = 0; k < outputs; ++k) bytes += value * rows * m.outputs[k].shape[0] * parts.outputs;
  for (int32_t k = 0; parts.seeds && k < m.n_seeds; ++k) bytes += value * rows * m.seeds[k].shape[0];
  for (int32_t k = 0; parts.states && k < m.n_states; ++k)
    bytes += value * m.states[k].depth * static_cast<double>(B) * m.states[k].shape[0];
  return bytes;
}

/// memoryShortfall for a plan of `m`, except that a CUDA model without a
/// limit always fits: cudaMalloc does not overcommit, so it fails cleanly.
inline std::string planShortfall(const rnnc_model &m, double bytes, const std::string &what, int64_t limit) {
  if (limit <= 0 && m.device != RNNC_DEVICE_CPU) return "";
  return memoryShortfall(bytes, what, limit);
}

} // namespace rnnc::rt
