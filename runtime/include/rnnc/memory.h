// How much memory this machine has, so that a run whose plan needs more is
// refused with the figures before anything is allocated (Linux overcommits:
// a large allocation that "succeeds" is killed later, when it is touched).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace rnnc::rt {

/// Physical memory in bytes (0 if unknown).
inline int64_t physicalMemory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<int64_t>(pages) * size : 0;
}

/// "" when `bytes` fit in the machine, else a message naming both figures.
inline std::string memoryShortfall(double bytes, const std::string &what) {
  double have = static_cast<double>(physicalMemory());
  if (have <= 0 || bytes <= have) return "";
  char text[96];
  std::snprintf(text, sizeof text, " needs %.1f GB, the machine has %.1f GB", bytes / 1e9, have / 1e9);
  return what + text;
}

} // namespace rnnc::rt
