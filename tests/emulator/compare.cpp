// compare CPU.so CUDA.so SYMBOL T B [TOLERANCE]: runs the model a CPU bundle
// and a CUDA bundle (built against tests/emulator/include) export, on the
// same random params, inputs, initial states and seeds (of outputs and of
// final states), the CUDA one twice, and checks that outputs, final states,
// the loss (as forward writes them and as the readers read them) and every
// gradient agree within TOLERANCE (default 1e-9; both builds of one dtype:
// double, float, bf16 or f16, the data drawn in double and rounded to it,
// through float for 16 bits), relative to each array's largest value, and
// that the two CUDA runs agree bit for bit (--forward-only builds: forward's
// results alone); then prints the worst error and where. RNNC_EMULATOR_MISALIGN=N offsets the CUDA model's
// workspace and params N bytes from cudaMalloc's 256-byte alignment;
// RNNC_EMULATOR_CALLER_STREAM=1 runs it on a non-blocking stream of its own
// (as a caller's, e.g. torch's), not on the default one; RNNC_EMULATOR_LOSS_SCALE=S
// gives both models options->loss_scale S (their gradients are then of S · loss). Exit 0 when all
// agree; 1 with what differs.
#include "rnnc/device.h"
#include "rnnc/half.h"
#include "rnnc/model.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <list>
#include <random>
#include <string>
#include <vector>

namespace {

void *callerStream = nullptr; // the stream the CUDA model runs on (null: its default)

const rnnc_model *load(const char *lib, const char *symbol) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "compare: %s\n", dlerror());
    return nullptr;
  }
  auto entry = reinterpret_cast<const rnnc_model *(*)()>(dlsym(h, symbol));
  if (!entry) {
    std::fprintf(stderr, "compare: %s has no %s\n", lib, symbol);
    return nullptr;
  }
  const rnnc_model *m = entry();
  if (m->device == RNNC_DEVICE_CUDA && std::getenv("RNNC_EMULATOR_CALLER_STREAM")) {
    auto create = reinterpret_cast<void *(*)()>(dlsym(h, "rnnc_emulator_caller_stream"));
    callerStream = create ? create() : nullptr;
    if (!callerStream) {
      std::fprintf(stderr, "compare: %s makes no stream (rnnc_emulator_caller_stream)\n", lib);
      return nullptr;
    }
  }
  const bool sixteen = m->dtype == RNNC_DTYPE_BF16 || m->dtype == RNNC_DTYPE_F16;
  const int32_t bytes = m->dtype == RNNC_DTYPE_F64 ? 8 : m->dtype == RNNC_DTYPE_F32 ? 4 : sixteen ? 2 : 0;
  if (!bytes || m->real_bytes != bytes) {
    std::fprintf(stderr, "compare: %s is no double, float, bf16 or f16 build (dtype %d, %d-byte reals)\n", lib,
                 m->dtype, m->real_bytes);
    return nullptr;
  }
  return m;
}

using Arrays = std::vector<std::pair<std::string, std::vector<double>>>;

struct Data {
  std::vector<double> params;
  std::vector<std::vector<double>> inputs, states, seeds, stateSeeds; // index inputs hold integers
};

int64_t widthOf(const rnnc_tensor &t) { return t.is_index ? 1 : t.shape[0]; }

/// Both models run in training mode with one seed: a model with dropout or
/// zoneout draws its masks, and both must draw the same ones.
const rnnc_run_options kTraining{1, 20261202, 3, nullptr, 0};

const char *dtypeName(int32_t dtype) {
  return dtype == RNNC_DTYPE_F64 ? "double" : dtype == RNNC_DTYPE_F32 ? "float" : dtype == RNNC_DTYPE_BF16 ? "bf16" : "f16";
}

