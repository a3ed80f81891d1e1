// 1. Key: FNV-1a of the source, the flags and the compiler's path.
// 2. Hit: $RNNC_CACHE/<key>/lib<model>.so exists: load it.
// 3. Miss: write the source and build into a temporary directory next to the
//    entry, then rename it into place, so a crash or a concurrent build never
//    leaves a half-written library under the key.
#include "driver/Engine.h"

#include "rnnc/memory.h"

#include <cstdlib>
#include <dlfcn.h>
#include "rnnc/checkpoint.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

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

std::string runtimeCflags() { return "-I" + std::string(RNNC_RUNTIME_INCLUDE_DIR); }

const rnnc_model *loadCompiledModel(const codegen::Bundle &b, bool f64, std::string &error) {
  std::string flags = "-std=c++17 -O3 -march=native -fopenmp -fPIC -shared " + runtimeCflags();
  if (f64) flags += " -DRNNC_REAL_DOUBLE";
  std::string key = fnv1a(b.source + "\n" + flags + "\n" + compiler());
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
    std::string cmd = fmt::format("{} {} {} -o {} -lopenblas > {} 2>&1", shellQuote(compiler()), flags,
                                  shellQuote(src.string()), shellQuote((tmp / lib.filename()).string()),
                                  shellQuote(log.string()));
    int rc = std::system(cmd.c_str());
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
  }
  // OpenMP (the kernels) and OpenBLAS (its own threads) share the cores: idle
  // OpenMP threads must sleep, not spin, or every GEMM waits for a core. Set
  // before the library (and with it libgomp) is first loaded; a user's own
  // setting wins.
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
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
  if (m->abi_version != RNNC_ABI_VERSION || m->real_bytes != (f64 ? 8 : 4)) {
    error = fmt::format("{} was built for another ABI", lib.string());
    return nullptr;
  }
  return m;
}

} // namespace rnnc

namespace rnnc {

namespace {

/// Arrays in the model's real type (float or double), or int32 for indices.
/// The pointers handed out stay valid as more arrays are added: a vector that
/// moves when its outer vector grows keeps its elements where they are.
struct Buffers {
  bool f64;
  std::vector<std::vector<float>> f;
  std::vector<std::vector<double>> d;
  std::vector<std::vector<int32_t>> i;

  void *real(const std::vector<double> &v) {
    if (f64) return d.emplace_back(v).data();
    return f.emplace_back(v.begin(), v.end()).data();
  }
  void *zeros(int64_t n) { return real(std::vector<double>(static_cast<size_t>(n), 0.0)); }
  void *index(const std::vector<double> &v) { return i.emplace_back(v.begin(), v.end()).data(); }
  std::vector<double> back(const void *p, int64_t n) const {
    if (f64) return {static_cast<const double *>(p), static_cast<const double *>(p) + n};
    return {static_cast<const float *>(p), static_cast<const float *>(p) + n};
  }
};

} // namespace

bool runLoadedModel(const rnnc_model &m, const InterpInputs &in, bool grad, InterpResult &out, std::string &error) {
  const int64_t T = in.T, B = in.B;
  Buffers buf{m.real_bytes == 8, {}, {}, {}};
  int64_t bytes = m.workspace_bytes(T, B);
  if (bytes <= 0) {
    error = fmt::format("T = {}, B = {}: the workspace would be too large", T, B);
    return false;
  }
  if (std::string why = rt::memoryShortfall(static_cast<double>(bytes), fmt::format("T = {}, B = {}: the workspace", T, B));
      !why.empty()) {
    error = why;
    return false;
  }
  std::unique_ptr<void, void (*)(void *)> ws(std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64)), std::free);
  if (!ws) {
    error = fmt::format("cannot allocate {} bytes of workspace", bytes);
    return false;
  }
  std::vector<double> flat(static_cast<size_t>(m.param_elements), 0.0);
  for (int32_t k = 0; k < m.n_params; ++k) {
    const auto &v = in.params.at(m.params[k].name);
    std::copy(v.begin(), v.end(), flat.begin() + m.params[k].offset);
  }
  void *params = buf.real(flat);
  std::vector<const void *> inputs, states, seeds;
  for (int32_t k = 0; k < m.n_inputs; ++k) {
    const auto &v = in.inputs.at(m.inputs[k].name);
    inputs.push_back(m.inputs[k].is_index ? buf.index(v) : buf.real(v));
  }
  for (int32_t k = 0; k < m.n_states; ++k) {
    auto it = in.states.find(m.states[k].name);
    states.push_back(it == in.states.end() ? nullptr : m.states[k].is_index ? buf.index(it->second) : buf.real(it->second));
  }
  if (m.forward(ws.get(), T, B, params, inputs.data(), states.data()) != 0) {
    error = m.last_error();
    return false;
  }
  for (int32_t k = 0; k < m.n_outputs; ++k) {
    int64_t w = m.outputs[k].is_index ? 1 : m.outputs[k].shape[0];
    void *o = buf.zeros(T * B * w);
    m.read_output(ws.get(), T, B, k, o);
    out.outputs[m.outputs[k].name] = buf.back(o, T * B * w);
  }
  for (int32_t k = 0; k < m.n_states; ++k) {
    const rnnc_tensor &s = m.states[k];
    int64_t n = s.depth * B * (s.is_index ? 1 : s.shape[0]);
    if (s.is_index) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      m.read_final_state(ws.get(), T, B, k, v.data());
      out.finalStates[s.name] = std::vector<double>(v.begin(), v.end());
    } else {
      void *o = buf.zeros(n);
      m.read_final_state(ws.get(), T, B, k, o);
      out.finalStates[s.name] = buf.back(o, n);
    }
  }
  if (m.has_loss) out.loss = m.read_loss(ws.get(), T, B);
  if (!grad) return true;
  for (int32_t k = 0; k < m.n_seeds; ++k) {
    auto it = in.seeds.find(m.seeds[k].name);
    seeds.push_back(it == in.seeds.end() ? nullptr : buf.real(it->second));
  }
  void *grads = buf.zeros(m.param_elements);
  std::vector<void *> inputGrads, stateGrads;
  for (int32_t k = 0; k < m.n_input_grads; ++k) inputGrads.push_back(buf.zeros(T * B * m.input_grads[k].shape[0]));
  for (int32_t k = 0; k < m.n_states; ++k)
    stateGrads.push_back(m.states[k].is_index ? nullptr : buf.zeros(m.states[k].depth * B * m.states[k].shape[0]));
  if (m.backward(ws.get(), T, B, params, seeds.data(), grads, inputGrads.data(), stateGrads.data()) != 0) {
    error = m.last_error();
    return false;
  }
  std::vector<double> g = buf.back(grads, m.param_elements);
  for (int32_t k = 0; k < m.n_params; ++k) {
    const rnnc_tensor &p = m.params[k];
    int64_t n = p.shape[0] * (p.rank > 1 ? p.shape[1] : 1);
    out.paramGrads[p.name] = std::vector<double>(g.begin() + p.offset, g.begin() + p.offset + n);
  }
  for (int32_t k = 0; k < m.n_input_grads; ++k)
    out.inputGrads[m.input_grads[k].name] = buf.back(inputGrads[k], T * B * m.input_grads[k].shape[0]);
  for (int32_t k = 0; k < m.n_states; ++k)
    if (stateGrads[k])
      out.stateGrads[m.states[k].name] = buf.back(stateGrads[k], m.states[k].depth * B * m.states[k].shape[0]);
  return true;
}

} // namespace rnnc
