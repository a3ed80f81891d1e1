// 1. Key: FNV-1a of the source, the flags, the compiler's path and the runtime headers.
// 2. Hit: $RNNC_CACHE/<key>/lib<model>.so exists: load it.
// 3. Miss: write the source and build into a temporary directory next to the
//    entry, then rename it into place, so a crash or a concurrent build never
//    leaves a half-written library under the key.
#include "driver/Engine.h"

#include "rnnc/device.h"
#include "rnnc/half.h"
#include "rnnc/memory.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include "rnnc/checkpoint.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <regex>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace rnnc {

namespace fs = std::filesystem;

namespace {

std::string fnv1a(const std::string &s) { return fmt::format("{:016x}", rt::fnv1a(s.data(), s.size())); }

fs::path cacheRoot() {
  if (const char *c = std::getenv("RNNC_CACHE"); c && *c) return c;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "rnnc";
  if (const char *h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "rnnc";
  return fs::temp_directory_path() / "rnnc-cache";
}

/// An entry's last use is its folder's time: set on every use, read by pruneCache.
void markUsed(const fs::path &entry) {
  std::error_code ec;
  fs::last_write_time(entry, fs::file_time_type::clock::now(), ec);
}

/// Whether `name` is one of the cache's own entries, so that a cache folder shared with anything
/// else loses nothing else: a bundle's key (16 hex digits), runtime-<key>, a build's temporary
/// .tmp-[runtime-]<key>-<random>; the Python package's py-[runtime-]<24 hex digits>, its .lock,
/// and its temporary folders (.<random> after the key). `building`: a temporary folder.
bool cacheEntry(const std::string &name, bool &building) {
  static const std::regex entry("([0-9a-f]{16}|runtime-[0-9a-f]{16}|py-(runtime-)?[0-9a-f]{24}(\\.lock)?)");
  static const std::regex temporary("(\\.tmp-(runtime-)?[0-9a-f]{16}-[0-9a-f]+|py-(runtime-)?[0-9a-f]{24}\\.[a-z0-9_]+)");
  building = std::regex_match(name, temporary) && !std::regex_match(name, entry);
  return building || std::regex_match(name, entry);
}

/// After a fresh build: the cache's entries (cacheEntry: bundles, runtime folders, the Python
/// package's entries and their locks) unused for $RNNC_CACHE_DAYS days (30 by default, 0 keeps
/// them all) are removed, and the temporary folders of builds a day old (interrupted ones).
void pruneCache() {
  int64_t days = 30;
  if (const char *v = std::getenv("RNNC_CACHE_DAYS"); v && *v) {
    const std::string text = v;
    if (text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return; // not a count: keep all
    days = std::stoll(text);
  }
  if (days == 0) return;
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  std::vector<fs::path> old;
  for (fs::directory_iterator it(cacheRoot(), ec), end; !ec && it != end; it.increment(ec)) {
    bool building = false;
    if (!cacheEntry(it->path().filename().string(), building)) continue;
    const auto age = now - it->last_write_time(ec);
    if (!ec && age > std::chrono::hours(24) * (building ? 1 : days)) old.push_back(it->path());
  }
  for (const fs::path &p : old) fs::remove_all(p, ec);
}

std::string compiler() {
  if (const char *c = std::getenv("CXX"); c && *c) return c;
  return "c++";
}

std::string shellQuote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

} // namespace

#ifndef RNNC_INSTALLED_INCLUDE_DIR
#define RNNC_INSTALLED_INCLUDE_DIR "../include" // the include directory, relative to rnnc's own
#endif

/// Where the runtime headers are: beside an installed rnnc (<rnnc's directory>/../include,
/// found from /proc/self/exe, so a prefix moved elsewhere still works), else the source tree
/// this rnnc was built from (a build-tree rnnc).
static const fs::path &runtimeIncludeDir() {
  static const fs::path dir = [] {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      fs::path installed = (exe.parent_path() / RNNC_INSTALLED_INCLUDE_DIR).lexically_normal();
      if (fs::is_regular_file(installed / "rnnc" / "model.h", ec)) return installed;
    }
    return fs::path(RNNC_RUNTIME_INCLUDE_DIR);
  }();
  return dir;
}

std::string runtimeCflags() { return "-I" + runtimeIncludeDir().string(); }

/// The runtime headers a bundle includes, as one string (names and contents,
/// in name order): part of the cache key, so a library built against older
/// headers is never loaded.
static const std::string &runtimeHeaders() {
  static const std::string all = [] {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto &e : fs::directory_iterator(runtimeIncludeDir() / "rnnc", ec))
      if (e.path().extension() == ".h") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::string text;
    for (const fs::path &f : files) {
      std::ifstream in(f, std::ios::binary);
      text += f.filename().string() + "\n" + std::string(std::istreambuf_iterator<char>(in), {}) + "\n";
    }
    return text;
  }();
  return all;
}

