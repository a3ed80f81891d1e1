// 1. Read the file and pick the entity; a model with a loss trains as is, a
//    cell is wrapped for the task (wrapperText): adding feeds it (value,
//    marker) and reads a width-1 readout scored by mse; copy and text embed
//    tokens and read logits scored by cross_entropy.
// 2. Lower, differentiate the loss, run the pipeline, print the C++ bundle,
//    build and load it (the cache makes the second run instant).
// 3. Params from --params or drawn with the seed, laid out as the model's
//    param table says; then runtime/train takes over.
#include "driver/Train.h"

#include "codegen/Bundle.h"
#include "codegen/CudaPrinter.h"
#include "rnnc/device.h"
#include "driver/Engine.h"
#include "driver/Entity.h"
#include "driver/Run.h"
#include "frontend/Lower.h"
#include "io/Safetensors.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"
#include "rnnc/memory.h"
#include "support/Crash.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>
#include <random>
#include <set>

namespace rnnc {

namespace {

namespace fs = std::filesystem;

/// The distinct bytes of a text file, or -1 after saying why not.
int64_t vocabularyOf(const std::string &path) {
  std::string error;
  auto file = io::InputFile::open(path, error);
  if (!file) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return -1;
  }
  std::vector<bool> seen(256, false);
  std::vector<char> chunk(1 << 20);
  for (uint64_t at = 0; at < file->size(); at += chunk.size()) {
    uint64_t n = std::min<uint64_t>(chunk.size(), file->size() - at);
    if (!file->read(at, n, chunk.data(), error)) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return -1;
    }
    for (uint64_t i = 0; i < n; ++i) seen[static_cast<unsigned char>(chunk[i])] = true;
  }
  return std::count(seen.begin(), seen.end(), true);
}

/// A model around `cell` for the task, as .rnn text. Dims: every dim the
/// cell's file has (after -D); the cell's input width is inferred from what
/// the wrapper passes it, which wins over a file's dim.
std::optional<std::string> wrapperText(const FrontendResult &r, const Elaboration &cell, const std::string &task,
                                       int64_t vocabulary, const std::string &cellFile) {
  const std::string &name = cell.decl->name.name;
  if (cell.inputs.size() != 1 || cell.outputs.empty() || cell.inputs[0].type.isIndex || !cell.outputs[0].type.width ||
      !cell.inputs[0].type.width) {
    fmt::print(stderr, "rnnc: error: {} {} cannot be trained on a task as it is: a cell needs one dense input and a "
                       "first output of known width (write a model with a loss for anything else)\n",
               cell.decl->keyword(), name);
    return std::nullopt;
  }
  std::string base = fs::path(cellFile).filename().string();
  if (base.find_first_of("\"\\\n") != std::string::npos) {
    fmt::print(stderr, "rnnc: error: {}: cannot import a file with this name into the training model\n", cellFile);
    return std::nullopt;
  }
  int64_t in = *cell.inputs[0].type.width, out = *cell.outputs[0].type.width;
  std::string text = fmt::format("# The training model rnnc wraps around cell {} for task {}.\nimport \"{}\"\n", name,
                                 task.substr(0, task.find(':')), base);
  for (const auto &[dim, value] : r.sema.dims) text += fmt::format("dim {} = {}\n", dim, value);
  if (task == "adding") {
    text += fmt::format("model Adding{}(x: [2], y: [1]) -> pred {{\n  h = {}(x)\n", name, name);
    text += fmt::format("  param W_out: [1, {}]\n  param b_out: [1]\n  pred = W_out @ h + b_out\n", out);
    text += "  loss = mse(pred, y)\n}\n";
    return text;
  }
  int64_t V = task == "copy" ? 10 : vocabulary;
  std::string model = task == "copy" ? "Copy" : "Text";
  text += fmt::format("model {}{}(tok: index[{}], target: index[{}]) -> logits {{\n", model, name, V, V);
  text += fmt::format("  param emb: [{}, {}]\n  x = embed(emb, tok)\n  h = {}(x)\n", V, in, name);
  text += fmt::format("  param W_out: [{}, {}]\n  param b_out: [{}]\n  logits = W_out @ h + b_out\n", V, out, V);
  text += "  loss = cross_entropy(logits, target)\n}\n";
  return text;
}