/// `v` in the model's real type, as bytes: a 16-bit value rounded (to nearest even) from the float.
std::vector<char> asReals(const std::vector<double> &v, const rnnc_model &m) {
  std::vector<char> bytes(v.size() * static_cast<size_t>(m.real_bytes));
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    if (m.dtype == RNNC_DTYPE_F64) std::memcpy(bytes.data() + 8 * i, &v[i], 8);
    else if (m.dtype == RNNC_DTYPE_F32) std::memcpy(bytes.data() + 4 * i, &f, 4);
    else {
      const uint16_t h = m.dtype == RNNC_DTYPE_BF16 ? rnnc::half::bf16_bits(f) : rnnc::half::f16_bits(f);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}
/// Real i of `bytes` (the model's real type), exactly.
double realAt(const std::vector<char> &bytes, int64_t i, const rnnc_model &m) {
  if (m.dtype == RNNC_DTYPE_F64) {
    double d;
    std::memcpy(&d, bytes.data() + 8 * i, 8);
    return d;
  }
  if (m.dtype == RNNC_DTYPE_F32) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return m.dtype == RNNC_DTYPE_BF16 ? rnnc::half::bf16_float(h) : rnnc::half::f16_float(h);
}

/// Everything the model computes from `d`, through its own kind of memory.
bool runModel(const rnnc_model &m, const Data &d, int64_t T, int64_t B, Arrays &out, bool otherLengths = false) {
  rnnc::rt::ModelMemory mem(m);
  const int64_t R = m.real_bytes;
  void *const stream = m.device == RNNC_DEVICE_CUDA ? callerStream : nullptr;
  const char *misalign = m.device == RNNC_DEVICE_CUDA ? std::getenv("RNNC_EMULATOR_MISALIGN") : nullptr;
  const int64_t shift = misalign ? std::atoll(misalign) : 0;
  void *ws = mem.alloc(m.workspace_bytes(T, B) + shift);
  if (ws) ws = static_cast<char *>(ws) + shift;
  std::list<std::vector<char>> kept; // what the CPU model reads in place
  auto place = [&](const std::vector<double> &v, bool index) -> const void * {
    if (!index) {
      const std::vector<char> &reals = kept.emplace_back(asReals(v, m));
      return mem.in(reals.data(), static_cast<int64_t>(reals.size()));
    }
    std::vector<int32_t> i(v.begin(), v.end());
    void *p = mem.alloc(static_cast<int64_t>(i.size()) * 4);
    return p && mem.upload(p, i.data(), static_cast<int64_t>(i.size()) * 4) ? p : nullptr;
  };
  auto take = [&](const std::string &name, const void *p, int64_t n, bool index) {
    std::vector<double> v(static_cast<size_t>(n));
    if (index) {
      std::vector<int32_t> i(static_cast<size_t>(n));
      mem.download(i.data(), p, n * 4);
      v.assign(i.begin(), i.end());
    } else {
      std::vector<char> reals(static_cast<size_t>(n * R));
      mem.download(reals.data(), p, n * R);
      for (int64_t i = 0; i < n; ++i) v[i] = realAt(reals, i, m);
    }
    out.push_back({name, v});
  };
  const void *P = nullptr;
  if (shift) { // the params at the same offset from an alignment as the workspace
    std::vector<char> reals = asReals(d.params, m);
    char *p = static_cast<char *>(mem.alloc(static_cast<int64_t>(reals.size()) + shift));
    if (p && mem.upload(p + shift, reals.data(), static_cast<int64_t>(reals.size()))) P = p + shift;
  } else {
    P = place(d.params, false);
  }
  std::vector<const void *> inputs, states, seeds;
  for (int32_t k = 0; k < m.n_inputs; ++k) inputs.push_back(place(d.inputs[k], m.inputs[k].is_index));
  for (int32_t k = 0; k < m.n_states; ++k) states.push_back(place(d.states[k], m.states[k].is_index));
  for (int32_t k = 0; k < m.n_seeds; ++k) seeds.push_back(place(d.seeds[k], false));
  std::vector<const void *> stateSeeds;
  for (int32_t k = 0; k < m.n_states; ++k)
    stateSeeds.push_back(m.states[k].is_index ? nullptr : place(d.stateSeeds[k], false));
  // What forward writes.
  std::vector<void *> outputs, finals;
  for (int32_t k = 0; k < m.n_outputs; ++k) outputs.push_back(mem.alloc(T * B * widthOf(m.outputs[k]) * R));
  for (int32_t k = 0; k < m.n_states; ++k) finals.push_back(mem.alloc(m.states[k].depth * B * widthOf(m.states[k]) * R));
  void *loss = mem.alloc(R);
  if (!ws || !P || !mem.error().empty()) {
    std::fprintf(stderr, "compare: %s\n", mem.error().c_str());
    return false;
  }
  // A --lengths build: sequences of lengths T, 1, and between (docs/lengths.md). otherLengths: a
  // first pass in the same workspace runs each sequence one step (other rows for every library
  // call: a CUDA graph of those must not be replayed for these), and only the second is kept.
  for (int pass = otherLengths && m.has_lengths ? 0 : 1; pass < 2; ++pass) {
    out.clear();
    std::vector<int32_t> lengths(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) lengths[b] = static_cast<int32_t>(b == 0 ? T : 1 + (b * 7 + 3) % T);
    if (pass == 0) std::fill(lengths.begin(), lengths.end(), 1);
    rnnc_run_options options = kTraining;
    if (m.has_lengths) options.lengths = lengths.data();
    // Loss scaling: backward differentiates scale · loss in both builds (0 or unset: 1).
    if (const char *scale = std::getenv("RNNC_EMULATOR_LOSS_SCALE")) options.loss_scale = std::atof(scale);
    if (m.forward(ws, T, B, P, inputs.data(), states.data(), outputs.data(), finals.data(), loss, &options, stream) ||
        m.synchronize(stream)) {
      std::fprintf(stderr, "compare: forward: %s\n", m.last_error());
      return false;
    }
    for (int32_t k = 0; k < m.n_outputs; ++k) {
      int64_t n = T * B * widthOf(m.outputs[k]);
      take(std::string("output ") + m.outputs[k].name, outputs[k], n, m.outputs[k].is_index);
      void *o = mem.alloc(n * R);
      m.read_output(ws, T, B, k, o, stream);
      take(std::string("read_output ") + m.outputs[k].name, o, n, m.outputs[k].is_index);
    }
    for (int32_t k = 0; k < m.n_states; ++k) {
      int64_t n = m.states[k].depth * B * widthOf(m.states[k]);
      take(std::string("final state ") + m.states[k].name, finals[k], n, m.states[k].is_index);
      void *o = mem.alloc(n * R);
      m.read_final_state(ws, T, B, k, o, stream);
      take(std::string("read_final_state ") + m.states[k].name, o, n, m.states[k].is_index);
    }
    take("loss", loss, 1, false);
    out.push_back({"read_loss", {m.read_loss(ws, T, B, stream)}});
    if ((!m.n_seeds && !m.has_loss) || !m.has_backward) continue; // --forward-only: forward's results alone
    void *G = mem.alloc(m.param_elements * R);
    std::vector<void *> inputGrads, stateGrads;
    for (int32_t k = 0; k < m.n_input_grads; ++k) inputGrads.push_back(mem.alloc(T * B * m.input_grads[k].shape[0] * R));
    for (int32_t k = 0; k < m.n_states; ++k)
      stateGrads.push_back(m.states[k].is_index ? nullptr : mem.alloc(m.states[k].depth * B * m.states[k].shape[0] * R));
    if (m.backward(ws, T, B, P, inputs.data(), seeds.data(), m.has_state_seeds ? stateSeeds.data() : nullptr, G, inputGrads.data(),
                   stateGrads.data(), stream) ||
        m.synchronize(stream)) {
      std::fprintf(stderr, "compare: backward: %s\n", m.last_error());
      return false;
    }
    take("param gradients", G, m.param_elements, false);
    for (int32_t k = 0; k < m.n_input_grads; ++k)
      take(std::string("gradient of input ") + m.input_grads[k].name, inputGrads[k], T * B * m.input_grads[k].shape[0],
           false);
    for (int32_t k = 0; k < m.n_states; ++k)
      if (stateGrads[k])
        take(std::string("gradient of state ") + m.states[k].name, stateGrads[k],
             m.states[k].depth * B * m.states[k].shape[0], false);
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: compare CPU.so CUDA.so SYMBOL T B [TOLERANCE]\n");
    return 2;
  }
  const double tolerance = argc == 7 ? std::atof(argv[6]) : 1e-9;
  const rnnc_model *cpu = load(argv[1], argv[3]), *cuda = load(argv[2], argv[3]);
  if (!cpu || !cuda) return 2;
  if (cuda->device != RNNC_DEVICE_CUDA || cpu->device != RNNC_DEVICE_CPU) {
    std::fprintf(stderr, "compare: expected a CPU and a CUDA model\n");
    return 2;
  }
  if (cuda->has_backward != cpu->has_backward) {
    std::fprintf(stderr, "compare: one build is --forward-only, the other not\n");
    return 2;
  }
  if (cuda->dtype != cpu->dtype) {
    std::fprintf(stderr, "compare: a %s and a %s build\n", dtypeName(cpu->dtype), dtypeName(cuda->dtype));
    return 2;
  }
  const int64_t T = std::stoll(argv[4]), B = std::stoll(argv[5]);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  Data d;
  for (int64_t i = 0; i < cpu->param_elements; ++i) d.params.push_back(0.4 * normal(rng));
  auto fill = [&](const rnnc_tensor &t, int64_t rows) {
    std::vector<double> v(static_cast<size_t>(rows * B * widthOf(t)));
    for (double &x : v) x = t.is_index ? static_cast<double>(rng() % static_cast<uint64_t>(t.shape[0])) : normal(rng);
    return v;
  };
  for (int32_t k = 0; k < cpu->n_inputs; ++k) d.inputs.push_back(fill(cpu->inputs[k], T));
  for (int32_t k = 0; k < cpu->n_states; ++k) d.states.push_back(fill(cpu->states[k], cpu->states[k].depth));
  for (int32_t k = 0; k < cpu->n_seeds; ++k) d.seeds.push_back(fill(cpu->seeds[k], T));
  for (int32_t k = 0; k < cpu->n_states; ++k) d.stateSeeds.push_back(fill(cpu->states[k], cpu->states[k].depth));

  Arrays want, got, again;
  if (!runModel(*cpu, d, T, B, want) || !runModel(*cuda, d, T, B, got, true) || !runModel(*cuda, d, T, B, again))
    return 1;
  if (want.size() != got.size()) {
    std::fprintf(stderr, "compare: %zu results on the CPU, %zu emulated\n", want.size(), got.size());
    return 1;
  }
  int bad = 0;
  double worstOfAll = -1; // and where: the test logs quote it
  std::string worstArray;
  for (size_t a = 0; a < want.size(); ++a) {
    const auto &[name, w] = want[a];
    const auto &g = got[a].second;
    double top = 1e-300, worst = 0;
    for (double x : w) top = std::max(top, std::fabs(x));
    for (size_t i = 0; i < w.size(); ++i) {
      double e = std::fabs(w[i] - g[i]) / top;
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
    if (worst > worstOfAll) worstOfAll = worst, worstArray = name;
    bool same = got[a].second == again[a].second;
    bool good = worst <= tolerance && same;
    bad += !good;
    std::printf("%-4s %-32s %zu values, largest %.3g, relative error %.2g%s\n", good ? "ok" : "BAD", name.c_str(), w.size(),
                top, worst, same ? "" : ", and two emulated runs differ");
  }
  std::printf("%s build: worst relative error %.2g (%s), tolerance %.2g; %d of %zu arrays differ\n",
              dtypeName(cpu->dtype), worstOfAll, worstArray.c_str(), tolerance, bad, want.size());
  return bad ? 1 : 0;
}
