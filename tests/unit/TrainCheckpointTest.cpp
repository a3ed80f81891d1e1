// The training loop and its checkpoints (rnnc/trainer.h, rnnc/checkpoint.h),
// driven through the C ABI by two tiny models written by hand, so no compiler
// is needed:
//   Accumulator (adding's ports): h_t = h_{t-1} + w0*x0*x1 + w1*x1 + b,
//     y_t = h_t, loss = mean (y_t - target_t)^2; w = (1, 0), b = 0 solves it.
//   Decay (text's ports, V = 4): h_t = 0.5*h_{t-1} + E[tok_t], logits_t = h_t,
//     loss = mean cross_entropy(logits_t, target_t); its state is carried.
// Asserted: the loss falls; a checkpoint round-trips; a resumed run gives the
// same losses and params, bit for bit, as one that never stopped; bad
// checkpoints (corrupt, truncated, foreign, misshaped) are refused by name;
// held-out evaluations run forward only in eval mode, replay the same data and
// change no training loss.
#include "io/Safetensors.h"
#include "rnnc/checkpoint.h"
#include "rnnc/progress.h"
#include "rnnc/trainer.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

using namespace rnnc::rt;
namespace fs = std::filesystem;

namespace {

rnnc_tensor tensor(const char *name, std::vector<int64_t> shape, int64_t offset = 0, bool index = false, int depth = 0) {
  rnnc_tensor t{};
  t.name = name;
  t.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  t.offset = offset;
  t.is_index = index;
  t.depth = depth;
  return t;
}

const char *noError() { return ""; }

using ReadRows = void (*)(const void *, int64_t, int64_t, int32_t, void *, void *);
using ReadLoss = double (*)(const void *, int64_t, int64_t, void *);

/// What a hand model's forward writes for its caller (ABI v3), read from
/// its workspace by its own readers.
int writeResults(ReadRows output, ReadRows finalState, ReadLoss lossOf, void *ws, int64_t T, int64_t B,
                 void *const *outputs, void *const *finals, void *loss) {
  if (outputs && outputs[0]) output(ws, T, B, 0, outputs[0], nullptr);
  if (finals && finals[0]) finalState(ws, T, B, 0, finals[0], nullptr);
  if (loss) *static_cast<float *>(loss) = static_cast<float>(lossOf(ws, T, B, nullptr));
  return 0;
}

// ----- Accumulator -----------------------------------------------------------
// Workspace: x [T][B][2], target [T][B], y [T][B], h0 [B].
namespace acc {

int64_t wsBytes(int64_t T, int64_t B) { return (T * B * 4 + B) * 4; }

struct View {
  float *x, *tgt, *y, *h0;
  View(const void *ws, int64_t T, int64_t B) {
    auto *f = static_cast<float *>(const_cast<void *>(ws));
    x = f;
    tgt = x + T * B * 2;
    y = tgt + T * B;
    h0 = y + T * B;
  }
};

void readOutput(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *);
void readFinalState(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *);
double readLoss(const void *ws, int64_t T, int64_t B, void *);

int forward(void *ws, int64_t T, int64_t B, const void *params, const void *const *inputs, const void *const *states,
            void *const *outputs, void *const *finals, void *loss, const rnnc_run_options *, void *) {
  View v(ws, T, B);
  const auto *p = static_cast<const float *>(params);
  std::memcpy(v.x, inputs[0], T * B * 2 * 4);
  std::memcpy(v.tgt, inputs[1], T * B * 4);
  for (int64_t b = 0; b < B; ++b) v.h0[b] = states ? static_cast<const float *>(states[0])[b] : 0.0f;
  for (int64_t b = 0; b < B; ++b) {
    float h = v.h0[b];
    for (int64_t t = 0; t < T; ++t) {
      const float x0 = v.x[(t * B + b) * 2], x1 = v.x[(t * B + b) * 2 + 1];
      h = h + p[0] * x0 * x1 + p[1] * x1 + p[2];
      v.y[t * B + b] = h;
    }
  }
  return writeResults(readOutput, readFinalState, readLoss, ws, T, B, outputs, finals, loss);
}

int backward(void *ws, int64_t T, int64_t B, const void *, const void *const *inputs, const void *const *,
             const void *const *, void *grads, void *const *, void *const *stateGrads, void *) {
  View v(ws, T, B);
  // Forward's inputs again (ABI 7): the trainer must pass the ones forward read.
  if (!inputs || std::memcmp(v.x, inputs[0], static_cast<size_t>(T * B * 2 * 4)) != 0) return 1;
  auto *g = static_cast<float *>(grads);
  g[0] = g[1] = g[2] = 0;
  const float scale = 2.0f / static_cast<float>(T * B);
  for (int64_t b = 0; b < B; ++b) {
    float dh = 0;
    for (int64_t t = T - 1; t >= 0; --t) {
      dh += scale * (v.y[t * B + b] - v.tgt[t * B + b]);
      const float x0 = v.x[(t * B + b) * 2], x1 = v.x[(t * B + b) * 2 + 1];
      g[0] += dh * x0 * x1;
      g[1] += dh * x1;
      g[2] += dh;
    }
    if (stateGrads && stateGrads[0]) static_cast<float *>(stateGrads[0])[b] = dh;
  }
  return 0;
}

void readOutput(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *) {
  std::memcpy(out, View(ws, T, B).y, T * B * 4);
}

void readFinalState(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *) {
  std::memcpy(out, View(ws, T, B).y + (T - 1) * B, B * 4);
}

double readLoss(const void *ws, int64_t T, int64_t B, void *) {
  View v(ws, T, B);
  double sum = 0;
  for (int64_t i = 0; i < T * B; ++i) sum += (double(v.y[i]) - v.tgt[i]) * (double(v.y[i]) - v.tgt[i]);
  return sum / static_cast<double>(T * B);
}

}  // namespace acc

// ----- Decay (a character model over a vocabulary of 4) ----------------------
// Workspace: tok [T][B], tgt [T][B] (int32), h [T][B][V], h0 [B][V].
namespace decay {

constexpr int64_t V = 4;

int64_t wsBytes(int64_t T, int64_t B) { return (2 * T * B + T * B * V + B * V) * 4; }

struct View {
  int32_t *tok, *tgt;
  float *h, *h0;
  View(const void *ws, int64_t T, int64_t B) {
    auto *i = static_cast<int32_t *>(const_cast<void *>(ws));
    tok = i;
    tgt = i + T * B;
    h = reinterpret_cast<float *>(tgt + T * B);
    h0 = h + T * B * V;
  }
};

thread_local std::string lastError;

void readOutput(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *);
void readFinalState(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *);
double readLoss(const void *ws, int64_t T, int64_t B, void *);

int forward(void *ws, int64_t T, int64_t B, const void *params, const void *const *inputs, const void *const *states,
            void *const *outputs, void *const *finals, void *loss, const rnnc_run_options *, void *) {
  View v(ws, T, B);
  const auto *E = static_cast<const float *>(params);
  std::memcpy(v.tok, inputs[0], T * B * 4);
  std::memcpy(v.tgt, inputs[1], T * B * 4);
  for (int64_t i = 0; i < T * B; ++i) {
    if (v.tok[i] < 0 || v.tok[i] >= V || v.tgt[i] < 0 || v.tgt[i] >= V) {
      lastError = "index out of range";
      return 1;
    }
  }
  for (int64_t i = 0; i < B * V; ++i) v.h0[i] = states ? static_cast<const float *>(states[0])[i] : 0.0f;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < V; ++j) {
        const float prev = t == 0 ? v.h0[b * V + j] : v.h[((t - 1) * B + b) * V + j];
        v.h[(t * B + b) * V + j] = 0.5f * prev + E[v.tok[t * B + b] * V + j];
      }
  return writeResults(readOutput, readFinalState, readLoss, ws, T, B, outputs, finals, loss);
}

int backward(void *ws, int64_t T, int64_t B, const void *, const void *const *, const void *const *,
             const void *const *, void *grads, void *const *, void *const *, void *) {
  View v(ws, T, B);
  auto *dE = static_cast<float *>(grads);
  std::fill(dE, dE + V * V, 0.0f);
  const float scale = 1.0f / static_cast<float>(T * B);
  for (int64_t b = 0; b < B; ++b) {
    float next[V] = {0, 0, 0, 0};
    for (int64_t t = T - 1; t >= 0; --t) {
      const float *h = v.h + (t * B + b) * V;
      float top = *std::max_element(h, h + V), z = 0;
      for (int64_t j = 0; j < V; ++j) z += std::exp(h[j] - top);
      for (int64_t j = 0; j < V; ++j) {
        const float dlogit = (std::exp(h[j] - top) / z - (j == v.tgt[t * B + b] ? 1.0f : 0.0f)) * scale;
        next[j] = dlogit + 0.5f * next[j];
        dE[v.tok[t * B + b] * V + j] += next[j];
      }
    }
  }
  return 0;
}

void readOutput(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *) {
  std::memcpy(out, View(ws, T, B).h, T * B * V * 4);
}

void readFinalState(const void *ws, int64_t T, int64_t B, int32_t, void *out, void *) {
  std::memcpy(out, View(ws, T, B).h + (T - 1) * B * V, B * V * 4);
}

double readLoss(const void *ws, int64_t T, int64_t B, void *) {
  View v(ws, T, B);
  double sum = 0;
  for (int64_t i = 0; i < T * B; ++i) {
    const float *h = v.h + i * V;
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(double(h[j]));
    sum += std::log(z) - h[v.tgt[i]];
  }
  return sum / static_cast<double>(T * B);
}

const char *error() { return lastError.c_str(); }

}  // namespace decay