/// Lowered, differentiated, scheduled and printed for the CPU; null after
/// printing why not.
std::optional<codegen::Bundle> bundleOf(FrontendResult &r, const Elaboration &e, bool optimize,
                                        const TimeParallelOptions &timeParallel, bool backward,
                                        bool inputGrads, const std::string &device, codegen::CudaOptions cuda) {
  std::optional<Graph> g;
  Compilation c;
  try {
    g = lowerToGraph(e, *r.diags);
    if (g && backward) {
      Objective objective = defaultObjective(*g);
      objective.inputGrads = inputGrads;
      objective.stateGrads = inputGrads;
      if ((objective.loss || !objective.outputs.empty()) && !differentiate(*g, objective, *r.diags)) g.reset();
    }
    if (g) {
      c.graph = std::move(*g);
      c.optimize = optimize;
      c.timeParallel = timeParallel;
      if (!runPipeline(c, *r.diags)) return std::nullopt;
    }
  } catch (TooManyErrors &) {
    g.reset();
  }
  printSummary(*r.diags);
  if (r.diags->hasErrors() || c.graph.nodes.empty()) return std::nullopt;
  codegen::Program program;
  std::string error;
  if (!codegen::buildProgram(c, program, error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return std::nullopt;
  }
  describeForBundle(r.sema.dims, e, program);
  cuda.jit = true; // the engine builds host code with the system compiler, kernels with NVRTC
  return codegen::printBundle(program, r.sm, device, &cuda);
}

const rnnc_model *load(const codegen::Bundle &b) {
  std::string error;
  const rnnc_model *m = loadCompiledModel(b, false, error);
  if (!m) fmt::print(stderr, "rnnc: error: {}\n", error);
  return m;
}

/// The flat params of m from `tensors` (by name, shapes checked).
bool flatParams(const rnnc_model &m, const std::vector<io::Tensor> &tensors, const std::string &from,
                std::vector<float> &flat) {
  flat.assign(static_cast<size_t>(m.param_elements), 0.0f);
  std::set<std::string> given;
  for (const io::Tensor &t : tensors) given.insert(t.name);
  for (int32_t k = 0; k < m.n_params; ++k) {
    const rnnc_tensor &p = m.params[k];
    auto it = std::find_if(tensors.begin(), tensors.end(), [&](const io::Tensor &t) { return t.name == p.name; });
    std::vector<int64_t> shape(p.shape, p.shape + p.rank);
    if (it == tensors.end()) {
      fmt::print(stderr, "rnnc: error: {}: missing param {}\n", from, p.name);
      return false;
    }
    if (it->array.shape != shape) {
      fmt::print(stderr, "rnnc: error: {}: param {} has shape {}, the model needs {}\n", from, p.name,
                 io::shapeText(it->array.shape), io::shapeText(shape));
      return false;
    }
    std::copy(it->array.data.begin(), it->array.data.end(), flat.begin() + p.offset);
    given.erase(p.name);
  }
  if (!given.empty()) {
    fmt::print(stderr, "rnnc: error: {}: the model has no param {}\n", from, *given.begin());
    return false;
  }
  return true;
}

struct Loaded {
  std::unique_ptr<FrontendResult> file, wrapper;
  const Elaboration *entity = nullptr; // what is compiled (the wrapper's model for a cell)
};

/// Reads the file; for a cell without a loss and a task, reads the wrapper too.
bool loadForTask(const std::string &path, const std::vector<DimOverride> &dims, const std::string &entry, bool color,
                 const std::string &task, Loaded &out) {
  FrontendOptions fo;
  fo.dims = dims;
  fo.color = color;
  out.file = runFrontend(path, fo);
  if (!out.file->ok()) {
    printSummary(*out.file->diags);
    return false;
  }
  out.entity = selectEntity(*out.file, path, entry);
  if (!out.entity) return false;
  bool hasLoss = false;
  for (const auto &st : out.entity->decl->body)
    if (st->kind == StmtKind::Assign)
      for (const Ident &t : static_cast<const AssignStmt &>(*st).targets) hasLoss |= t.name == "loss";
  if (hasLoss || task.empty()) return true;
  int64_t vocabulary = 0;
  if (task.rfind("text:", 0) == 0) {
    if (task.size() == 5) {
      fmt::print(stderr, "rnnc: error: --task text: needs the path of a text file: --task text:PATH\n");
      return false;
    }
    vocabulary = vocabularyOf(task.substr(5));
    if (vocabulary < 0) return false;
    if (vocabulary < 2) {
      fmt::print(stderr, "rnnc: error: {}: a text needs at least two distinct bytes\n", task.substr(5));
      return false;
    }
  } else if (task != "adding" && task != "copy") {
    fmt::print(stderr, "rnnc: error: unknown task '{}' (the tasks are: adding, copy, text:PATH)\n", task);
    return false;
  }
  auto text = wrapperText(*out.file, *out.entity, task, vocabulary, path);
  if (!text) return false;
  fs::path wrapperPath = fs::path(path).parent_path() / (fs::path(path).stem().string() + ".train.rnn");
  FrontendOptions wo;
  wo.color = color;
  out.wrapper = runFrontend(wrapperPath.string(), wo, &*text);
  if (!out.wrapper->ok()) {
    printSummary(*out.wrapper->diags);
    fmt::print(stderr, "rnnc: error: the training model rnnc wrote around {} does not check (above); it was:\n{}",
               out.entity->decl->name.name, *text);
    return false;
  }
  out.entity = selectEntity(*out.wrapper, wrapperPath.string(), "");
  return out.entity != nullptr;
}

} // namespace

