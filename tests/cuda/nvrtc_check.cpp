// rnnc-nvrtc-check: compiles the kernels of `rnnc compile --target cuda --jit`
// bundles in-process with NVRTC, as load time would, on a machine with or
// without a GPU (DESIGN.md §7: "every sample's kernels compile with NVRTC
// (compute_80, compute_90) ... ptxas reports no spills for fused kernels").
//
//   rnnc-nvrtc-check [--quiet] BUNDLE.cpp...
//
// For each bundle: the kernel source is the raw string literal
// `kKernelSource[] = R"rnnc_cuda(...)rnnc_cuda"`; it is compiled with no
// include path (it must stand alone, as rnnc/cuda_jit.h compiles it):
//   compute_80 PTX, compute_90 PTX      float
//   sm_90 cubin, --ptxas-options=-v     float; ptxas's report read per kernel
//   compute_90 PTX                      double (RNNC_REAL_DOUBLE defined first), but
//                                       for a 16-bit bundle (--dtype bf16|f16: float only)
// and one line is printed per kernel of the sm_90 build:
//   LSTM.cpp: fused_2 sm_90 registers 30 stack 0 spill-stores 0 spill-loads 0
// Every name in the host part's kKernelNames must be a kernel of the build.
// Exit status 0 when everything compiled without a warning and no kernel rnnc writes (fused_*,
// initial_*, fill, grad_embed) spills; 1 otherwise (each failure is named on
// stderr); 2 on bad usage or an unreadable file.
//
// Links NVRTC only: nothing here calls the CUDA runtime or the driver, so it
// runs where there is no GPU and no driver.
#include "rnnc/cuda_jit.h"

#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct KernelReport {
  int registers = -1;
  long stack = 0, spillStores = 0, spillLoads = 0;
  bool entry = false;
};

/// The kernels rnnc writes itself: no spill is allowed in them.
bool mustNotSpill(const std::string &name) {
  return name.rfind("fused_", 0) == 0 || name.rfind("initial_", 0) == 0 || name == "fill" || name == "grad_embed" ||
         name == "mean";
}

/// ptxas's -v report, per function: "Compiling entry function 'X'",
/// "Function properties for X" then "N bytes stack frame, N bytes spill
/// stores, N bytes spill loads", "Used N registers".
std::map<std::string, KernelReport> parsePtxasLog(const std::string &log, std::vector<std::string> &order) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props(R"(Function properties for ([A-Za-z_0-9$.]+))");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  std::map<std::string, KernelReport> out;
  std::string current;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      current = m[1];
      if (!out.count(current)) order.push_back(current);
      out[current].entry = true;
    } else if (std::regex_search(line, m, props)) {
      current = m[1];
      if (!out.count(current)) order.push_back(current);
      out[current];
    } else if (!current.empty() && std::regex_search(line, m, frame)) {
      KernelReport &k = out[current];
      k.stack = std::stol(m[1]);
      k.spillStores = std::stol(m[2]);
      k.spillLoads = std::stol(m[3]);
    } else if (!current.empty() && std::regex_search(line, m, used)) {
      out[current].registers = std::stoi(m[1]);
    }
  }
  return out;
}

/// The names in the host part's `kKernelNames[] = {"fill", ...}`: what
/// load_kernels asks the compiled library for.
std::vector<std::string> kernelNames(const std::string &text) {
  std::vector<std::string> names;
  const std::string open = "kKernelNames[] = {";
  size_t begin = text.rfind(open);
  if (begin == std::string::npos) return names;
  size_t end = text.find('}', begin);
  static const std::regex quoted("\"([^\"]*)\"");
  std::string list = text.substr(begin + open.size(), end - begin - open.size());
  for (std::sregex_iterator it(list.begin(), list.end(), quoted), stop; it != stop; ++it) names.push_back((*it)[1]);
  return names;
}