/// A hand-written model and the tables it points at.
struct HandModel {
  std::vector<rnnc_tensor> params, inputs, outputs, states;
  rnnc_model m{};
  std::string name, hash;

  void link() {
    m.abi_version = RNNC_ABI_VERSION;
    m.name = name.c_str();
    m.source_hash = hash.c_str();
    m.real_bytes = 4;
    m.n_params = static_cast<int32_t>(params.size());
    m.params = params.data();
    m.n_inputs = static_cast<int32_t>(inputs.size());
    m.inputs = inputs.data();
    m.n_outputs = static_cast<int32_t>(outputs.size());
    m.outputs = outputs.data();
    m.n_states = static_cast<int32_t>(states.size());
    m.states = states.data();
    m.has_loss = 1;
  }
};

HandModel accumulator(std::string name = "Accumulator", std::string hash = "acc-1") {
  HandModel h;
  h.name = std::move(name);
  h.hash = std::move(hash);
  h.params = {tensor("acc.w", {2}, 0), tensor("acc.b", {1}, 2)};
  h.inputs = {tensor("x", {2}), tensor("target", {1})};
  h.outputs = {tensor("y", {1})};
  h.states = {tensor("acc.h", {1}, 0, false, 1)};
  h.link();
  h.m.param_elements = 3;
  h.m.workspace_bytes = acc::wsBytes;
  h.m.forward = acc::forward;
  h.m.backward = acc::backward;
  h.m.read_output = acc::readOutput;
  h.m.read_final_state = acc::readFinalState;
  h.m.read_loss = acc::readLoss;
  h.m.last_error = noError;
  return h;
}

