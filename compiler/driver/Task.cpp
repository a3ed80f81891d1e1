#include "driver/Task.h"

#include "driver/Engine.h"
#include "driver/Entity.h"
#include "io/Safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
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

} // namespace

/// Reads the file; for a cell without a loss and a task, reads the wrapper too.
std::optional<TaskProgram> loadForTask(const std::string &path, const CompileOptions &o, const std::string &task) {
  auto file = checkProgram(path, o);
  if (!file) return std::nullopt;
  TaskProgram out{std::move(*file), std::nullopt};
  bool hasLoss = false;
  for (const auto &st : out.file.entity->decl->body)
    if (st->kind == StmtKind::Assign)
      for (const Ident &t : static_cast<const AssignStmt &>(*st).targets) hasLoss |= t.name == "loss";
  if (hasLoss || task.empty()) return out;
  int64_t vocabulary = 0;
  if (task.rfind("text:", 0) == 0) {
    if (task.size() == 5) {
      fmt::print(stderr, "rnnc: error: --task text: needs the path of a text file: --task text:PATH\n");
      return std::nullopt;
    }
    vocabulary = vocabularyOf(task.substr(5));
    if (vocabulary < 0) return std::nullopt;
    if (vocabulary < 2) {
      fmt::print(stderr, "rnnc: error: {}: a text needs at least two distinct bytes\n", task.substr(5));
      return std::nullopt;
    }
  } else if (task != "adding" && task != "copy") {
    fmt::print(stderr, "rnnc: error: unknown task '{}' (the tasks are: adding, copy, text:PATH)\n", task);
    return std::nullopt;
  }
  auto text = wrapperText(*out.file.file, *out.file.entity, task, vocabulary, path);
  if (!text) return std::nullopt;
  fs::path wrapperPath = fs::path(path).parent_path() / (fs::path(path).stem().string() + ".train.rnn");
  CompileOptions wo;
  wo.color = o.color;
  wo.optimize = o.optimize;
  wo.timeParallel = o.timeParallel;
  out.wrapper = checkProgram(wrapperPath.string(), wo, &*text);
  if (!out.wrapper) {
    fmt::print(stderr, "rnnc: error: the training model rnnc wrote around {} does not check (above); it was:\n{}",
               out.file.entity->decl->name.name, *text);
    return std::nullopt;
  }
  return out;
}

const rnnc_model *loadEngine(const CheckedProgram &p, const CompileOptions &o, codegen::Target target,
                             codegen::CudaOptions cuda) {
  auto c = compileProgram(p, o);
  finishDiagnostics(p);
  if (!c) return nullptr;
  BundleOptions b;
  b.target = target;
  b.cuda = cuda;
  b.cuda.jit = true; // the engine builds host code with the system compiler, kernels with NVRTC
  std::string error;
  auto bundle = bundleOf(*c, &p, p.file->sm, b, error);
  const rnnc_model *m = bundle ? loadCompiledModel(*bundle, o.dtype, error) : nullptr;
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

} // namespace rnnc