/// The CUDA toolkit's root: $CUDA_HOME, else the one rnnc was built with.
static std::string cudaHome() {
  for (const char *name : {"RNNC_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"})
    if (const char *c = std::getenv(name); c && *c) return c;
#ifdef RNNC_CUDA_ROOT
  return RNNC_CUDA_ROOT;
#else
  return "";
#endif
}

/// Extra flags from the environment ($RNNC_CXXFLAGS, $RNNC_LDFLAGS), e.g.
/// where OpenBLAS or the CUDA libraries are on an unusual machine.
static std::string envFlags(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? std::string(" ") + v : "";
}

std::vector<char> storedReals(const rnnc_model &m, const float *v, int64_t n) {
  std::vector<char> out(static_cast<size_t>(n * m.real_bytes));
  for (int64_t i = 0; i < n; ++i) {
    char *to = out.data() + i * m.real_bytes;
    if (m.dtype == RNNC_DTYPE_F64) {
      const double d = v[i];
      std::memcpy(to, &d, 8);
    } else if (m.dtype == RNNC_DTYPE_F32) {
      std::memcpy(to, &v[i], 4);
    } else {
      const uint16_t h = m.dtype == RNNC_DTYPE_BF16 ? half::bf16_bits(v[i]) : half::f16_bits(v[i]);
      std::memcpy(to, &h, 2);
    }
  }
  return out;
}

/// What every bundle built with these compiler flags shares, built once into
/// the cache as runtime-<key>/ (about 60 MB): rnnc/cpu.h precompiled
/// (rnnc/cpu.h.gch; parsing it and what it includes is a third of a bundle's
/// build) and the ISA kernels of rnnc/panels.h compiled (panels.o; compiling
/// them is most of the rest), which a bundle built with -DRNNC_PREBUILT_PANELS
/// links instead of instantiating. Returns the folder, or "" where it cannot
/// be built or $RNNC_PREBUILT is 0 (the bundle then builds alone).
static std::string prebuiltRuntime(const std::string &flags, const fs::path &failureLog) {
  if (const char *v = std::getenv("RNNC_PREBUILT"); v && std::string(v) == "0") return "";
  const std::string key = fnv1a("runtime\n" + flags + "\n" + compiler() + "\n" + runtimeHeaders());
  const fs::path dir = cacheRoot() / ("runtime-" + key), gch = fs::path("rnnc") / "cpu.h.gch";
  std::error_code ec;
  if (fs::exists(dir / gch, ec) && fs::exists(dir / "panels.o", ec)) {
    markUsed(dir);
    return dir.string();
  }
  std::mt19937_64 rng(std::random_device{}());
  const fs::path tmp = cacheRoot() / fmt::format(".tmp-runtime-{}-{:x}", key, rng());
  fs::create_directories(tmp / "rnnc", ec);
  if (ec) return "";
  const fs::path source = tmp / "panels.cpp", log = tmp / "build.log";
  std::ofstream(source) << "#include \"rnnc/cpu.h\" // rnnc/panels.h's kernels, instantiated\n";
  const std::string header = fmt::format("{} {} -DRNNC_PREBUILT_PANELS -x c++-header {} -o {} > {} 2>&1", shellQuote(compiler()),
                                         flags, shellQuote((runtimeIncludeDir() / "rnnc" / "cpu.h").string()),
                                         shellQuote((tmp / gch).string()), shellQuote(log.string()));
  const std::string kernels = fmt::format("{} {} -DRNNC_PANELS_INSTANTIATE -c {} -o {} >> {} 2>&1", shellQuote(compiler()), flags,
                                          shellQuote(source.string()), shellQuote((tmp / "panels.o").string()),
                                          shellQuote(log.string()));
  if (std::system(header.c_str()) != 0 || std::system(kernels.c_str()) != 0) {
    std::ofstream(failureLog) << "the prebuilt runtime's build failed:\n" << std::ifstream(log).rdbuf(); // kept beside the bundle
    fs::remove_all(tmp, ec);
    return "";
  }
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp, ec); // another process won the race: use its entry
  return fs::exists(dir / gch, ec) && fs::exists(dir / "panels.o", ec) ? dir.string() : "";
}

