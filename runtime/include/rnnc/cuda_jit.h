// NVRTC for `rnnc compile --target cuda --jit` bundles: the kernels' source,
// compiled at load time for the GPU that is there and kept in an on-disk
// cache keyed by a hash of the source, the architecture and NVRTC's version,
// then loaded with the runtime API's library calls (no driver API, so nothing
// links libcuda). Header-only; link nvrtc beside cudart, cublas and cublasLt.
#pragma once

#include "rnnc/cuda.h"

#include <nvrtc.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace rnnc::cuda {

inline bool ok(nvrtcResult r, const char *call) {
  if (r == NVRTC_SUCCESS) return true;
  last_error() = callName(call) + ": " + nvrtcGetErrorString(r);
  return false;
}

/// Compiles `source` for `arch` ("sm_90": a cubin; "compute_90": PTX) with
/// extra `options`. The binary goes to `code`, NVRTC's log (ptxas's with
/// --ptxas-options=-v) to `log`. False with last_error() naming what failed.
inline bool nvrtc_compile(const std::string &source, const std::string &name, const std::string &arch,
                          const std::vector<std::string> &options, std::string &code, std::string &log) {
  nvrtcProgram prog = nullptr;
  if (!ok(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram"))
    return false;
  std::vector<std::string> all = {"-arch=" + arch, "-std=c++17"};
  all.insert(all.end(), options.begin(), options.end());
  std::vector<const char *> argv;
  for (const std::string &o : all) argv.push_back(o.c_str());
  nvrtcResult built = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t logSize = 0;
  nvrtcGetProgramLogSize(prog, &logSize);
  log.assign(logSize, '\0');
  if (logSize) nvrtcGetProgramLog(prog, &log[0]);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  bool cubin = arch.rfind("sm_", 0) == 0;
  size_t size = 0;
  bool good = ok(built, "nvrtcCompileProgram") &&
              (cubin ? ok(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize")
                     : ok(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize"));
  if (good) {
    code.assign(size, '\0');
    good = cubin ? ok(nvrtcGetCUBIN(prog, &code[0]), "nvrtcGetCUBIN") : ok(nvrtcGetPTX(prog, &code[0]), "nvrtcGetPTX");
  }
  if (!good && !log.empty()) last_error() += "\n" + log;
  nvrtcDestroyProgram(&prog);
  return good;
}

/// Where compiled kernels are kept: $RNNC_CACHE/cuda, else
/// $XDG_CACHE_HOME/rnnc/cuda, else ~/.cache/rnnc/cuda ("" if none).
inline std::string kernel_cache_dir() {
  std::string base;
  if (const char *c = std::getenv("RNNC_CACHE"); c && *c) base = c;
  else if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) base = std::string(x) + "/rnnc";
  else if (const char *h = std::getenv("HOME"); h && *h) base = std::string(h) + "/.cache/rnnc";
  if (base.empty()) return "";
  std::string dir = base + "/cuda";
  // Each level in turn; an existing one is fine.
  for (size_t at = 1; at != std::string::npos; at = dir.find('/', at + 1)) ::mkdir(dir.substr(0, at).c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

inline uint64_t fnv1a_text(const std::string &s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// Whether `code` looks like what NVRTC gives for `arch`: an ELF cubin for
/// sm_XY, PTX text (".version" near the top) for compute_XY. A cached file
/// that does not is compiled again: the cache is not trusted.
inline bool plausible_code(const std::string &code, const std::string &arch) {
  if (arch.rfind("sm_", 0) == 0) return code.size() > 64 && code.compare(0, 4, "\x7f" "ELF") == 0;
  return code.size() > 16 && code.find(".version") != std::string::npos && code.find(".version") < 4096;
}

/// `source` compiled for `arch`, from the on-disk cache when a plausible copy
/// of the same source, architecture and NVRTC version is there, else
/// compiled and kept (written under a private name, then renamed into
/// place). `refresh` skips the cache. `path` gets the cache file ("" if
/// none). False with last_error() set when NVRTC fails.
inline bool compile_cached(const std::string &source, const std::string &arch, std::string &code, std::string &path,
                           bool refresh = false) {
  int major = 0, minor = 0;
  if (!ok(nvrtcVersion(&major, &minor), "nvrtcVersion")) return false;
  std::ostringstream key;
  key << std::hex << fnv1a_text(source + "\n" + arch + "\n" + std::to_string(major) + "." + std::to_string(minor));
  std::string dir = kernel_cache_dir();
  path = dir.empty() ? "" : dir + "/" + key.str() + "." + arch + (arch.rfind("sm_", 0) == 0 ? ".cubin" : ".ptx");
  code.clear();
  if (!path.empty() && !refresh) {
    std::ifstream in(path, std::ios::binary);
    if (in) code.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!plausible_code(code, arch)) code.clear();
  }
  if (!code.empty()) return true;
  std::string log;
  if (!nvrtc_compile(source, "rnnc_kernels.cu", arch, {}, code, log)) return false;
  if (!path.empty()) {
    std::string tmp = path + ".tmp" + std::to_string(::getpid());
    std::ofstream out(tmp, std::ios::binary);
    out.write(code.data(), static_cast<std::streamsize>(code.size()));
    out.close();
    if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
  }
  return true;
}

/// Compiles (or finds in the cache) `source` for the current device and
/// loads the kernels `names` into `kernels` (cudaKernel_t, launched with
/// cudaLaunchKernel). Returns 0, or 1 with last_error() set.
inline int load_kernels(const char *source, const char *const *names, int n, const void **kernels) {
  int device = 0, major = 0, minor = 0;
  RNNC_CUDA_CHECK(cudaGetDevice(&device));
  RNNC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RNNC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  // A cubin for this GPU; PTX for the driver to finish when NVRTC does not know it.
  int count = 0;
  nvrtcGetNumSupportedArchs(&count);
  std::vector<int> archs(static_cast<size_t>(count));
  if (count) nvrtcGetSupportedArchs(archs.data());
  int cc = major * 10 + minor;
  bool known = false;
  for (int a : archs) known |= a == cc;
  std::string arch = (known ? "sm_" : "compute_") + std::to_string(known ? cc : archs.empty() ? 52 : archs.back());
  std::string code, path;
  if (!compile_cached(source, arch, code, path)) return 1;
  cudaLibrary_t library = nullptr; // kept for the life of the process, like the kernels in a .cu
  if (cudaLibraryLoadData(&library, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess) {
    // A cached copy the driver refuses: compiled afresh, once.
    cudaGetLastError();
    if (!compile_cached(source, arch, code, path, /*refresh=*/true)) return 1;
    RNNC_CUDA_CHECK(cudaLibraryLoadData(&library, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  for (int k = 0; k < n; ++k) {
    cudaKernel_t kernel = nullptr;
    RNNC_CUDA_CHECK(cudaLibraryGetKernel(&kernel, library, names[k]));
    kernels[k] = reinterpret_cast<const void *>(kernel);
  }
  return 0;
}

} // namespace rnnc::cuda