HandModel decayModel() {
  HandModel h;
  h.name = "Decay";
  h.hash = "decay-1";
  h.params = {tensor("E", {decay::V, decay::V}, 0)};
  h.inputs = {tensor("tok", {decay::V}, 0, true), tensor("target", {decay::V}, 0, true)};
  h.outputs = {tensor("logits", {decay::V})};
  h.states = {tensor("h", {decay::V}, 0, false, 1)};
  h.link();
  h.m.param_elements = decay::V * decay::V;
  h.m.workspace_bytes = decay::wsBytes;
  h.m.forward = decay::forward;
  h.m.backward = decay::backward;
  h.m.read_output = decay::readOutput;
  h.m.read_final_state = decay::readFinalState;
  h.m.read_loss = decay::readLoss;
  h.m.last_error = decay::error;
  return h;
}

struct TempDir {
  fs::path dir;
  TempDir() {
    static std::atomic<int> counter{0};
    dir = fs::temp_directory_path() / ("rnnc-train-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string &name) const { return (dir / name).string(); }
};

std::string readBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TrainOptions addingOptions(int64_t steps) {
  TrainOptions o;
  o.task = "adding";
  o.batch = 8;
  o.bptt = 12;
  o.steps = steps;
  o.lr = 0.05;
  o.seed = 11;
  o.quiet = true;
  return o;
}

/// Trains `m` on adding from zero params for `steps` steps, saving a
/// checkpoint at `path`; returns the options it ran with.
TrainOptions trainAndSave(const rnnc_model &m, int64_t steps, const std::string &path) {
  std::vector<float> params(static_cast<size_t>(m.param_elements), 0.0f);
  TrainOptions o = addingOptions(steps);
  o.save = path;
  REQUIRE(train(m, params, o, nullptr) == 0);
  return o;
}

/// A Checkpoint the trainer would expect for the accumulator on adding with adam.
Checkpoint expected(const rnnc_model &m, const std::string &optimizer = "adam", const std::string &task = "adding") {
  Checkpoint c;
  c.task = task;
  c.optimizer = optimizer;
  c.batch = 8;
  c.params.assign(m.param_elements, 0.0f);
  for (const char *slot : optimizer == "adam" ? std::vector<const char *>{"m", "v"} : std::vector<const char *>{"v"})
    c.slots.push_back({slot, std::vector<float>(m.param_elements, 0.0f)});
  return c;
}

/// Trains `steps` in one go, and in two calls split at `split` through a
/// checkpoint; the losses and the params must agree bit for bit.
void checkResumeIsExact(const rnnc_model &m, TrainOptions o, int64_t split, const std::vector<float> &init) {
  TempDir tmp;
  std::vector<float> whole = init;
  TrainResult all;
  REQUIRE(train(m, whole, o, &all) == 0);
  REQUIRE(all.losses.size() == static_cast<size_t>(o.steps));

  TrainOptions first = o;
  first.steps = split;
  first.save = tmp / "mid.ckpt";
  std::vector<float> part = init;
  TrainResult a, b;
  REQUIRE(train(m, part, first, &a) == 0);
  TrainOptions second = o;
  second.resume = first.save;
  std::vector<float> fresh = init;  // the checkpoint, not these, must decide
  for (float &f : fresh) f += 1.0f;
  REQUIRE(train(m, fresh, second, &b) == 0);
  CHECK(b.steps_done == o.steps);

  std::vector<double> joined = a.losses;
  joined.insert(joined.end(), b.losses.begin(), b.losses.end());
  REQUIRE(joined.size() == all.losses.size());
  CHECK(std::memcmp(joined.data(), all.losses.data(), joined.size() * sizeof(double)) == 0);
  CHECK(std::memcmp(fresh.data(), whole.data(), whole.size() * sizeof(float)) == 0);
}

/// Runs `f` with stderr sent to a file; returns what it printed.
template <typename F> std::string captureStderr(F f) {
  TempDir tmp;
  std::fflush(stderr);
  const int saved = ::dup(2);
  std::FILE *file = std::fopen((tmp / "err").c_str(), "w");
  ::dup2(::fileno(file), 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(file);
  return readBytes(tmp / "err");
}

std::string loadError(const std::string &path, const rnnc_model &m, Checkpoint c) {
  std::string error;
  CHECK_FALSE(loadCheckpoint(path, m, c, error));
  CHECK(error.rfind(path + ": ", 0) == 0);
  CHECK(error.find('\n') == std::string::npos);
  return error;
}

}  // namespace

TEST_CASE("train: the loss falls on adding (hand-written accumulator)", "[train]") {
  HandModel h = accumulator();
  std::vector<float> params(3, 0.0f);
  TrainResult r;
  REQUIRE(train(h.m, params, addingOptions(300), &r) == 0);
  CHECK(r.steps_done == 300);
  CHECK(r.metric_name == "mse");
  CHECK(r.last_loss < 0.05 * r.first_loss);
  CHECK(r.last_metric < 0.02);
  CHECK(params[0] == Approx(1.0).margin(0.1));
}

TEST_CASE("train: the loss falls on text with carried states (hand-written decay model)", "[train]") {
  TempDir tmp;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcd"[(i * 7 + i / 3) % 4];
  writeBytes(tmp / "t.txt", text);
  HandModel h = decayModel();
  std::vector<float> params(16, 0.0f);
  TrainOptions o;
  o.task = "text:" + tmp / "t.txt";
  o.batch = 4;
  o.bptt = 10;
  o.steps = 200;
  o.lr = 0.05;
  o.quiet = true;
  TrainResult r;
  REQUIRE(train(h.m, params, o, &r) == 0);
  CHECK(r.metric_name == "bpc");
  CHECK(r.first_loss == Approx(std::log(4.0)));
  CHECK(r.last_loss < 0.8 * r.first_loss);
  CHECK(r.last_metric == Approx(r.last_loss / std::log(2.0)));
}

TEST_CASE("train: resuming gives the same losses bit for bit", "[train]") {
  HandModel h = accumulator();
  SECTION("adding, adam") { checkResumeIsExact(h.m, addingOptions(40), 17, {0.1f, -0.2f, 0.3f}); }
  SECTION("adding, sgd with momentum") {
    TrainOptions o = addingOptions(40);
    o.optimizer = "sgd";
    checkResumeIsExact(h.m, o, 23, {0.1f, -0.2f, 0.3f});
  }
  SECTION("text, carried states and a wrap") {
    TempDir tmp;
    writeBytes(tmp / "t.txt", std::string("abcadbcaddbacbda") + "bbacdcadbacdbadc");
    HandModel d = decayModel();
    TrainOptions o;
    o.task = "text:" + tmp / "t.txt";
    o.batch = 2;
    o.bptt = 5;  // streams of 16 bytes: a wrap every 3 segments
    o.steps = 13;
    o.eval_batches = 0;  // no evaluation: all of the text trains
    o.lr = 0.1;
    o.seed = 3;
    o.quiet = true;
    std::vector<float> init(16);
    for (size_t i = 0; i < init.size(); ++i) init[i] = 0.01f * static_cast<float>(i);
    checkResumeIsExact(d.m, o, 4, init);
    checkResumeIsExact(d.m, o, 6, init);  // right before a wrap
  }
}

TEST_CASE("train: a checkpoint round-trips and reads as plain safetensors", "[train]") {
  TempDir tmp;
  HandModel h = accumulator();
  Checkpoint c = expected(h.m);
  c.step = 7;
  c.rng = "1 2 3";
  c.params = {1.5f, -2.25f, 0.125f};
  c.slots[0].values = {0.1f, 0.2f, 0.3f};
  c.slots[1].values = {1e-3f, 2e-3f, 3e-3f};
  std::string error;
  REQUIRE(saveCheckpoint(tmp / "c.ckpt", h.m, c, error));

  Checkpoint back = expected(h.m);
  REQUIRE(loadCheckpoint(tmp / "c.ckpt", h.m, back, error));
  CHECK(back.step == 7);
  CHECK(back.rng == "1 2 3");
  CHECK(back.params == c.params);
  CHECK(back.slots[0].values == c.slots[0].values);
  CHECK(back.slots[1].values == c.slots[1].values);

  std::map<std::string, std::string> meta;
  auto tensors = rnnc::io::readSafetensors(tmp / "c.ckpt", error, &meta);
  REQUIRE(tensors);
  std::vector<std::string> names;
  for (const auto &t : *tensors) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"acc.w", "acc.b", "adam.m/acc.w", "adam.m/acc.b", "adam.v/acc.w", "adam.v/acc.b"});
  CHECK(meta["format"] == "rnnc-checkpoint");
  CHECK(meta["format_version"] == "1");
  CHECK(meta["model"] == "Accumulator");
  CHECK(meta["source_hash"] == "acc-1");
  CHECK(meta["task"] == "adding");
  CHECK(meta["optimizer"] == "adam");
  CHECK(meta["step"] == "7");
  CHECK(meta["checksum"].size() == 16);
}

