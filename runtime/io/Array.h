// The arrays rnnc reads and writes (.npy, .safetensors): a dtype, a shape and
// the values as doubles, plus the checked file access both formats share.
// Every reader treats its file as untrusted: sizes are checked before anything
// is allocated, and every error names the file and what is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rnnc::io {

enum class DType { F32, F64, I32, I64 };

/// NumPy's name of the dtype: "float32", "float64", "int32", "int64".
const char *dtypeName(DType);

/// Bytes per element: 4 or 8.
int64_t dtypeSize(DType);

/// An array in C (row-major) order. The values are held as doubles, which is
/// exact for every value of these dtypes within 2^53.
struct Array {
  DType dtype = DType::F64;
  std::vector<int64_t> shape;  // empty: a scalar (one element)
  std::vector<double> data;
  /// The product of the shape (1 for a scalar); -1 when a dim is negative or
  /// the product overflows int64.
  int64_t elements() const;
};

struct Tensor {
  std::string name;
  Array array;
};

/// Files larger than this are refused before any of them is read.
constexpr uint64_t kMaxFileBytes = 16ull << 30;

/// "[10, 20]" ("[]" for a scalar).
std::string shapeText(const std::vector<int64_t> &shape);

/// The product of `dims` times `itemSize`, or nullopt when a dim is negative
/// or the product overflows int64.
std::optional<int64_t> checkedBytes(const std::vector<int64_t> &dims, int64_t itemSize);

/// Checks that `a` is writable: no negative dim, no overflow, as many values as
/// its shape needs, and (for integer dtypes) only integral values in range.
bool checkWritable(const Array &a, std::string &error);

/// Appends the values of `a` in its dtype, little-endian (after checkWritable).
void appendValues(const Array &a, std::string &out);

/// Converts `count` little-endian values of `dtype` at `bytes` and appends them.
void appendDecoded(DType dtype, const char *bytes, int64_t count, std::vector<double> &out);

/// A regular file opened for reading, its size checked against kMaxFileBytes.
/// Directories, devices and FIFOs are refused (a FIFO is never waited on).
class InputFile {
public:
  static std::optional<InputFile> open(const std::string &path, std::string &error);
  InputFile(InputFile &&other) noexcept;
  InputFile &operator=(InputFile &&) = delete;
  InputFile(const InputFile &) = delete;
  ~InputFile();

  uint64_t size() const { return size_; }
  /// Reads exactly `n` bytes at `offset` into `out`; false (with error) on a
  /// short read, e.g. when the file shrank after it was opened.
  bool read(uint64_t offset, uint64_t n, char *out, std::string &error) const;

private:
  InputFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// Writes `bytes` to a temporary file in the directory of `path`, fsyncs it
/// and renames it onto `path`. On failure nothing is left behind and `path`
/// keeps its old content.
bool writeFileAtomically(const std::string &path, const std::string &bytes, std::string &error);

}  // namespace rnnc::io
