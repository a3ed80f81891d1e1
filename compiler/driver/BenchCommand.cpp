// `rnnc bench FILE.rnn --batch B --seq T`: forward alone and forward +
// backward (every gradient, inputs' too, as torch computes them) of the
// compiled engine, timed after warm-up, beside its -O0 build in one process;
// with --forward-only, the forward-only build in evaluation mode, as a model is served.
#include "driver/Command.h"
#include "driver/Engine.h"

#include "driver/Device.h"
#include "driver/Task.h"
#include "frontend/ParamInit.h"
#include "rnnc/device.h"
#include "rnnc/memory.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

namespace rnnc {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Timing {
  double forwardMs = 0, forwardMinMs = 0, stepMs = 0, stepMinMs = 0;
  int64_t workspaceBytes = 0;
};

/// Forward alone and forward + backward of m, `runs` times after `warmup`;
/// with `lengths` (a --lengths build), sequences of those lengths. A
/// `forwardOnly` build runs forward alone, in evaluation mode.
std::optional<Timing> timeModel(const rnnc_model &m, const Elaboration &e, int64_t T, int64_t B, int runs, int warmup,
                                int64_t maxMemory, const std::vector<int32_t> &lengths, bool forwardOnly) {
  // The workspace, params and their gradients, inputs and seeds, all checked
  // against the machine before anything is allocated.
  rt::PlanParts parts;
  parts.params = forwardOnly ? 1 : 2;
  parts.seeds = !forwardOnly;
  const double bytes = rt::planBytes(m, T, B, parts);
  if (bytes < 0) {
    fmt::print(stderr, "rnnc: error: --batch {} --seq {}: the workspace would be too large (over 64 TiB, or T x B over 2^31 - 1 rows)\n", B, T);
    return std::nullopt;
  }
  if (std::string why = rt::planShortfall(m, bytes, fmt::format("--batch {} --seq {}: the run", B, T), maxMemory); !why.empty()) {
    fmt::print(stderr, "rnnc: error: {}\n", why);
    return std::nullopt;
  }
  Timing t;
  t.workspaceBytes = m.workspace_bytes(T, B);
  std::vector<float> params;
  if (!flatParams(m, initialParams(e, 1), "the initial params", params)) return std::nullopt;
  std::mt19937_64 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> dense;
  std::vector<std::vector<int32_t>> index;
  std::vector<const void *> inputs, seeds;
  for (int32_t k = 0; k < m.n_inputs; ++k) {
    const rnnc_tensor &in = m.inputs[k];
    if (in.is_index) {
      auto &v = index.emplace_back(static_cast<size_t>(T * B));
      for (auto &x : v) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(in.shape[0]));
      inputs.push_back(v.data());
    } else {
      auto &v = dense.emplace_back(static_cast<size_t>(T * B * in.shape[0]));
      for (auto &x : v) x = normal(rng);
      inputs.push_back(v.data());
    }
  }
  for (int32_t k = 0; k < (forwardOnly ? 0 : m.n_seeds); ++k) {
    auto &v = dense.emplace_back(static_cast<size_t>(T * B * m.seeds[k].shape[0]));
    for (auto &x : v) x = normal(rng);
    seeds.push_back(v.data());
  }
  // Everything the model reads goes where it runs (on a GPU: device memory)
  // before the clock starts; a run ends when the device is done with it.
  // Reals in the model's dtype (--dtype bf16|f16: 2 bytes, rounded from these floats).
  rt::ModelMemory mem(m);
  void *ws = mem.alloc(t.workspaceBytes);
  const int64_t rb = m.real_bytes;
  std::vector<char> grads(static_cast<size_t>(forwardOnly ? rb : static_cast<int64_t>(params.size()) * rb));
  const std::vector<char> stored = storedReals(m, params.data(), static_cast<int64_t>(params.size()));
  const void *dParams = mem.in(stored.data(), static_cast<int64_t>(stored.size()));
  void *dGrads = mem.mirror(grads.data(), static_cast<int64_t>(grads.size()));
  std::vector<std::vector<char>> storedDense;
  auto real = [&](const void *v, int64_t n) {
    return mem.in(storedDense.emplace_back(storedReals(m, static_cast<const float *>(v), n)).data(), n * rb);
  };
  for (int32_t k = 0; k < m.n_inputs; ++k)
    inputs[k] = m.inputs[k].is_index ? mem.in(inputs[k], T * B * 4) : real(inputs[k], T * B * m.inputs[k].shape[0]);
  for (int32_t k = 0; k < (forwardOnly ? 0 : m.n_seeds); ++k) seeds[k] = real(seeds[k], T * B * m.seeds[k].shape[0]);
  if (!ws || !dParams || !dGrads || !mem.error().empty()) {
    fmt::print(stderr, "rnnc: error: {}\n", mem.error());
    return std::nullopt;
  }
  std::vector<double> fwd, step;
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  for (int i = 0; i < warmup + runs; ++i) {
    auto t0 = clock::now();
    // Training mode: a step of training draws its masks (a model without any ignores it); served, evaluation.
    const rnnc_run_options options{forwardOnly ? 0 : 1, 0, static_cast<uint64_t>(i),
                                   lengths.empty() ? nullptr : lengths.data(), 0};
    if (m.forward(ws, T, B, dParams, inputs.data(), nullptr, nullptr, nullptr, nullptr, &options, nullptr) != 0 ||
        m.synchronize(nullptr) != 0) {
      fmt::print(stderr, "rnnc: error: {}\n", m.last_error());
      return std::nullopt;
    }
    auto t1 = clock::now();
    if (!forwardOnly && (m.backward(ws, T, B, dParams, inputs.data(), seeds.data(), nullptr, dGrads, nullptr, nullptr, nullptr) != 0 ||
                         m.synchronize(nullptr) != 0)) {
      fmt::print(stderr, "rnnc: error: {}\n", m.last_error());
      return std::nullopt;
    }
    auto t2 = clock::now();
    if (i >= warmup) {
      fwd.push_back(ms(t1 - t0));
      step.push_back(ms(t2 - t0));
    }
  }
  t.forwardMs = median(fwd);
  t.forwardMinMs = *std::min_element(fwd.begin(), fwd.end());
  t.stepMs = median(step);
  t.stepMinMs = *std::min_element(step.begin(), step.end());
  return t;
}