const rnnc_model *loadCompiledModel(const codegen::Bundle &b, DType dtype, std::string &error) {
  const bool f64 = dtype == DType::F64;
  bool cuda = b.target == codegen::Target::Cuda;
  std::string flags, libs;
  if (cuda) { // host code only: the kernels are compiled by NVRTC when the model first runs
    std::string home = cudaHome();
    if (home.empty()) {
      error = "the CUDA engine needs the CUDA toolkit: set CUDA_HOME";
      return nullptr;
    }
    flags = "-std=c++17 -O2 -fPIC -shared -I" + shellQuote(runtimeIncludeDir().string()) + " -I" + shellQuote(home + "/include");
    libs = fmt::format("-L{} -Wl,-rpath,{} -lcudart -lcublas -lcublasLt -lnvrtc", shellQuote(home + "/lib64"), shellQuote(home + "/lib64"));
  } else {
    flags = "-std=c++17 -O3 -march=native -fopenmp -fPIC -shared -I" + shellQuote(runtimeIncludeDir().string());
    libs = "-lopenblas";
  }
  if (f64) flags += " -DRNNC_REAL_DOUBLE";
  flags += envFlags("RNNC_CXXFLAGS");
  libs += envFlags("RNNC_LDFLAGS");
  std::string key = fnv1a(b.source + "\n" + flags + "\n" + libs + "\n" + compiler() + "\n" + runtimeHeaders());
  fs::path dir = cacheRoot() / key;
  fs::path lib = dir / ("lib" + b.model + ".so");
  std::error_code ec;
  if (!fs::exists(lib, ec)) {
    fs::create_directories(cacheRoot(), ec);
    if (ec) {
      error = fmt::format("cannot create the cache directory {}: {} (set RNNC_CACHE)", cacheRoot().string(), ec.message());
      return nullptr;
    }
    std::mt19937_64 rng(std::random_device{}());
    fs::path tmp = cacheRoot() / fmt::format(".tmp-{}-{:x}", key, rng());
    fs::create_directories(tmp, ec);
    fs::path src = tmp / (b.model + ".cpp");
    {
      std::ofstream out(src, std::ios::binary);
      out << b.source;
      if (!out) {
        error = fmt::format("cannot write {}", src.string());
        fs::remove_all(tmp, ec);
        return nullptr;
      }
    }
    fs::path log = tmp / "build.log";
    // The prebuilt runtime's folder goes before the runtime's, where GCC looks for rnnc/cpu.h.gch.
    auto command = [&](const std::string &prebuilt) {
      return fmt::format("{}{} {} {} -o {}{} {} > {} 2>&1", shellQuote(compiler()),
                         prebuilt.empty() ? "" : " -DRNNC_PREBUILT_PANELS -I" + shellQuote(prebuilt), flags,
                         shellQuote(src.string()), shellQuote((tmp / lib.filename()).string()),
                         prebuilt.empty() ? "" : " " + shellQuote((fs::path(prebuilt) / "panels.o").string()), libs,
                         shellQuote(log.string()));
    };
    // Why a bundle was built without the prebuilt runtime stays in its entry's runtime.log.
    const fs::path runtimeLog = tmp / "runtime.log";
    const std::string prebuilt = cuda ? "" : prebuiltRuntime(flags, runtimeLog);
    std::string cmd = command(prebuilt);
    int rc = std::system(cmd.c_str());
    if (rc != 0 && !prebuilt.empty()) { // a damaged entry (GCC rejects a truncated .gch): build alone, then drop it
      std::ofstream(runtimeLog) << "built with " << prebuilt << ", which failed (dropped):\n" << std::ifstream(log).rdbuf();
      cmd = command("");
      rc = std::system(cmd.c_str());
      if (rc == 0) fs::remove_all(prebuilt, ec);
    }
    if (rc != 0) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.size() > 4000) text = text.substr(0, 4000) + "\n...";
      error = fmt::format("building the generated code failed ({}); the compiler said:\n{}", cmd, text);
      fs::remove_all(tmp, ec);
      return nullptr;
    }
    fs::rename(tmp, dir, ec);
    if (ec) { // another process won the race: use its entry
      fs::remove_all(tmp, ec);
      if (!fs::exists(lib)) {
        error = fmt::format("cannot move the built library into {}", dir.string());
        return nullptr;
      }
    }
    pruneCache();
  }
  markUsed(dir);
  void *handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = fmt::format("cannot load {}: {}", lib.string(), ::dlerror());
    return nullptr;
  }
  std::string symbol = "rnnc_model_" + b.model;
  auto entry = reinterpret_cast<const rnnc_model *(*)()>(::dlsym(handle, symbol.c_str()));
  if (!entry) {
    error = fmt::format("{} has no {}", lib.string(), symbol);
    return nullptr;
  }
  const rnnc_model *m = entry();
  const int32_t expected = dtype == DType::F32   ? RNNC_DTYPE_F32
                           : dtype == DType::F64 ? RNNC_DTYPE_F64
                           : dtype == DType::BF16 ? RNNC_DTYPE_BF16
                                                  : RNNC_DTYPE_F16;
  if (m->abi_version != RNNC_ABI_VERSION || m->dtype != expected || m->real_bytes != (f64 ? 8 : isHalf(dtype) ? 2 : 4) ||
      m->device != (cuda ? RNNC_DEVICE_CUDA : RNNC_DEVICE_CPU)) {
    error = fmt::format("{} was built for another ABI", lib.string());
    return nullptr;
  }
  return m;
}

} // namespace rnnc

