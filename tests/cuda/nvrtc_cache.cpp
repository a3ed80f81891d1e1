// The on-disk cache of --jit kernels (rnnc/cuda_jit.h's compile_cached), with
// no GPU: PTX for compute_90 is compiled once and kept under $RNNC_CACHE/cuda;
// a second call reads the same bytes back; a damaged or truncated cache file
// is not trusted but compiled again and replaced; another source gets another
// file. Exit 0 when all of that holds.
#include "rnnc/cuda_jit.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

int failures = 0;

void expect(bool good, const char *what) {
  std::printf("%s %s\n", good ? "ok  " : "FAIL", what);
  failures += !good;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: rnnc-nvrtc-cache SCRATCH_DIR\n");
    return 2;
  }
  ::setenv("RNNC_CACHE", argv[1], 1);
  const std::string source = "extern \"C\" __global__ void twice(float *a) { a[threadIdx.x] *= 2.0f; }\n";
  std::string code, path;
  if (!rnnc::cuda::compile_cached(source, "compute_90", code, path)) {
    std::fprintf(stderr, "rnnc-nvrtc-cache: %s\n", rnnc::cuda::last_error().c_str());
    return 1;
  }
  expect(!path.empty() && path.rfind(std::string(argv[1]) + "/cuda/", 0) == 0, "the file is under $RNNC_CACHE/cuda");
  expect(rnnc::cuda::plausible_code(code, "compute_90"), "NVRTC gave PTX");
  expect(slurp(path) == code, "the cache holds what NVRTC gave");

  std::string again, againPath;
  spit(path, code.substr(0, code.size() / 2) + "\n// marked by the test\n" + code.substr(code.size() / 2));
  rnnc::cuda::compile_cached(source, "compute_90", again, againPath);
  expect(againPath == path && again.find("marked by the test") != std::string::npos,
         "a second call reads the cache, not NVRTC");

  spit(path, "garbage");
  rnnc::cuda::compile_cached(source, "compute_90", again, againPath);
  expect(again == code, "a damaged cache file is compiled again");
  expect(slurp(path) == code, "and replaced");

  spit(path, "");
  rnnc::cuda::compile_cached(source, "compute_90", again, againPath);
  expect(again == code && slurp(path) == code, "an empty cache file too");

  std::string other, otherPath;
  rnnc::cuda::compile_cached(source + "// another\n", "compute_90", other, otherPath);
  expect(otherPath != path, "another source has another file");
  std::string sm, smPath;
  expect(rnnc::cuda::compile_cached(source, "sm_90", sm, smPath) && rnnc::cuda::plausible_code(sm, "sm_90") &&
             smPath != path,
         "sm_90 is a cubin in a file of its own");
  return failures ? 1 : 0;
}