int trainCommand(const TrainCommand &c) {
  Loaded loaded;
  if (!loadForTask(c.file, c.dims, c.entry, c.color, c.train.task, loaded)) return 1;
  FrontendResult &r = loaded.wrapper ? *loaded.wrapper : *loaded.file;
  // Training needs neither dL/dx nor the initial states' gradients.
  auto bundle = bundleOf(r, *loaded.entity, c.optimize, c.timeParallel, true, /*inputGrads=*/false, c.device, c.cuda);
  if (!bundle) return 1;
  const rnnc_model *m = load(*bundle);
  if (!m) return 1;
  // Refused before the params are drawn: the plan counts them.
  if (std::string error; !rt::checkTrainingPlan(*m, c.train, error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return 1;
  }
  std::vector<float> params;
  if (!c.params.empty()) {
    std::string error;
    auto tensors = io::readSafetensors(c.params, error);
    if (!tensors) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return 1;
    }
    if (!flatParams(*m, *tensors, c.params, params)) return 1;
  } else if (!flatParams(*m, initialParams(*loaded.entity, c.train.seed), "the initial params", params)) {
    return 1;
  }
  return rt::train(*m, params, c.train);
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Timing {
  double forwardMs = 0, stepMs = 0, stepMinMs = 0;
  int64_t workspaceBytes = 0;
};

/// Forward alone and forward + backward of m, `runs` times after `warmup`.
std::optional<Timing> timeModel(const rnnc_model &m, const Elaboration &e, int64_t T, int64_t B, int runs, int warmup,
                                int64_t maxMemory) {
  // The workspace, params and their gradients, inputs and seeds, all checked
  // against the machine before anything is allocated.
  rt::PlanParts parts;
  parts.params = 2;
  parts.seeds = true;
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
  for (int32_t k = 0; k < m.n_seeds; ++k) {
    auto &v = dense.emplace_back(static_cast<size_t>(T * B * m.seeds[k].shape[0]));
    for (auto &x : v) x = normal(rng);
    seeds.push_back(v.data());
  }
  // Everything the model reads goes where it runs (on a GPU: device memory)
  // before the clock starts; a run ends when the device is done with it.
  rt::ModelMemory mem(m);
  void *ws = mem.alloc(t.workspaceBytes);
  std::vector<float> grads(params.size());
  const void *dParams = mem.in(params.data(), static_cast<int64_t>(params.size()) * 4);
  void *dGrads = mem.mirror(grads.data(), static_cast<int64_t>(grads.size()) * 4);
  for (int32_t k = 0; k < m.n_inputs; ++k)
    inputs[k] = mem.in(inputs[k], T * B * (m.inputs[k].is_index ? 1 : m.inputs[k].shape[0]) * 4);
  for (int32_t k = 0; k < m.n_seeds; ++k) seeds[k] = mem.in(seeds[k], T * B * m.seeds[k].shape[0] * 4);
  if (!ws || !dParams || !dGrads || !mem.error().empty()) {
    fmt::print(stderr, "rnnc: error: {}\n", mem.error());
    return std::nullopt;
  }
  std::vector<double> fwd, step;
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  for (int i = 0; i < warmup + runs; ++i) {
    auto t0 = clock::now();
    if (m.forward(ws, T, B, dParams, inputs.data(), nullptr) != 0 || m.synchronize() != 0) {
      fmt::print(stderr, "rnnc: error: {}\n", m.last_error());
      return std::nullopt;
    }
    auto t1 = clock::now();
    if (m.backward(ws, T, B, dParams, seeds.data(), dGrads, nullptr, nullptr) != 0 || m.synchronize() != 0) {
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
  t.stepMs = median(step);
  t.stepMinMs = *std::min_element(step.begin(), step.end());
  return t;
}

} // namespace

int benchCommand(const BenchCommand &c) {
  if (c.batch < 1 || c.seq < 1 || c.runs < 1 || c.warmup < 0) {
    fmt::print(stderr, "rnnc: error: --batch, --seq and --runs must be at least 1\n");
    return 1;
  }
  Loaded loaded;
  if (!loadForTask(c.file, c.dims, c.entry, c.color, "", loaded)) return 1;
  FrontendResult &r = *loaded.file;
  nlohmann::json out;
  out["model"] = loaded.entity->decl->name.name;
  out["batch"] = c.batch;
  out["seq"] = c.seq;
  const char *threads = std::getenv("OMP_NUM_THREADS");
  out["threads"] = threads && std::atoi(threads) > 0 ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency());
  out["runs"] = c.runs;
  out["device"] = c.device;
  std::vector<std::pair<std::string, bool>> variants = {{"optimized", true}};
  if (!c.onlyOptimized) variants.push_back({"O0", false});
  std::map<std::string, Timing> timings;
  for (const auto &[label, optimize] : variants) {
    // The inputs' and initial states' gradients too, as torch's backward and
    // oneDNN's diff_src and diff_src_iter compute them.
    auto bundle = bundleOf(r, *loaded.entity, optimize, c.timeParallel, true, /*inputGrads=*/true, c.device, c.cuda);
    if (!bundle) return 1;
    const rnnc_model *m = load(*bundle);
    if (!m) return 1;
    auto t = timeModel(*m, *loaded.entity, c.seq, c.batch, c.runs, c.warmup, c.maxMemory);
    if (!t) return 1;
    timings[label] = *t;
    int64_t paramBytes = m->param_elements * 4;
    out[label] = {{"forward_ms", t->forwardMs},
                  {"fwdbwd_ms", t->stepMs},
                  {"fwdbwd_ms_min", t->stepMinMs},
                  {"tokens_per_s", static_cast<double>(c.seq * c.batch) / (t->stepMs / 1000)},
                  {"workspace_bytes", t->workspaceBytes},
                  {"param_bytes", paramBytes},
                  // Training holds the workspace, params, gradients and Adam's two moments.
                  {"training_bytes", t->workspaceBytes + 4 * paramBytes}};
  }
  if (timings.count("O0")) out["speedup_vs_O0"] = timings["O0"].stepMs / timings["optimized"].stepMs;
  if (c.json) {
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{}: B = {}, T = {}, {}, median of {} runs\n", out["model"].get<std::string>(), c.batch, c.seq,
             c.device == "cuda" ? std::string("CUDA") : fmt::format("{} threads", out["threads"].get<int>()), c.runs);
  fmt::print("  {:<10} {:>12} {:>14} {:>14} {:>14}\n", "", "forward ms", "fwd+bwd ms", "tokens/s", "workspace MB");
  for (const auto &[label, optimize] : variants) {
    const Timing &t = timings[label];
    fmt::print("  {:<10} {:>12.3f} {:>14.3f} {:>14.0f} {:>14.1f}\n", label == "O0" ? "-O0" : label, t.forwardMs, t.stepMs,
               static_cast<double>(c.seq * c.batch) / (t.stepMs / 1000), static_cast<double>(t.workspaceBytes) / 1e6);
  }
  if (timings.count("O0")) fmt::print("  speedup over -O0: {:.2f}x\n", out["speedup_vs_O0"].get<double>());
  return 0;
}

} // namespace rnnc
