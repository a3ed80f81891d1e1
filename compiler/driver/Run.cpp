#include "driver/Run.h"

#include "codegen/Bundle.h"
#include "codegen/CudaPrinter.h"
#include "driver/Engine.h"
#include "passes/Pipeline.h"
#include "rnnc/init.h"

#include "interp/Interpreter.h"
#include "rnnc/memory.h"
#include "io/Npy.h"
#include "io/Safetensors.h"
#include "passes/Autodiff.h"

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <random>
#include <set>
#include <unistd.h>

namespace rnnc {

namespace {

namespace fs = std::filesystem;

/// A user error with a one-line message: reported by runGraph, exit code 1.
struct RunError {
  std::string message;
};

[[noreturn]] void fail(std::string message) { throw RunError{std::move(message)}; }

std::string listNames(const std::set<std::string> &names) {
  std::string s;
  for (const auto &n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

io::Array readArray(const std::string &path) {
  std::string error;
  auto a = io::readNpy(path, error);
  if (!a) fail(error);
  return std::move(*a);
}

bool isInteger(io::DType d) { return d == io::DType::I32 || d == io::DType::I64; }

/// The T and B every per-step array must agree on, from the first one seen.
struct Extent {
  int64_t T = -1, B = -1;
  std::string from;
  void check(const io::Array &a, const std::string &what) {
    if (a.shape.size() < 2) fail(fmt::format("{}: expected time-major [T, B, ...], got shape {}", what, io::shapeText(a.shape)));
    if (T < 0) {
      T = a.shape[0];
      B = a.shape[1];
      from = what;
      return;
    }
    if (a.shape[0] != T || a.shape[1] != B)
      fail(fmt::format("{}: T = {}, B = {}, but {} has T = {}, B = {}", what, a.shape[0], a.shape[1], from, T, B));
  }
};

void warnNonFinite(const io::Array &a, const std::string &what) {
  size_t bad = 0;
  for (double v : a.data) bad += !std::isfinite(v);
  if (bad) fmt::print(stderr, "rnnc: warning: {}: {} value{} NaN or infinite\n", what, bad, bad == 1 ? " is" : "s are");
}

/// A state's array: [B, n] for one step before the first, [k, B, n] for k;
/// an index state has no n.
std::vector<int64_t> stateShape(const Node &n, int64_t k, int64_t B) {
  std::vector<int64_t> shape;
  if (k > 1) shape.push_back(k);
  shape.push_back(B);
  if (!n.isIndex) shape.push_back(n.width);
  return shape;
}

void writeArray(const std::string &path, std::vector<int64_t> shape, std::vector<double> data, bool f64) {
  io::Array a;
  a.dtype = f64 ? io::DType::F64 : io::DType::F32;
  a.shape = std::move(shape);
  a.data = std::move(data);
  std::string error;
  if (!io::writeNpy(path, a, error)) fail(error);
}

} // namespace

/// Compiles g (already differentiated when --grad) for o.device, builds and
/// loads it, and runs it on the interpreter's inputs.
static InterpResult runCompiled(const Graph &g, const InterpInputs &in, const RunOptions &o) {
  SourceManager scratch;
  const SourceManager &sm = o.sm ? *o.sm : scratch;
  DiagnosticEngine diags(sm);
  diags.setCapture(true);
  auto c = compileGraph(g, o.compile, diags);
  if (!c) fail(diags.captured().empty() ? "the pipeline failed" : diags.captured().front().message);
  BundleOptions b;
  b.target = o.device;
  b.cuda = o.cuda;
  b.cuda.jit = true; // host code built by the system compiler, kernels by NVRTC
  std::string error;
  auto bundle = bundleOf(*c, nullptr, sm, b, error);
  if (!bundle) fail(error);
  const rnnc_model *m = loadCompiledModel(*bundle, o.compile.dtype, error);
  if (!m) fail(error);
  InterpResult r;
  if (!runLoadedModel(*m, in, o.grad, r, error, o.maxMemory)) fail(error);
  return r;
}

int runGraph(Graph g, const RunOptions &o) {
  try {
    // The objective and the backward graph.
    if (o.grad) {
      Objective objective;
      for (const auto &[name, file] : o.seeds) objective.outputs.push_back(name);
      if (o.seeds.empty() && (o.finalSeeds.empty() || g.loss)) {
        if (!g.loss) fail(fmt::format("--grad without NAME=DY.npy means the loss, and {} has none: name the outputs, "
                                      "like --grad {}=DY.npy", g.name, g.outputs.empty() ? "y" : g.outputs[0].name));
        objective.loss = true;
      }
      objective.inputGrads = objective.stateGrads = objective.stateSeeds = !o.paramGradsOnly;
      SourceManager scratch;
      DiagnosticEngine diags(scratch);
      diags.setCapture(true);
      if (!differentiate(g, objective, diags)) fail(diags.captured().front().message);
    }

    InterpInputs in;
    in.f32 = !o.f64;
    in.train = o.train;
    in.seed = o.seed;
    // Params: every one, no other, each of its shape.
    std::string error;
    auto tensors = io::readSafetensors(o.params, error);
    if (!tensors) fail(error);
    std::set<std::string> expected, given, missing, extra;
    for (const GraphParam &p : g.params) expected.insert(p.name);
    for (const auto &t : *tensors) {
      given.insert(t.name);
      if (!expected.count(t.name)) extra.insert(t.name);
    }
    for (const auto &n : expected)
      if (!given.count(n)) missing.insert(n);
    if (!missing.empty()) fail(fmt::format("{}: missing param{} {}", o.params, missing.size() == 1 ? "" : "s", listNames(missing)));
    if (!extra.empty()) fail(fmt::format("{}: {} has no param{} {}", o.params, g.name, extra.size() == 1 ? "" : "s", listNames(extra)));
    for (const auto &t : *tensors) {
      const GraphParam *p = g.param(t.name);
      if (t.array.shape != p->shape)
        fail(fmt::format("{}: param {} has shape {}, {} needs {}", o.params, t.name, io::shapeText(t.array.shape), g.name,
                         io::shapeText(p->shape)));
      if (isInteger(t.array.dtype)) fail(fmt::format("{}: param {} is {}, not a float", o.params, t.name, io::dtypeName(t.array.dtype)));
      warnNonFinite(t.array, o.params + ": " + t.name);
      in.params[t.name] = t.array.data;
    }

    // Inputs: every port, per step.
    Extent extent;
    for (const auto &[name, file] : o.inputs) {
      bool known = false;
      for (const GraphPort &p : g.inputs) known |= p.name == name;
      if (!known) fail(fmt::format("--input {}: {} has no input '{}'", name, g.name, name));
    }
    for (const GraphPort &p : g.inputs) {
      auto it = o.inputs.find(p.name);
      if (it == o.inputs.end()) fail(fmt::format("missing --input {}=X.npy ({} needs it)", p.name, g.name));
      const Node &n = g.node(p.value.src);
      io::Array a = readArray(it->second);
      extent.check(a, it->second);
      if (n.isIndex) {
        if (a.shape.size() != 2 || !isInteger(a.dtype))
          fail(fmt::format("{}: input {} is index[{}]: expected an int32 or int64 array [T, B], got {} {}", it->second,
                           p.name, n.width, io::dtypeName(a.dtype), io::shapeText(a.shape)));
        for (size_t i = 0; i < a.data.size(); ++i)
          if (a.data[i] < 0 || a.data[i] >= static_cast<double>(n.width))
            fail(fmt::format("{}: index {} at position {} is out of range [0, {})", it->second, a.data[i], i, n.width));
      } else {
        if (a.shape.size() != 3 || a.shape[2] != n.width || isInteger(a.dtype))
          fail(fmt::format("{}: input {} needs a float array [T, B, {}], got {} {}", it->second, p.name, n.width,
                           io::dtypeName(a.dtype), io::shapeText(a.shape)));
        warnNonFinite(a, it->second);
      }
      in.inputs[p.name] = std::move(a.data);
    }
    if (extent.T <= 0 || extent.B <= 0) fail("T and B must be at least 1");
    in.T = extent.T;
    in.B = extent.B;
    if (!o.lengths.empty()) {
      io::Array a = readArray(o.lengths);
      if (a.shape.size() != 1 || !isInteger(a.dtype))
        fail(fmt::format("{}: lengths need an int32 or int64 array [B], got {} {}", o.lengths, io::dtypeName(a.dtype),
                         io::shapeText(a.shape)));
      if (a.shape[0] != in.B) fail(fmt::format("{}: {} lengths for B = {} sequences", o.lengths, a.shape[0], in.B));
      for (size_t b = 0; b < a.data.size(); ++b) {
        if (a.data[b] < 1 || a.data[b] > static_cast<double>(in.T))
          fail(fmt::format("{}: lengths[{}] = {} is not in 1..{} (T = {})", o.lengths, b, a.data[b], in.T, in.T));
        in.lengths.push_back(static_cast<int32_t>(a.data[b]));
      }
    }

    // States: [B, n] is the step before the first; [k, B, n] the k steps before it.
    auto depths = stateDepths(g);
    std::map<std::string, NodeId> stateNodes;
    for (const auto &[name, id] : g.states()) stateNodes[name] = id;
    // [B, n] or [k, B, n] for state `name`, from --state or --final-grad.
    auto stateArray = [&](const std::string &name, const std::string &file, const char *what) {
      auto it = stateNodes.find(name);
      if (it == stateNodes.end()) {
        std::set<std::string> names;
        for (auto &[n, id] : stateNodes) names.insert(n);
        fail(fmt::format("{} {}: {} has no state '{}' (its states: {})", what, name, g.name, name,
                         names.empty() ? "none" : listNames(names)));
      }
      const Node &n = g.node(it->second);
      int64_t k = depths.at(name), w = n.isIndex ? 1 : n.width;
      io::Array a = readArray(file);
      std::vector<int64_t> one = stateShape(n, 1, in.B), all = stateShape(n, k, in.B);
      if (k == 1) all.insert(all.begin(), 1); // [1, B, n] is [B, n] too
      if (a.shape != one && a.shape != all)
        fail(fmt::format("{}: state {} needs shape {} (or {}), got {}", file, name, io::shapeText(one),
                         io::shapeText(all), io::shapeText(a.shape)));
      if (isInteger(a.dtype) != n.isIndex)
        fail(fmt::format("{}: state {} must be {} array", file, name, n.isIndex ? "an integer" : "a float"));
      std::vector<double> v(static_cast<size_t>(k * in.B * w), 0.0);
      std::copy(a.data.begin(), a.data.end(), v.end() - static_cast<long>(a.data.size()));
      return v;
    };
    for (const auto &[name, file] : o.states) in.states[name] = stateArray(name, file, "--state");
    // The final states' gradients: [B, n] is the last step's.
    for (const auto &[name, file] : o.finalSeeds) {
      if (auto it = stateNodes.find(name); it != stateNodes.end() && g.node(it->second).isIndex)
        fail(fmt::format("--final-grad {}: state {} is an index: it has no gradient", name, name));
      in.finalSeeds[name] = stateArray(name, file, "--final-grad");
    }
    // Seeds: dL/dy per step, as the output.
    for (const auto &[name, file] : o.seeds) {
      const GraphPort *out = nullptr;
      for (const GraphPort &p : g.outputs)
        if (p.name == name) out = &p;
      int64_t w = g.node(out->value.src).width;
      io::Array a = readArray(file);
      if (a.shape != std::vector<int64_t>{in.T, in.B, w} || isInteger(a.dtype))
        fail(fmt::format("{}: the gradient of output {} needs a float array [{}, {}, {}], got {} {}", file, name, in.T,
                         in.B, w, io::dtypeName(a.dtype), io::shapeText(a.shape)));
      in.seeds[name] = std::move(a.data);
    }
    // Where the results go, checked before the work.
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (ec || !fs::is_directory(o.out) || ::access(o.out.c_str(), W_OK) != 0)
      fail(fmt::format("cannot write to output directory '{}'{}", o.out, ec ? ": " + ec.message() : ""));

    if (!o.compiled)
      if (std::string why = rt::memoryShortfall(interpreterBytes(g, in.T, in.B),
                                                fmt::format("T = {}, B = {}: the interpreter", in.T, in.B), o.maxMemory);
          !why.empty())
        fail(why);
    InterpResult r = o.compiled ? runCompiled(g, in, o) : interpret(g, in);

    // Everything computed: write, each file atomically.
    auto dir = [&](const std::string &sub) {
      fs::create_directories(fs::path(o.out) / sub, ec);
      if (ec) fail(fmt::format("cannot create '{}': {}", (fs::path(o.out) / sub).string(), ec.message()));
      return (fs::path(o.out) / sub).string();
    };
    for (const GraphPort &p : g.outputs) {
      const Node &n = g.node(p.value.src);
      std::vector<int64_t> shape = n.isIndex ? std::vector<int64_t>{in.T, in.B} : std::vector<int64_t>{in.T, in.B, n.width};
      writeArray((fs::path(o.out) / (p.name + ".npy")).string(), shape, r.outputs.at(p.name), o.f64);
    }
    if (r.loss) writeArray((fs::path(o.out) / "loss.npy").string(), {}, {*r.loss}, o.f64);
    for (const auto &[name, v] : r.finalStates)
      writeArray((fs::path(dir("final")) / (name + ".npy")).string(),
                 stateShape(g.node(stateNodes.at(name)), depths.at(name), in.B), v, o.f64);
    if (o.grad) {
      std::string gdir = dir("grad");
      for (const GraphParam &p : g.params) {
        auto it = r.paramGrads.find(p.name);
        std::vector<double> zeros;
        int64_t numel = 1;
        for (int64_t d : p.shape) numel *= d;
        if (it == r.paramGrads.end()) zeros.assign(static_cast<size_t>(numel), 0.0);
        writeArray((fs::path(gdir) / (p.name + ".npy")).string(), p.shape, it == r.paramGrads.end() ? zeros : it->second, o.f64);
      }
      // Inputs and states the objective does not reach get zeros, so every file is there.
      for (const GraphPort &p : o.paramGradsOnly ? std::vector<GraphPort>() : g.inputs) {
        const Node &n = g.node(p.value.src);
        if (n.isIndex) continue;
        auto it = r.inputGrads.find(p.name);
        std::vector<double> v = it != r.inputGrads.end() ? it->second : std::vector<double>(in.T * in.B * n.width, 0.0);
        writeArray((fs::path(gdir) / (p.name + ".npy")).string(), {in.T, in.B, n.width}, v, o.f64);
      }
      for (const auto &[name, id] : stateNodes) {
        const Node &n = g.node(id);
        if (n.isIndex || o.paramGradsOnly) continue;
        std::vector<int64_t> shape = stateShape(n, depths.at(name), in.B);
        auto it = r.stateGrads.find(name);
        std::vector<double> v = it != r.stateGrads.end() ? it->second
                                                         : std::vector<double>(depths.at(name) * in.B * n.width, 0.0);
        writeArray((fs::path(dir("grad/initial")) / (name + ".npy")).string(), shape, v, o.f64);
      }
    }
    return 0;
  } catch (RunError &e) {
    fmt::print(stderr, "rnnc: error: {}\n", e.message);
    return 1;
  }
}

int initParams(const Elaboration &e, uint64_t seed, const std::string &path, int64_t maxMemory) {
  // Held as doubles, then written as float32 bytes.
  const double elements = paramElements(e);
  if (std::string why = rt::memoryShortfall(12 * elements, fmt::format("drawing {:.0f} param values", elements), maxMemory);
      !why.empty()) {
    fmt::print(stderr, "rnnc: error: {}\n", why);
    return 1;
  }
  std::vector<io::Tensor> tensors = initialParams(e, seed);
  std::string error;
  if (!io::writeSafetensors(path, tensors, error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return 1;
  }
  return 0;
}

} // namespace rnnc