struct BenchOptions {
  int64_t batch = 1, seq = 100;
  int runs = 10, warmup = 2;
  bool json = false;
  bool onlyOptimized = false; // skip the -O0 column
  int64_t maxMemory = 0;      // --max-memory in bytes; 0: the machine's physical memory
  int64_t minLength = 0;      // --min-length: a --lengths build, lengths uniform in [min, T]; 0: none
  bool unsorted = false;      // --unsorted-lengths: in the order drawn, not longest first
  bool forwardOnly = false;   // --forward-only: the forward-only build, forward alone, evaluation mode
};

class BenchCommand : public Command {
public:
  explicit BenchCommand(CLI::App &app)
      : Command(app.add_subcommand("bench", "time forward + backward, optimized and -O0 side by side")) {
    CLI::App &cmd = *app_;
    BenchOptions &c = options_;
    addCommon(cmd, common_);
    cmd.add_option("--batch", c.batch, "B")->required()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
    cmd.add_option("--seq", c.seq, "T")->required()->check(CLI::Range(int64_t(1), int64_t(1) << 24));
    cmd.add_option("--runs", c.runs, "timed runs (the median is reported)")->check(CLI::Range(1, 100000));
    cmd.add_option("--warmup", c.warmup, "untimed runs first")->check(CLI::Range(0, 100000));
    cmd.add_option("--device", device_, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    cmd.add_flag("--json", c.json, "print JSON");
    cmd.add_flag("--tf32", cuda_.tf32, "cuda: float GEMMs may use TF32 tensor cores");
    cmd.add_flag("--cuda-graphs", cuda_.cudaGraphs, "cuda: replay each loop as a CUDA graph");
    cmd.add_flag("--no-baseline", c.onlyOptimized, "skip the -O0 build");
    cmd.add_option("--min-length", c.minLength,
                   "compile with --lengths and run sequences of lengths drawn uniformly in [MIN, T] (docs/lengths.md)")
        ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
    cmd.add_flag("--unsorted-lengths", c.unsorted,
                 "keep the drawn lengths in their order (by default sorted longest first, as a packed batch)");
    cmd.add_flag("--forward-only", c.forwardOnly,
                 "time the forward-only build (no activations kept for backward) in evaluation mode, as served");
    addMaxMemory(cmd, c.maxMemory);
  }

  int run() override {
    const BenchOptions &c = options_;
    if (common_.o0) options_.onlyOptimized = false; // -O0 asks for the baseline column
    if (c.batch < 1 || c.seq < 1 || c.runs < 1 || c.warmup < 0) {
      fmt::print(stderr, "rnnc: error: --batch, --seq and --runs must be at least 1\n");
      return 1;
    }
    if (c.minLength > c.seq) {
      fmt::print(stderr, "rnnc: error: --min-length {} is above --seq {}\n", c.minLength, c.seq);
      return 1;
    }
    CompileOptions o;
    if (!compileOptionsOf(common_, o)) return 1;
    o.lengths = c.minLength > 0;
    std::vector<int32_t> lengths;
    std::mt19937_64 draw(3);
    int64_t valid = 0;
    for (int64_t b = 0; c.minLength > 0 && b < c.batch; ++b) {
      lengths.push_back(static_cast<int32_t>(c.minLength + static_cast<int64_t>(draw() % (c.seq - c.minLength + 1))));
      valid += lengths.back();
    }
    // Longest first, as PyTorch packs a batch: each step's work is then the sequences still running.
    if (!c.unsorted) std::sort(lengths.begin(), lengths.end(), std::greater<>());
    auto device = resolveDevice(device_);
    if (!device) return 1;
    auto program = checkProgram(common_.file, o);
    if (!program) return 1;
    nlohmann::json out;
    out["model"] = program->entity->decl->name.name;
    out["batch"] = c.batch;
    out["seq"] = c.seq;
    const char *threads = std::getenv("OMP_NUM_THREADS");
    out["threads"] = threads && std::atoi(threads) > 0 ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency());
    out["runs"] = c.runs;
    out["device"] = codegen::targetName(*device);
    if (!lengths.empty()) {
      out["valid_fraction"] = static_cast<double>(valid) / static_cast<double>(c.seq * c.batch);
      out["lengths_sorted"] = !c.unsorted;
    }
    std::vector<std::pair<std::string, bool>> variants = {{"optimized", true}};
    if (!c.onlyOptimized) variants.push_back({"O0", false});
    std::map<std::string, Timing> timings;
    for (const auto &[label, optimize] : variants) {
      // The inputs' and initial states' gradients too, as torch's backward and
      // oneDNN's diff_src and diff_src_iter compute them.
      o.gradients = c.forwardOnly ? Gradients::None : Gradients::All;
      o.optimize = optimize;
      const rnnc_model *m = loadEngine(*program, o, *device, cuda_);
      if (!m) return 1;
      auto t = timeModel(*m, *program->entity, c.seq, c.batch, c.runs, c.warmup, c.maxMemory, lengths, c.forwardOnly);
      if (!t) return 1;
      timings[label] = *t;
      int64_t paramBytes = m->param_elements * 4;
      if (c.forwardOnly) {
        out[label] = {{"forward_ms", t->forwardMs},
                      {"forward_ms_min", t->forwardMinMs},
                      {"tokens_per_s", static_cast<double>(c.seq * c.batch) / (t->forwardMs / 1000)},
                      {"workspace_bytes", t->workspaceBytes},
                      {"param_bytes", paramBytes},
                      // Serving holds the workspace and the params.
                      {"serving_bytes", t->workspaceBytes + paramBytes}};
        continue;
      }
      out[label] = {{"forward_ms", t->forwardMs},
                    {"fwdbwd_ms", t->stepMs},
                    {"fwdbwd_ms_min", t->stepMinMs},
                    {"tokens_per_s", static_cast<double>(c.seq * c.batch) / (t->stepMs / 1000)},
                    {"workspace_bytes", t->workspaceBytes},
                    {"param_bytes", paramBytes},
                    // Training holds the workspace, params, gradients and Adam's two moments.
                    {"training_bytes", t->workspaceBytes + 4 * paramBytes}};
    }
    if (c.forwardOnly) out["forward_only"] = true;
    const auto time = [&](const Timing &t) { return c.forwardOnly ? t.forwardMs : t.stepMs; };
    if (timings.count("O0")) out["speedup_vs_O0"] = time(timings["O0"]) / time(timings["optimized"]);
    if (c.json) {
      fmt::print("{}\n", out.dump(2));
      return 0;
    }
    fmt::print("{}: B = {}, T = {}, {}, median of {} runs{}{}\n", out["model"].get<std::string>(), c.batch, c.seq,
               *device == codegen::Target::Cuda ? std::string("CUDA") : fmt::format("{} threads", out["threads"].get<int>()), c.runs,
               lengths.empty() ? "" : fmt::format(", lengths in [{}, {}]{}: {:.1f}% of the steps valid", c.minLength, c.seq,
                                                 c.unsorted ? " unsorted" : " longest first",
                                                 100.0 * out["valid_fraction"].get<double>()),
               c.forwardOnly ? ", forward only (evaluation mode)" : "");
    if (c.forwardOnly) fmt::print("  {:<10} {:>12} {:>14} {:>14}\n", "", "forward ms", "tokens/s", "workspace MB");
    else fmt::print("  {:<10} {:>12} {:>14} {:>14} {:>14}\n", "", "forward ms", "fwd+bwd ms", "tokens/s", "workspace MB");
    for (const auto &[label, optimize] : variants) {
      const Timing &t = timings[label];
      const double tokens = static_cast<double>(c.seq * c.batch) / (time(t) / 1000), mb = static_cast<double>(t.workspaceBytes) / 1e6;
      if (c.forwardOnly)
        fmt::print("  {:<10} {:>12.3f} {:>14.0f} {:>14.1f}\n", label == "O0" ? "-O0" : label, t.forwardMs, tokens, mb);
      else
        fmt::print("  {:<10} {:>12.3f} {:>14.3f} {:>14.0f} {:>14.1f}\n", label == "O0" ? "-O0" : label, t.forwardMs, t.stepMs,
                   tokens, mb);
    }
    if (timings.count("O0")) fmt::print("  speedup over -O0: {:.2f}x\n", out["speedup_vs_O0"].get<double>());
    return 0;
  }

private:
  CommonOptions common_;
  BenchOptions options_;
  std::string device_ = "auto";
  codegen::CudaOptions cuda_;
};

} // namespace

std::unique_ptr<Command> addBenchCommand(CLI::App &app) { return std::make_unique<BenchCommand>(app); }

} // namespace rnnc