namespace rnnc {

namespace {

/// Arrays in the model's real type (float, double, or bf16/f16 bits), or
/// int32 for indices. The pointers handed out stay valid as more arrays are
/// added: a vector that moves when its outer vector grows keeps its elements
/// where they are.
struct Buffers {
  int32_t dtype;
  std::vector<std::vector<float>> f;
  std::vector<std::vector<double>> d;
  std::vector<std::vector<uint16_t>> h;
  std::vector<std::vector<int32_t>> i;

  void *real(const std::vector<double> &v) {
    if (dtype == RNNC_DTYPE_F64) return d.emplace_back(v).data();
    if (dtype == RNNC_DTYPE_F32) return f.emplace_back(v.begin(), v.end()).data();
    auto &bits = h.emplace_back(v.size());
    for (size_t k = 0; k < v.size(); ++k) // through float, as the model would round it
      bits[k] = dtype == RNNC_DTYPE_BF16 ? half::bf16_bits(float(v[k])) : half::f16_bits(float(v[k]));
    return bits.data();
  }
  void *zeros(int64_t n) { return real(std::vector<double>(static_cast<size_t>(n), 0.0)); }
  void *index(const std::vector<double> &v) { return i.emplace_back(v.begin(), v.end()).data(); }
  std::vector<double> back(const void *p, int64_t n) const {
    if (dtype == RNNC_DTYPE_F64) return {static_cast<const double *>(p), static_cast<const double *>(p) + n};
    if (dtype == RNNC_DTYPE_F32) return {static_cast<const float *>(p), static_cast<const float *>(p) + n};
    std::vector<double> out(static_cast<size_t>(n));
    const auto *bits = static_cast<const uint16_t *>(p);
    for (int64_t k = 0; k < n; ++k) out[k] = dtype == RNNC_DTYPE_BF16 ? half::bf16_float(bits[k]) : half::f16_float(bits[k]);
    return out;
  }
};

} // namespace

bool runLoadedModel(const rnnc_model &m, const InterpInputs &in, bool grad, InterpResult &out, std::string &error,
                    int64_t maxMemory) {
  const int64_t T = in.T, B = in.B, rb = m.real_bytes;
  Buffers buf{m.dtype, {}, {}, {}, {}};
  rt::ModelMemory mem(m);
  // The plan: the workspace, and the params, inputs and outputs (with --grad,
  // their gradients) as the model reads and writes them.
  rt::PlanParts parts;
  parts.realBytes = rb;
  parts.params = parts.inputs = parts.outputs = grad ? 2 : 1;
  const double plan = rt::planBytes(m, T, B, parts);
  if (plan < 0) {
    error = fmt::format("T = {}, B = {}: the workspace would be too large (over 64 TiB, or T x B over 2^31 - 1 rows)", T, B);
    return false;
  }
  if (std::string why = rt::planShortfall(m, plan, fmt::format("T = {}, B = {}: the run", T, B), maxMemory); !why.empty()) {
    error = why;
    return false;
  }
  void *ws = mem.alloc(m.workspace_bytes(T, B));
  auto failed = [&] {
    error = mem.error();
    return false;
  };
  if (!ws) return failed();
  // RNNC_POISON_WORKSPACE=1 (tests): the workspace starts as NaNs, so a value read before the model
  // writes it shows in the results instead of passing as the zeros of fresh memory.
  if (const char *poison = std::getenv("RNNC_POISON_WORKSPACE"); poison && *poison == '1' && !mem.onDevice())
    std::memset(ws, 0xff, static_cast<size_t>(m.workspace_bytes(T, B)));
  // Host arrays go where the model reads them; what it writes comes back.
  auto place = [&](const void *host, int64_t n, int64_t elementBytes) { return mem.in(host, n * elementBytes); };
  auto back = [&](const void *model, int64_t n, bool index, std::vector<double> &to) {
    if (index) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      if (!mem.download(v.data(), model, n * 4)) return false;
      to.assign(v.begin(), v.end());
      return true;
    }
    void *host = buf.zeros(n);
    if (!mem.download(host, model, n * rb)) return false;
    to = buf.back(host, n);
    return true;
  };
  std::vector<double> flat(static_cast<size_t>(m.param_elements), 0.0);
  for (int32_t k = 0; k < m.n_params; ++k) {
    const auto &v = in.params.at(m.params[k].name);
    std::copy(v.begin(), v.end(), flat.begin() + m.params[k].offset);
  }
  const void *params = place(buf.real(flat), m.param_elements, rb);
  if (!params) return failed();
  std::vector<const void *> inputs, states, seeds;
  for (int32_t k = 0; k < m.n_inputs; ++k) {
    const auto &v = in.inputs.at(m.inputs[k].name);
    inputs.push_back(m.inputs[k].is_index ? place(buf.index(v), T * B, 4) : place(buf.real(v), T * B * m.inputs[k].shape[0], rb));
    if (!inputs.back()) return failed();
  }
  for (int32_t k = 0; k < m.n_states; ++k) {
    const rnnc_tensor &s = m.states[k];
    auto it = in.states.find(s.name);
    int64_t n = s.depth * B * (s.is_index ? 1 : s.shape[0]);
    states.push_back(it == in.states.end() ? nullptr : s.is_index ? place(buf.index(it->second), n, 4) : place(buf.real(it->second), n, rb));
    if (it != in.states.end() && !states.back()) return failed();
  }
  // forward writes the outputs, the final states and the loss where asked.
  std::vector<void *> outputs, finals;
  auto elements = [](const rnnc_tensor &t) { return t.is_index ? 1 : t.shape[0]; };
  for (int32_t k = 0; k < m.n_outputs; ++k) outputs.push_back(mem.alloc(T * B * elements(m.outputs[k]) * rb));
  for (int32_t k = 0; k < m.n_states; ++k) finals.push_back(mem.alloc(m.states[k].depth * B * elements(m.states[k]) * rb));
  void *loss = m.has_loss ? mem.alloc(rb) : nullptr;
  if (!mem.error().empty()) return failed();
  const rnnc_run_options options{in.train ? 1 : 0, in.seed, in.call, in.lengths.empty() ? nullptr : in.lengths.data(), 0};
  if (m.forward(ws, T, B, params, inputs.data(), states.data(), outputs.data(), finals.data(), loss, &options, nullptr) != 0) {
    error = m.last_error();
    return false;
  }
  for (int32_t k = 0; k < m.n_outputs; ++k) {
    const rnnc_tensor &o = m.outputs[k];
    if (!back(outputs[k], T * B * (o.is_index ? 1 : o.shape[0]), o.is_index, out.outputs[o.name])) return failed();
  }
  for (int32_t k = 0; k < m.n_states; ++k) {
    const rnnc_tensor &s = m.states[k];
    if (!back(finals[k], s.depth * B * (s.is_index ? 1 : s.shape[0]), s.is_index, out.finalStates[s.name])) return failed();
  }
  if (loss) {
    std::vector<double> l;
    if (!back(loss, 1, false, l)) return failed();
    out.loss = l[0];
  }
  if (!grad) return true;
  for (int32_t k = 0; k < m.n_seeds; ++k) {
    auto it = in.seeds.find(m.seeds[k].name);
    seeds.push_back(it == in.seeds.end() ? nullptr : place(buf.real(it->second), T * B * m.seeds[k].shape[0], rb));
    if (it != in.seeds.end() && !seeds.back()) return failed();
  }
  std::vector<const void *> stateSeeds;
  for (int32_t k = 0; k < m.n_states; ++k) {
    const rnnc_tensor &st = m.states[k];
    auto it = in.finalSeeds.find(st.name);
    stateSeeds.push_back(it == in.finalSeeds.end() ? nullptr : place(buf.real(it->second), st.depth * B * st.shape[0], rb));
    if (it != in.finalSeeds.end() && !stateSeeds.back()) return failed();
  }
  void *grads = mem.alloc(m.param_elements * rb);
  std::vector<void *> inputGrads, stateGrads;
  for (int32_t k = 0; k < m.n_input_grads; ++k) inputGrads.push_back(mem.alloc(T * B * m.input_grads[k].shape[0] * rb));
  for (int32_t k = 0; k < m.n_states; ++k)
    stateGrads.push_back(m.states[k].is_index ? nullptr : mem.alloc(m.states[k].depth * B * m.states[k].shape[0] * rb));
  if (!grads || !mem.error().empty()) return failed();
  if (m.backward(ws, T, B, params, inputs.data(), seeds.data(), stateSeeds.data(), grads, inputGrads.data(), stateGrads.data(), nullptr) !=
      0) {
    error = m.last_error();
    return false;
  }
  std::vector<double> g;
  if (!back(grads, m.param_elements, false, g)) return failed();
  for (int32_t k = 0; k < m.n_params; ++k) {
    const rnnc_tensor &p = m.params[k];
    const int64_t n = rt::tensorElements(p);
    out.paramGrads[p.name] = std::vector<double>(g.begin() + p.offset, g.begin() + p.offset + n);
  }
  for (int32_t k = 0; k < m.n_input_grads; ++k)
    if (!back(inputGrads[k], T * B * m.input_grads[k].shape[0], false, out.inputGrads[m.input_grads[k].name])) return failed();
  for (int32_t k = 0; k < m.n_states; ++k)
    if (stateGrads[k] &&
        !back(stateGrads[k], m.states[k].depth * B * m.states[k].shape[0], false, out.stateGrads[m.states[k].name]))
      return failed();
  return true;
}

} // namespace rnnc