TEST_CASE("train: the trainer saves carried states and every save_every steps", "[train]") {
  TempDir tmp;
  writeBytes(tmp / "t.txt", "abcdabcdabcdabcdabcdabcd");
  HandModel d = decayModel();
  std::vector<float> params(16, 0.0f);
  TrainOptions o;
  o.task = "text:" + tmp / "t.txt";
  o.batch = 2;
  o.bptt = 3;
  o.steps = 5;
  o.save = tmp / "c.ckpt";
  o.save_every = 2;
  o.log = tmp / "log.csv";
  o.quiet = true;
  o.eval_batches = 0;  // no evaluation: all of the text trains
  REQUIRE(train(d.m, params, o, nullptr) == 0);
  std::map<std::string, std::string> meta;
  std::string error;
  auto tensors = rnnc::io::readSafetensors(o.save, error, &meta);
  REQUIRE(tensors);
  CHECK(meta["step"] == "5");
  CHECK(meta["data_position"] == "6");  // streams of 12: 0, 3, 6, wrap to 0, 3 → 6
  bool carried = false;
  for (const auto &t : *tensors) carried = carried || (t.name == "carry/h" && t.array.shape == std::vector<int64_t>{1, 2, 4});
  CHECK(carried);

  const std::string log = readBytes(o.log);
  CHECK(log.rfind("step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric\n1,", 0) == 0);
  CHECK(std::count(log.begin(), log.end(), '\n') == 6);
}