/// The text of the raw string kKernelSource, or "" with `why` set.
std::string kernelSource(const std::string &text, std::string &why) {
  const std::string open = "kKernelSource[] = R\"rnnc_cuda(", close = ")rnnc_cuda\"";
  size_t begin = text.find(open);
  if (begin == std::string::npos) {
    why = "no `kKernelSource[] = R\"rnnc_cuda(` (not a --jit bundle?)";
    return "";
  }
  begin += open.size();
  size_t end = text.find(close, begin);
  if (end == std::string::npos) {
    why = "kKernelSource is not closed by )rnnc_cuda\"";
    return "";
  }
  if (text.find(open, end) != std::string::npos) {
    why = "more than one kKernelSource";
    return "";
  }
  return text.substr(begin, end - begin);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

int main(int argc, char **argv) {
  bool quiet = false;
  std::vector<std::string> files;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--quiet") quiet = true;
    else if (arg == "-h" || arg == "--help") {
      std::cout << "usage: rnnc-nvrtc-check [--quiet] BUNDLE.cpp...\n";
      return 0;
    } else if (!arg.empty() && arg[0] == '-') {
      std::cerr << "rnnc-nvrtc-check: unknown option " << arg << "\n";
      return 2;
    } else files.push_back(arg);
  }
  if (files.empty()) {
    std::cerr << "usage: rnnc-nvrtc-check [--quiet] BUNDLE.cpp...\n";
    return 2;
  }
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  if (!quiet) std::cout << "NVRTC " << major << "." << minor << "\n";

  int failures = 0;
  for (const std::string &path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << path << ": cannot read\n";
      return 2;
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string why;
    std::string source = kernelSource(text, why);
    const std::string name = baseName(path);
    if (source.empty()) {
      std::cerr << path << ": " << why << "\n";
      ++failures;
      continue;
    }
    struct Build {
      const char *what, *arch, *prefix;
      bool verbose;
    };
    const Build builds[] = {
        {"float", "compute_80", "", false},
        {"float", "compute_90", "", false},
        {"float", "sm_90", "", true},
        {"double", "compute_90", "#define RNNC_REAL_DOUBLE\n", false},
    };
    // A 16-bit bundle (--dtype bf16|f16) computes in float only: it #errors under RNNC_REAL_DOUBLE.
    const bool half = source.find("a 16-bit bundle computes in float") != std::string::npos;
    for (const Build &b : builds) {
      if (half && b.prefix[0]) continue;
      std::string code, log;
      std::vector<std::string> options;
      if (b.verbose) options.push_back("--ptxas-options=-v");
      // The program name shows in NVRTC's messages: the bundle's file.
      if (!rnnc::cuda::nvrtc_compile(b.prefix + source, name, b.arch, options, code, log)) {
        std::cerr << path << ": " << b.what << " " << b.arch << ": " << rnnc::cuda::last_error() << "\n";
        ++failures;
        continue;
      }
      if (code.empty()) {
        std::cerr << path << ": " << b.what << " " << b.arch << ": NVRTC returned no code\n";
        ++failures;
        continue;
      }
      // A warning is an error, as nvcc -Werror all-warnings makes it for a .cu.
      if (!b.verbose && !log.empty()) {
        std::cerr << path << ": " << b.what << " " << b.arch << ": NVRTC warned:\n" << log << "\n";
        ++failures;
      }
      if (!b.verbose) continue;
      std::vector<std::string> order;
      std::map<std::string, KernelReport> kernels = parsePtxasLog(log, order);
      int entries = 0;
      for (const std::string &k : order) {
        const KernelReport &r = kernels[k];
        if (!r.entry) continue; // a device function not inlined: counted in its callers
        ++entries;
        if (!quiet)
          std::cout << name << ": " << k << " " << b.arch << " registers " << r.registers << " stack " << r.stack
                    << " spill-stores " << r.spillStores << " spill-loads " << r.spillLoads << "\n";
        if ((r.spillStores || r.spillLoads) && mustNotSpill(k)) {
          std::cerr << path << ": kernel " << k << " spills on " << b.arch << " (" << r.spillStores
                    << " bytes stored, " << r.spillLoads << " bytes loaded)\n";
          ++failures;
        }
        if (r.registers < 0) {
          std::cerr << path << ": kernel " << k << ": ptxas reported no register count\n";
          ++failures;
        }
      }
      // Every kernel the host part loads by name is in the library.
      std::vector<std::string> wanted = kernelNames(text);
      if (wanted.empty()) {
        std::cerr << path << ": no kKernelNames list in the host part\n";
        ++failures;
      }
      for (const std::string &k : wanted)
        if (!kernels.count(k) || !kernels[k].entry) {
          std::cerr << path << ": the host part loads kernel '" << k << "', which the kernel source does not define\n";
          ++failures;
        }
      if (entries == 0) {
        std::cerr << path << ": " << b.arch << ": ptxas reported no kernels; its log:\n" << log << "\n";
        ++failures;
      }
    }
  }
  if (failures) std::cerr << "rnnc-nvrtc-check: " << failures << " failure(s)\n";
  return failures ? 1 : 0;
}
