// The fuzz targets' scratch file: the readers under test take a path, so each
// input is written to one file per process (in $TMPDIR) before it is read.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace rnnc::fuzz {

class ScratchFile {
public:
  explicit ScratchFile(const char *what) {
    const char *dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/rnnc-fuzz-" + what + "-" + std::to_string(::getpid());
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  const std::string &path() const { return path_; }

  /// Replaces the file's content with `size` bytes; aborts when it cannot.
  void write(const uint8_t *data, size_t size) const {
    std::FILE *f = std::fopen(path_.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    if (std::fclose(f) != 0) std::abort();
  }

private:
  std::string path_;
};

}  // namespace rnnc::fuzz