TEST_CASE("train: the skip count in a checkpoint is optional and checked", "[train]") {
  TempDir tmp;
  HandModel h = accumulator();
  const TrainOptions o = trainAndSave(h.m, 3, tmp / "c.ckpt");
  // Rewrites the checkpoint's metadata with `edit` and seals it again.
  auto resealed = [&](auto edit) {
    std::string error;
    std::map<std::string, std::string> meta;
    auto tensors = rnnc::io::readSafetensors(o.save, error, &meta);
    REQUIRE(tensors);
    edit(meta);
    meta["checksum"] = fmt::format("{:016x}", checkpointChecksum(meta, *tensors));
    const std::string path = tmp / "edited.ckpt";
    REQUIRE(rnnc::io::writeSafetensors(path, *tensors, error, meta));
    return path;
  };
  Checkpoint c = expected(h.m);
  std::string error;
  REQUIRE(loadCheckpoint(resealed([](auto &m) { m.erase("skipped"); }), h.m, c, error));  // an older file
  CHECK(c.skipped == 0);
  REQUIRE(loadCheckpoint(resealed([](auto &m) { m["skipped"] = "2"; }), h.m, c, error));
  CHECK(c.skipped == 2);
  const std::string bad = resealed([](auto &m) { m["skipped"] = "4"; });
  CHECK(loadError(bad, h.m, expected(h.m)) == bad + ": its count of skipped steps 4 is not within its 3 steps");
  const std::string text = resealed([](auto &m) { m["skipped"] = "two"; });
  CHECK(loadError(text, h.m, expected(h.m)) == text + ": its metadata 'skipped' is not an integer: 'two'");
}

TEST_CASE("train: dynamic loss scaling's state in a checkpoint is optional and checked", "[train]") {
  TempDir tmp;
  HandModel h = accumulator();
  TrainOptions o = trainAndSave(h.m, 3, tmp / "c.ckpt");
  std::string error;
  std::map<std::string, std::string> meta;
  auto tensors = rnnc::io::readSafetensors(o.save, error, &meta);
  REQUIRE(tensors);
  CHECK(meta.count("loss_scale") == 0); // an f32 run without --loss-scale dynamic
  auto sealed = [&](auto edit) {
    std::map<std::string, std::string> m = meta;
    edit(m);
    m["checksum"] = fmt::format("{:016x}", checkpointChecksum(m, *tensors));
    const std::string path = tmp / "edited.ckpt";
    REQUIRE(rnnc::io::writeSafetensors(path, *tensors, error, m));
    return path;
  };
  auto scaled = [](const char *scale, const char *good, const char *skips) {
    return [=](std::map<std::string, std::string> &m) {
      m["loss_scale"] = scale;
      m["loss_scale_good_steps"] = good;
      m["loss_scale_skips"] = skips;
    };
  };
  Checkpoint c = expected(h.m);
  REQUIRE(loadCheckpoint(sealed(scaled("1024.5", "2", "1")), h.m, c, error));
  CHECK(c.loss_scale == 1024.5);
  CHECK(c.scale_good_steps == 2);
  CHECK(c.scale_skips == 1);
  for (const char *bad : {"0", "-2", "inf", "nan", "1e400", "two", ""}) {
    const std::string path = sealed(scaled(bad, "0", "0"));
    CHECK(loadError(path, h.m, expected(h.m)) ==
          path + fmt::format(": its metadata 'loss_scale' is not a positive number: '{}'", bad));
  }
  const std::string many = sealed(scaled("8", "4", "0"));
  CHECK(loadError(many, h.m, expected(h.m)) ==
        many + ": its loss scaling counts (4 good steps, 0 skipped) are not within its 3 steps");
  const std::string missing = sealed([](auto &m) { m["loss_scale"] = "8"; });
  CHECK(loadError(missing, h.m, expected(h.m)) == missing + ": its metadata has no 'loss_scale_good_steps'");
  // A run with dynamic scaling writes where it stands (no step overflows here: 3 good steps at 2^16).
  o.loss_scale = -1;
  o.save = tmp / "scaled.ckpt";
  o.resume.clear();
  std::vector<float> params(static_cast<size_t>(h.m.param_elements), 0.0f);
  REQUIRE(train(h.m, params, o) == 0);
  Checkpoint d = expected(h.m);
  REQUIRE(loadCheckpoint(o.save, h.m, d, error));
  CHECK(d.loss_scale == 65536);
  CHECK(d.scale_good_steps == 3);
  CHECK(d.scale_skips == 0);
}

