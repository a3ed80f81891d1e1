// The array and file helpers declared in Array.h, shared by the .npy and
// safetensors code: dtypes, checked sizes, value conversion, reading a file
// by offsets, and writing one atomically (temporary file, fsync, rename).
#include "io/Array.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <csignal>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .npy and .safetensors code assumes a little-endian host");

namespace rnnc::io {

// ---------------------------------------------------------------------------
// Shared helpers (declared in Array.h).
// ---------------------------------------------------------------------------

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "float32";
  case DType::F64: return "float64";
  case DType::I32: return "int32";
  case DType::I64: return "int64";
  }
  return "?";
}

int64_t dtypeSize(DType t) { return t == DType::F32 || t == DType::I32 ? 4 : 8; }

int64_t Array::elements() const { return checkedBytes(shape, 1).value_or(-1); }

std::string shapeText(const std::vector<int64_t> &shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::optional<int64_t> checkedBytes(const std::vector<int64_t> &dims, int64_t itemSize) {
  int64_t n = itemSize;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

namespace {

bool fitsDtype(DType t, double v) {
  switch (t) {
  case DType::F32:
  case DType::F64: return true;
  case DType::I32: return v >= -2147483648.0 && v <= 2147483647.0 && v == std::trunc(v);
  case DType::I64: return v >= -9223372036854775808.0 && v < 9223372036854775808.0 && v == std::trunc(v);
  }
  return false;
}

template <typename T> void appendRaw(std::string &out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <typename T> double loadRaw(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<double>(v);
}

/// double → float as IEEE rounding does it, without the undefined behaviour
/// of converting a finite double beyond float's range.
float toFloat(double v) {
  if (std::isfinite(v) && std::fabs(v) >= 0x1.ffffffp127) return v > 0 ? HUGE_VALF : -HUGE_VALF;
  return static_cast<float>(v);
}

}  // namespace

bool checkWritable(const Array &a, std::string &error) {
  for (int64_t d : a.shape) {
    if (d < 0) {
      error = fmt::format("shape {} has a negative dim", shapeText(a.shape));
      return false;
    }
  }
  auto bytes = checkedBytes(a.shape, dtypeSize(a.dtype));
  if (!bytes) {
    error = fmt::format("shape {} of {} has more bytes than an int64 holds", shapeText(a.shape), dtypeName(a.dtype));
    return false;
  }
  int64_t n = *bytes / dtypeSize(a.dtype);
  if (static_cast<uint64_t>(n) != a.data.size()) {
    error = fmt::format("array has {} values, its shape {} needs {}", a.data.size(), shapeText(a.shape), n);
    return false;
  }
  for (size_t i = 0; i < a.data.size(); ++i) {
    if (!fitsDtype(a.dtype, a.data[i])) {
      error = fmt::format("value {} at index {} is not an {}", a.data[i], i, dtypeName(a.dtype));
      return false;
    }
  }
  return true;
}

void appendValues(const Array &a, std::string &out) {
  out.reserve(out.size() + a.data.size() * static_cast<size_t>(dtypeSize(a.dtype)));
  for (double v : a.data) {
    switch (a.dtype) {
    case DType::F32: appendRaw(out, toFloat(v)); break;
    case DType::F64: appendRaw(out, v); break;
    case DType::I32: appendRaw(out, static_cast<int32_t>(v)); break;
    case DType::I64: appendRaw(out, static_cast<int64_t>(v)); break;
    }
  }
}

void appendDecoded(DType dtype, const char *bytes, int64_t count, std::vector<double> &out) {
  int64_t size = dtypeSize(dtype);
  for (int64_t i = 0; i < count; ++i) {
    const char *p = bytes + i * size;
    switch (dtype) {
    case DType::F32: out.push_back(loadRaw<float>(p)); break;
    case DType::F64: out.push_back(loadRaw<double>(p)); break;
    case DType::I32: out.push_back(loadRaw<int32_t>(p)); break;
    case DType::I64: out.push_back(loadRaw<int64_t>(p)); break;
    }
  }
}

std::optional<InputFile> InputFile::open(const std::string &path, std::string &error) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it next.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = fmt::format("{}: cannot open: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  InputFile file(path, fd, 0);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = fmt::format("{}: cannot stat: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    error = fmt::format("{}: is a directory, not a file", path);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    error = fmt::format("{}: not a regular file", path);
    return std::nullopt;
  }
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ > kMaxFileBytes) {
    error = fmt::format("{}: file is {} bytes, more than the limit of {} GiB", path, file.size_, kMaxFileBytes >> 30);
    return std::nullopt;
  }
  return file;
}

InputFile::InputFile(InputFile &&other) noexcept : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool InputFile::read(uint64_t offset, uint64_t n, char *out, std::string &error) const {
  while (n > 0) {
    ssize_t got = ::pread(fd_, out, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      error = fmt::format("{}: read failed: {}", path_, std::strerror(errno));
      return false;
    }
    if (got == 0) {
      error = fmt::format("{}: file ended early (did it change while being read?)", path_);
      return false;
    }
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return true;
}

namespace {

/// The temporary file a write of `path` goes through: ".<name>.<pid>-<n>.rnnc-tmp",
/// beside it, so that a later write can tell a dead writer's leftovers.
std::string tempName(const std::string &path, long pid, unsigned n) {
  return fmt::format(".{}.{}-{}.rnnc-tmp", std::filesystem::path(path).filename().string(), pid, n);
}

/// Removes what writers of `path` killed mid-write (SIGKILL, power loss) left
/// beside it: temporary files of its name whose process is gone.
void removeStaleTemps(const std::filesystem::path &dir, const std::string &path) {
  const std::string prefix = "." + std::filesystem::path(path).filename().string() + ".";
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    long pid = 0;
    auto [end, bad] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (bad != std::errc() || pid <= 0 || *end != '-' || rest.size() < 9 ||
        rest.compare(rest.size() - 9, 9, ".rnnc-tmp") != 0)
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

bool writeFileAtomically(const std::string &path, const std::string &bytes, std::string &error) {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = (dir / tempName(path, ::getpid(), counter++)).string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    error = fmt::format("{}: cannot create a file in '{}': {}", path, dir.string(), std::strerror(errno));
    return false;
  }
  auto fail = [&](const char *what) {
    error = fmt::format("{}: {}: {}", path, what, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  };
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t put = ::write(fd, p, std::min<size_t>(left, 1u << 30));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return fail("write failed");
    p += put;
    left -= static_cast<size_t>(put);
  }
  if (::fsync(fd) != 0) return fail("fsync failed");
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("close failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename the temporary file onto it");
  // Make the rename itself durable; a failure here loses nothing already written.
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  removeStaleTemps(dir, path);
  return true;
}


}  // namespace rnnc::io
