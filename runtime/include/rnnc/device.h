// Arrays where a model's entry points want them: host memory for a CPU
// model, device memory for a CUDA model (through the model's own
// device_alloc/device_copy, so the program driving it links no CUDA
// library). Everything allocated is freed with the ModelMemory. RealArrays
// keeps float host arrays for a model of any float dtype.
#pragma once

#include "rnnc/half.h"
#include "rnnc/model.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace rnnc::rt {

class ModelMemory {
public:
  explicit ModelMemory(const rnnc_model &m) : m_(m) {}
  ModelMemory(const ModelMemory &) = delete;
  ModelMemory &operator=(const ModelMemory &) = delete;
  ~ModelMemory() {
    for (void *p : owned_) onDevice() ? m_.device_free(p) : std::free(p);
  }

  bool onDevice() const { return m_.device == RNNC_DEVICE_CUDA; }

  /// `bytes` the model may read and write (host: 64-byte aligned). Null
  /// when they cannot be had; error() says why.
  void *alloc(int64_t bytes) {
    size_t n = static_cast<size_t>((bytes > 0 ? bytes : 1) + 63) / 64 * 64;
    void *p = onDevice() ? m_.device_alloc(static_cast<int64_t>(n)) : std::aligned_alloc(64, n);
    if (!p) error_ = "cannot allocate " + std::to_string(bytes) + " bytes" + (onDevice() ? std::string(" on the device: ") + m_.last_error() : "");
    else owned_.push_back(p);
    return p;
  }

  /// Where the model reads and writes what the host keeps in `host`: the
  /// array itself on the CPU, `bytes` of device memory on CUDA (copied with
  /// upload and download). Null on failure.
  void *mirror(void *host, int64_t bytes) {
    if (!host && bytes == 0 && !onDevice()) return emptyArray();
    return onDevice() ? alloc(bytes) : host;
  }

  /// The host array `host` where the model reads it: itself on the CPU, a
  /// device copy on CUDA. Null on failure.
  const void *in(const void *host, int64_t bytes) {
    if (!host && bytes == 0 && !onDevice()) return emptyArray();
    if (!onDevice() || !host) return host;
    void *p = alloc(bytes);
    if (p && !upload(p, host, bytes)) return nullptr;
    return p;
  }

  /// Copies `bytes` from host memory into the model's memory at `model`.
  bool upload(void *model, const void *host, int64_t bytes) {
    if (!onDevice()) {
      if (model != host && bytes > 0) std::memcpy(model, host, static_cast<size_t>(bytes));
      return true;
    }
    return check(m_.device_copy(model, host, bytes, RNNC_COPY_TO_DEVICE));
  }

  /// Copies `bytes` of the model's memory at `model` out to host memory.
  bool download(void *host, const void *model, int64_t bytes) {
    if (!onDevice()) {
      if (model != host && bytes > 0) std::memcpy(host, model, static_cast<size_t>(bytes));
      return true;
    }
    return check(m_.device_copy(host, model, bytes, RNNC_COPY_TO_HOST));
  }

  const std::string &error() const { return error_; }

private:
  /// Where an array of no elements (a model with no params) is: a valid
  /// pointer the model never reads, so that null keeps meaning "failed".
  static void *emptyArray() {
    alignas(64) static char none[64];
    return none;
  }
  bool check(int rc) {
    if (rc == 0) return true;
    error_ = m_.last_error();
    return false;
  }
  const rnnc_model &m_;
  std::vector<void *> owned_;
  std::string error_;
};

/// Float host arrays where a float32, bf16 or f16 model reads and writes
/// them: for a float32 model exactly ModelMemory's arrays (the host array
/// itself on the CPU); for a 16-bit one (--dtype bf16|f16) arrays of its own,
/// which upload rounds into from the floats and download converts back from.
class RealArrays {
public:
  RealArrays(const rnnc_model &m, ModelMemory &mem) : m_(m), mem_(mem) {}
  /// Whether the model's reals are 16 bits wide (and every array is a copy).
  bool converts() const { return m_.dtype == RNNC_DTYPE_BF16 || m_.dtype == RNNC_DTYPE_F16; }
  /// Where the model keeps the n floats of `host`. Null on failure (mem's error()).
  void *mirror(float *host, int64_t n) { return converts() ? mem_.alloc(n * 2) : mem_.mirror(host, n * 4); }
  /// n reals of the model's own (not mirroring a host array).
  void *alloc(int64_t n) { return mem_.alloc(n * m_.real_bytes); }
  bool upload(void *model, const float *host, int64_t n) {
    if (!converts()) return mem_.upload(model, host, n * 4);
    staging_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      staging_[i] = m_.dtype == RNNC_DTYPE_BF16 ? half::bf16_bits(host[i]) : half::f16_bits(host[i]);
    return mem_.upload(model, staging_.data(), n * 2);
  }
  bool download(float *host, const void *model, int64_t n) {
    if (!converts()) return mem_.download(host, model, n * 4);
    staging_.resize(static_cast<size_t>(n));
    if (!mem_.download(staging_.data(), model, n * 2)) return false;
    for (int64_t i = 0; i < n; ++i)
      host[i] = m_.dtype == RNNC_DTYPE_BF16 ? half::bf16_float(staging_[i]) : half::f16_float(staging_[i]);
    return true;
  }

private:
  const rnnc_model &m_;
  ModelMemory &mem_;
  std::vector<uint16_t> staging_;
};

} // namespace rnnc::rt