TEST_CASE("train: corrupt, truncated and foreign checkpoints are refused by name", "[train]") {
  TempDir tmp;
  HandModel h = accumulator();
  const TrainOptions o = trainAndSave(h.m, 3, tmp / "c.ckpt");
  const std::string good = readBytes(o.save);
  const std::string path = tmp / "bad.ckpt";

  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x10;  // inside the last tensor's data
  writeBytes(path, flipped);
  CHECK_THAT(loadError(path, h.m, expected(h.m)), Catch::Contains("the checkpoint is corrupt: checksum"));

  writeBytes(path, good.substr(0, good.size() - 5));
  CHECK_THAT(loadError(path, h.m, expected(h.m)), Catch::Contains("the checkpoint is truncated: the header promises"));
  writeBytes(path, good.substr(0, 40));
  CHECK_THAT(loadError(path, h.m, expected(h.m)), Catch::Contains("the checkpoint is truncated: the header is"));

  writeBytes(path, "hello, world");
  CHECK_THAT(loadError(path, h.m, expected(h.m)), Catch::Contains(": not a readable checkpoint: "));

  std::string error;
  rnnc::io::Tensor plain{"acc.w", {rnnc::io::DType::F32, {2}, {1, 2}}};
  REQUIRE(rnnc::io::writeSafetensors(path, {plain}, error));
  CHECK(loadError(path, h.m, expected(h.m)) == path + ": not an rnnc checkpoint (its metadata has no format \"rnnc-checkpoint\")");
  REQUIRE(rnnc::io::writeSafetensors(path, {plain}, error, {{"format", "rnnc-checkpoint"}, {"format_version", "2"}}));
  CHECK(loadError(path, h.m, expected(h.m)) == path + ": checkpoint format version '2', this rnnc reads version 1");

  HandModel other = accumulator("Other");
  CHECK(loadError(o.save, other.m, expected(other.m)) ==
        o.save + ": it is for model 'Accumulator', this run has model 'Other'");
  HandModel rebuilt = accumulator("Accumulator", "acc-2");
  CHECK(loadError(o.save, rebuilt.m, expected(rebuilt.m)) ==
        o.save + ": it is for source hash 'acc-1', this run has source hash 'acc-2' (the model was compiled from other source)");
  CHECK(loadError(o.save, h.m, expected(h.m, "adam", "copy")) == o.save + ": it is for task 'adding', this run has task 'copy'");
  CHECK(loadError(o.save, h.m, expected(h.m, "sgd")) == o.save + ": it is for optimizer 'adam', this run has optimizer 'sgd'");
  Checkpoint wideBatch = expected(h.m);
  wideBatch.batch = 16;
  CHECK(loadError(o.save, h.m, wideBatch) == o.save + ": it was trained with batch 8, this run has batch 16");

  HandModel misshaped = accumulator();
  misshaped.params = {tensor("acc.w", {1, 2}, 0), tensor("acc.b", {1}, 2)};
  misshaped.link();
  CHECK(loadError(o.save, misshaped.m, expected(misshaped.m)) ==
        o.save + ": tensor 'acc.w' is float32 [2], expected float32 [1, 2]");
  HandModel missing = accumulator();
  missing.params = {tensor("acc.w", {2}, 0), tensor("acc.c", {1}, 2)};
  missing.link();
  CHECK(loadError(o.save, missing.m, expected(missing.m)) == o.save + ": it has no tensor 'acc.c'");
}

TEST_CASE("train: the trainer refuses what it cannot train", "[train]") {
  HandModel h = accumulator();
  std::vector<float> params(3, 0.0f);
  TrainOptions o = addingOptions(5);
  HandModel f64 = accumulator();
  f64.m.real_bytes = 8;
  CHECK(captureStderr([&] { CHECK(train(f64.m, params, o) == 1); }) ==
        "rnnc: error: model 'Accumulator' computes in 8-byte reals; training runs in float32 only (compile it for float)\n");
  HandModel noLoss = accumulator();
  noLoss.m.has_loss = 0;
  CHECK_THAT(captureStderr([&] { CHECK(train(noLoss.m, params, o) == 1); }), Catch::Contains("has no loss to train"));
  std::vector<float> short_(2, 0.0f);
  CHECK_THAT(captureStderr([&] { CHECK(train(h.m, short_, o) == 1); }),
             Catch::Contains("model 'Accumulator' has 3 param values, 2 were given"));
  TrainOptions copy = o;
  copy.task = "copy";
  CHECK_THAT(captureStderr([&] { CHECK(train(h.m, params, copy) == 1); }), Catch::Contains("task copy needs at least 21 steps"));

  // A learning rate that blows up stops with an error at the step it happens.
  TrainOptions wild = addingOptions(200);
  wild.optimizer = "sgd";
  wild.lr = 1e4;
  wild.clip = 0;
  TrainResult r;
  const std::string said = captureStderr([&] { CHECK(train(h.m, params, wild, &r) == 1); });
  CHECK(r.steps_done < 200);
  CHECK_THAT(said, Catch::StartsWith(fmt::format("rnnc: error: step {}: ", r.steps_done + 1)) &&
                       Catch::Matches(".*(the loss is (inf|nan)|after the update, param 'acc\\.[wb]' \\[[0-9]\\] is (inf|nan)).*\n") &&
                       Catch::EndsWith("; training stopped (try a smaller --lr or --clip)\n"));

  // Resuming past the steps asked for.
  TempDir tmp;
  const TrainOptions save = trainAndSave(h.m, 4, tmp / "c.ckpt");
  TrainOptions back = addingOptions(2);
  back.resume = save.save;
  CHECK(captureStderr([&] { CHECK(train(h.m, params, back) == 1); }) ==
        "rnnc: error: " + save.save + ": the checkpoint is at step 4, past the 2 steps asked for\n");
}

TEST_CASE("train: progress prints plain lines about every 10% when not on a terminal", "[train]") {
  TempDir tmp;
  std::FILE *out = std::fopen((tmp / "out").c_str(), "w");
  REQUIRE(out);
  Progress p(0, 20, "mse", out, false);
  for (int step = 1; step <= 20; ++step) p.update(step, 0.5, 0.25, 1.0, 0.001);
  p.finish();
  std::fclose(out);
  const std::string text = readBytes(tmp / "out");
  CHECK(std::count(text.begin(), text.end(), '\n') == 10);
  CHECK(text.rfind("step 2/20  loss 0.5000  mse 0.2500  ", 0) == 0);
  CHECK(text.find("step 20/20  loss 0.5000  mse 0.2500  ") != std::string::npos);
}

TEST_CASE("train: a resumed log drops the rows past the checkpoint and a torn last line", "[train]") {
  TempDir tmp;
  const std::string path = tmp / "log.csv";
  // A run killed after step 3's checkpoint had logged steps 4 and 5, and half of 6.
  writeBytes(path, "step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric\n1,0.5,0.1,1,0.001,0.1,,\n"
                   "2,0.4,0.1,1,0.001,0.2,0.45,0.2\n3,0.3,0.1,1,0.001,0.3,,\n4,0.2,0.1,1,0.001,0.4,,\n"
                   "5,0.1,0.1,1,0.001,0.5,,\n6,0.0");
  {
    Progress p(3, 5, "mse", nullptr, false);
    std::string error;
    REQUIRE(p.openLog(path, true, error));
    const Evaluation e{4, 0.375, 0.125};
    p.update(4, 0.25, 0.5, 1, 0.001, &e);
  }
  const std::string log = readBytes(path);
  CHECK(log.rfind("step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric\n1,0.5,0.1,1,0.001,0.1,,\n"
                  "2,0.4,0.1,1,0.001,0.2,0.45,0.2\n3,0.3,0.1,1,0.001,0.3,,\n4,0.25,0.5,1,0.001,",
                  0) == 0);
  CHECK(log.substr(log.size() - 13) == ",0.375,0.125\n");
  CHECK(std::count(log.begin(), log.end(), '\n') == 5);
  // A fresh run (not resumed) starts the log over.
  {
    Progress p(0, 1, "mse", nullptr, false);
    std::string error;
    REQUIRE(p.openLog(path, false, error));
  }
  CHECK(readBytes(path) == "step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric\n");
}

namespace {

/// The calls a run makes, by kind: forward in train mode, forward in eval
/// mode (options null or train 0), backward.
struct Calls {
  int train = 0, eval = 0, backward = 0;
};
Calls calls;

int countedForward(void *ws, int64_t T, int64_t B, const void *params, const void *const *inputs,
                   const void *const *states, void *const *outputs, void *const *finals, void *loss,
                   const rnnc_run_options *options, void *stream) {
  ++(options && options->train ? calls.train : calls.eval);
  return acc::forward(ws, T, B, params, inputs, states, outputs, finals, loss, options, stream);
}

int countedBackward(void *ws, int64_t T, int64_t B, const void *params, const void *const *inputs,
                    const void *const *seeds, const void *const *stateSeeds, void *grads, void *const *inputGrads,
                    void *const *stateGrads, void *stream) {
  ++calls.backward;
  return acc::backward(ws, T, B, params, inputs, seeds, stateSeeds, grads, inputGrads, stateGrads, stream);
}

/// Trains `m` from `init` with `o`; the result and the trained params.
TrainResult trained(const rnnc_model &m, const TrainOptions &o, std::vector<float> &params) {
  TrainResult r;
  REQUIRE(train(m, params, o, &r) == 0);
  return r;
}

}  // namespace

TEST_CASE("train: evaluations run forward only, in eval mode, and change no training loss", "[train]") {
  HandModel h = accumulator();
  h.m.forward = countedForward;
  h.m.backward = countedBackward;
  const std::vector<float> init = {0.1f, -0.2f, 0.3f};
  TrainOptions o = addingOptions(10);
  o.eval_batches = 0;
  std::vector<float> plain = init;
  calls = {};
  const TrainResult none = trained(h.m, o, plain);
  CHECK(none.evaluations.empty());
  CHECK((calls.train == 10 && calls.eval == 0 && calls.backward == 10));

  o.eval_batches = 3;
  o.eval_every = 4;
  std::vector<float> evaluated = init;
  calls = {};
  const TrainResult every = trained(h.m, o, evaluated);
  // After steps 4, 8 and the last, 10: three segments each, forward only.
  REQUIRE(every.evaluations.size() == 3);
  CHECK(every.evaluations[0].step == 4);
  CHECK(every.evaluations[2].step == 10);
  CHECK((calls.train == 10 && calls.eval == 9 && calls.backward == 10));
  REQUIRE(every.losses.size() == none.losses.size());
  CHECK(std::memcmp(every.losses.data(), none.losses.data(), none.losses.size() * sizeof(double)) == 0);
  CHECK(std::memcmp(evaluated.data(), plain.data(), plain.size() * sizeof(float)) == 0);

  // At the end only (the default): the same held-out segments, so the same figures as the last of `every`.
  o.eval_every = 0;
  std::vector<float> once = init;
  const TrainResult last = trained(h.m, o, once);
  REQUIRE(last.evaluations.size() == 1);
  CHECK(last.evaluations[0].loss == every.evaluations[2].loss);
  CHECK(last.evaluations[0].metric == every.evaluations[2].metric);
  CHECK(std::isfinite(last.evaluations[0].loss));
  // The held-out data is not the training's: the same params score otherwise on it.
  CHECK(last.evaluations[0].loss != last.losses.back());
}

TEST_CASE("train: text evaluates on its held-out tail with states of its own", "[train]") {
  TempDir tmp;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "abcd"[(i * 7 + i / 3) % 4];
  writeBytes(tmp / "t.txt", text);
  HandModel d = decayModel();
  TrainOptions o;
  o.task = "text:" + tmp / "t.txt";
  o.batch = 4;
  o.bptt = 10;
  o.steps = 12;  // 44 bytes held out (4 x 11); training streams of 89 bytes: a wrap after 8 segments
  o.lr = 0.05;
  o.quiet = true;
  o.eval_batches = 2;
  std::vector<float> a(16, 0.0f), b(16, 0.0f);
  const TrainResult atEnd = trained(d.m, o, a);
  o.eval_every = 1;
  const TrainResult everyStep = trained(d.m, o, b);
  REQUIRE(everyStep.evaluations.size() == 12);
  CHECK(std::memcmp(atEnd.losses.data(), everyStep.losses.data(), atEnd.losses.size() * sizeof(double)) == 0);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  CHECK(atEnd.evaluations.back().loss == everyStep.evaluations.back().loss);
  CHECK(everyStep.evaluations.back().metric == Approx(everyStep.evaluations.back().loss / std::log(2.0)));
  CHECK(everyStep.evaluations[0].loss > everyStep.evaluations.back().loss);  // it learns, and the tail shows it

  // A checkpoint of a run that evaluates holds a position in the shorter training streams.
  o.save = tmp / "c.ckpt";
  o.eval_every = 0;
  o.steps = 3;
  std::vector<float> c(16, 0.0f);
  trained(d.m, o, c);
  std::map<std::string, std::string> meta;
  std::string error;
  REQUIRE(rnnc::io::readSafetensors(o.save, error, &meta));
  CHECK(meta["task"] == o.task + " (tail held out)");
  CHECK(meta["data_position"] == "30");
}

TEST_CASE("train: a negative --eval-every or --eval-batches is refused", "[train]") {
  HandModel h = accumulator();
  std::vector<float> params(3, 0.0f);
  TrainOptions o = addingOptions(5);
  o.eval_every = -1;
  CHECK(captureStderr([&] { CHECK(train(h.m, params, o) == 1); }) ==
        "rnnc: error: --eval-every and --eval-batches must not be negative, not -1 and 8\n");
}
