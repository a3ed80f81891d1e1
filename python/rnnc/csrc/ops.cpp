// The rnnc torch ops in C++ (the package's default binding; docs/torch.md):
//   rnnc::forward(model, params, inputs, states, T, B, seed, lengths, key) -> outputs + final states + [loss, ws]
//     (seed -1: evaluation; else training, dropout and zoneout draw their masks from it; lengths:
//     none, or int32 [B] on the CPU, each sequence's steps, for a model compiled with --lengths;
//     key: none, or one int64 on the CPU: training with it as the seed, so that a compiled graph
//     can draw the seed with torch.randint instead of reading it with .item())
//   rnnc::backward(model, ws, params, inputs, output_grads, state_grads, loss_grad, T, B, input_grads_mask)
//       -> [param grads] + input grads + initial-state grads
//     (input_grads_mask: none, every input's gradient the objective reaches; else one bool per
//     input, and an input marked false gets an empty tensor and its product is skipped)
//   rnnc::register_model(model): the ops take only tables registered here.
// `model` is the address of a bundle's rnnc_model table (runtime/include/rnnc/model.h,
// ABI v7), which the Python package loads with ctypes. The CPU and CUDA kernels call its
// function pointers with torch-allocated tensors (the workspace a uint8 tensor) and, on
// CUDA, torch's current stream. Autograd is a C++ autograd::Function; the fake kernels
// (shapes for torch.compile) are registered from Python (rnnc/torch.py). Built by the
// package with the system C++ compiler against torch's headers and cached.
#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "rnnc/model.h"

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::mutex registryMutex;
std::unordered_set<int64_t> registry;

void registerModel(int64_t address) {
  TORCH_CHECK(address != 0, "rnnc::register_model: a null table");
  auto *m = reinterpret_cast<const rnnc_model *>(address);
  TORCH_CHECK(m->abi_version == RNNC_ABI_VERSION, "rnnc::register_model: the table speaks ABI ", m->abi_version,
              "; this op library speaks ", RNNC_ABI_VERSION);
  std::lock_guard<std::mutex> lock(registryMutex);
  registry.insert(address);
}

const rnnc_model *lookup(int64_t address) {
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    TORCH_CHECK(registry.count(address), "rnnc: ", address,
                " is not the address of a model table the package registered (rnnc::register_model)");
  }
  return reinterpret_cast<const rnnc_model *>(address);
}

int64_t elements(const rnnc_tensor &t) { return rnnc::rt::tensorElements(t); }

void *streamOf(const at::Device &d) {
  if (!d.is_cuda()) return nullptr;
  return c10::impl::getDeviceGuardImpl(d.type())->getStream(d).native_handle();
}

at::ScalarType realType(const rnnc_model *m) {
  switch (m->dtype) {
  case RNNC_DTYPE_F64: return at::kDouble;
  case RNNC_DTYPE_BF16: return at::kBFloat16;
  case RNNC_DTYPE_F16: return at::kHalf;
  default: return at::kFloat;
  }
}

void *ptrOrNull(const Tensor &t) { return t.defined() && t.numel() ? t.data_ptr() : nullptr; }

// The addresses of `tensors` made contiguous; the copies go into `keep`, which must outlive the call.
std::vector<const void *> contiguousPointers(at::TensorList tensors, std::vector<Tensor> &keep) {
  std::vector<const void *> pointers;
  for (const Tensor &t : tensors) {
    keep.push_back(t.contiguous());
    pointers.push_back(keep.back().data_ptr());
  }
  return pointers;
}

// Checks that `inputs` are the model's, as forward takes them and backward again.
void checkInputs(const rnnc_model *m, const Tensor &params, at::TensorList inputs, int64_t T, int64_t B) {
  auto dt = realType(m);
  TORCH_CHECK((int64_t)inputs.size() == m->n_inputs, m->name, " takes ", m->n_inputs, " inputs, not ", inputs.size());
  for (int k = 0; k < m->n_inputs; ++k) {
    const rnnc_tensor &info = m->inputs[k];
    const Tensor &x = inputs[k];
    TORCH_CHECK(x.device() == params.device(), m->name, ": input '", info.name, "' is on ", x.device(), ", params on ",
                params.device());
    if (info.is_index) {
      TORCH_CHECK(x.scalar_type() == at::kInt && x.numel() == T * B, m->name, ": input '", info.name,
                  "' must be [T, B] int32");
    } else {
      TORCH_CHECK(x.scalar_type() == dt && x.numel() == T * B * elements(info), m->name, ": input '", info.name,
                  "' must be [", T, ", ", B, ", ", elements(info), "] ", dt);
    }
  }
}

// Checks that the op's tensors fit the table, so a call that bypasses the Python layer
// raises instead of handing the bundle short arrays.
void checkArgs(const rnnc_model *m, const Tensor &params, at::TensorList inputs, at::TensorList states, int64_t T,
               int64_t B) {
  auto dt = realType(m);
  TORCH_CHECK(T >= 1 && B >= 1, m->name, ": T and B must be at least 1, not T=", T, ", B=", B);
  bool cuda = m->device == RNNC_DEVICE_CUDA;
  TORCH_CHECK(params.device().is_cuda() == cuda, m->name, ": params are on ", params.device(), "; this build runs on ",
              cuda ? "CUDA" : "the CPU");
  TORCH_CHECK(params.scalar_type() == dt && params.numel() == m->param_elements, m->name, ": params must be ",
              m->param_elements, " ", dt, " elements, not ", params.numel(), " ", params.scalar_type());
  checkInputs(m, params, inputs, T, B);
  TORCH_CHECK(states.empty() || (int64_t)states.size() == m->n_states, m->name, " has ", m->n_states,
              " states; states must be all or none, not ", states.size());
  for (size_t k = 0; k < states.size(); ++k) {
    const rnnc_tensor &info = m->states[k];
    TORCH_CHECK(states[k].device() == params.device() && states[k].scalar_type() == dt &&
                    states[k].numel() == info.depth * B * elements(info),
                m->name, ": state '", info.name, "' must be [", info.depth, ", ", B, ", ", elements(info), "] ", dt,
                " on ", params.device());
  }
}

// CPU workspaces kept for the next forward of the same size. torch's CPU allocator takes a
// large tensor fresh from the system (mmap) and gives it back when freed, so every forward
// paid page faults and the kernel's zeroing on its whole workspace (a 49 MB one: 16-23 ms to
// allocate and write against 2.3-3.0 ms to write one kept; tools/bench-torch.py --issue-shape-only). A workspace
// whose storage nobody else holds (autograd let it go after backward) is handed out again;
// at most kPooledFree unused ones are kept, the least recently used dropped first, and the
// pool forgets its oldest entries past kPooled (a storage that Python code wrapped, with
// `untyped_storage()`, stays referenced by its wrapper and never looks unused again).
std::mutex poolMutex;
std::vector<Tensor> pool; // whole CPU byte tensors, most recently used last
constexpr size_t kPooledFree = 2, kPooled = 8;

Tensor cpuWorkspace(int64_t bytes, const at::TensorOptions &options) {
  std::lock_guard<std::mutex> lock(poolMutex);
  auto unused = [](const Tensor &t) { return t.storage().use_count() == 1; };
  Tensor ws; // a view of a pooled tensor: it holds the storage, so no other forward takes it
  for (size_t i = pool.size(); i-- > 0 && !ws.defined();)
    if (pool[i].numel() == bytes && unused(pool[i])) {
      ws = pool[i].narrow(0, 0, bytes);
      std::rotate(pool.begin() + static_cast<std::ptrdiff_t>(i), pool.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                  pool.end());
    }
  if (!ws.defined()) {
    pool.push_back(at::empty({bytes}, options));
    ws = pool.back().narrow(0, 0, bytes);
  }
  size_t free = 0;
  for (const Tensor &t : pool) free += unused(t);
  for (auto it = pool.begin(); it != pool.end() && free > kPooledFree;)
    if (unused(*it)) {
      it = pool.erase(it);
      --free;
    } else {
      ++it;
    }
  if (pool.size() > kPooled) pool.erase(pool.begin(), pool.end() - kPooled);
  return ws;
}

std::vector<Tensor> forwardKernel(int64_t model, const Tensor &params_, at::TensorList inputs, at::TensorList states,
                                  int64_t T, int64_t B, int64_t seed, const std::optional<Tensor> &lengths_,
                                  const std::optional<Tensor> &key) {
  const rnnc_model *m = lookup(model);
  checkArgs(m, params_, inputs, states, T, B);
  if (key && key->defined()) { // training, the seed a tensor (drawn inside a compiled graph)
    TORCH_CHECK(key->device().is_cpu() && key->scalar_type() == at::kLong && key->numel() == 1,
                m->name, ": key must be one int64 on the CPU, not ", key->scalar_type(), " ", key->sizes(), " on ",
                key->device());
    seed = key->item<int64_t>() & INT64_MAX;
  }
  Tensor lengths;
  if (lengths_ && lengths_->defined()) {
    TORCH_CHECK(m->has_lengths, m->name, " was compiled without --lengths: load it with rnnc.load(..., lengths=True)");
    TORCH_CHECK(lengths_->device().is_cpu() && lengths_->scalar_type() == at::kInt && lengths_->dim() == 1 &&
                    lengths_->size(0) == B,
                m->name, ": lengths must be int32 [B = ", B, "] on the CPU, not ", lengths_->scalar_type(), " ",
                lengths_->sizes(), " on ", lengths_->device());
    lengths = lengths_->contiguous();
  }
  auto real = params_.options().dtype(realType(m));
  Tensor params = params_.contiguous();
  int64_t wsBytes = m->workspace_bytes(T, B);
  TORCH_CHECK(wsBytes > 0, m->name, ": no workspace for T=", T, ", B=", B, " (too large)");
  Tensor ws = params.is_cpu() ? cpuWorkspace(wsBytes, params.options().dtype(at::kByte))
                               : at::empty({wsBytes}, params.options().dtype(at::kByte));
  std::vector<Tensor> result;
  result.reserve(m->n_outputs + m->n_states + 2);
  std::vector<void *> outs, finals;
  for (int k = 0; k < m->n_outputs; ++k) {
    result.push_back(at::empty({T, B, elements(m->outputs[k])}, real));
    outs.push_back(result.back().data_ptr());
  }
  for (int k = 0; k < m->n_states; ++k) {
    result.push_back(at::empty({m->states[k].depth, B, elements(m->states[k])}, real));
    finals.push_back(result.back().data_ptr());
  }
  Tensor loss = at::zeros({}, real);
  std::vector<Tensor> keep; // contiguous copies, alive through the call
  std::vector<const void *> ins = contiguousPointers(inputs, keep), sts = contiguousPointers(states, keep);
  // seed >= 0: training, dropout and zoneout draw their masks from it; -1: evaluation.
  const rnnc_run_options options{seed >= 0 ? 1 : 0, static_cast<uint64_t>(seed >= 0 ? seed : 0), 0,
                                 lengths.defined() ? lengths.data_ptr<int32_t>() : nullptr, 0};
  int rc = m->forward(ws.data_ptr(), T, B, params.data_ptr(), ins.data(), sts.empty() ? nullptr : sts.data(),
                      outs.data(), finals.data(), m->has_loss ? loss.data_ptr() : nullptr, &options,
                      streamOf(params.device()));
  TORCH_CHECK(rc == 0, m->name, ": ", m->last_error());
  result.push_back(loss);
  // The workspace leaves as a view of no elements on its storage: autograd keeps it alive, and
  // its bytes (backward's part uninitialized, then backward's scratch) are no visible result.
  result.push_back(ws.narrow(0, 0, 0));
  return result;
}

// The whole workspace behind the 0-element view forward returned.
Tensor fullWorkspace(const Tensor &view) {
  return at::empty({0}, view.options()).set_(view.storage(), 0, {(int64_t)view.storage().nbytes()}, {1});
}

// One ABI backward: the gradient of loss + sum <y, seed> + sum <s_final, state seed>, the
// seeds scaled by `scale`. In place in the workspace `ws_` (whole), or on a copy if keepWs.
// `wanted` (one per input; empty: every one) says which inputs' gradients to compute: the
// others get no array, and the generated code skips their products (docs/runtime.md).
std::vector<Tensor> backwardOnce(const rnnc_model *m, const Tensor &ws_, const Tensor &params,
                                 const std::vector<const void *> &inputs, const std::vector<Tensor> &seeds,
                                 const std::vector<Tensor> &stateSeeds, double scale, int64_t T, int64_t B,
                                 bool keepWs, const std::vector<bool> &wanted) {
  auto real = params.options().dtype(realType(m));
  std::vector<Tensor> result;
  result.push_back(at::empty({m->param_elements}, real));
  std::vector<const void *> sd, ss;
  std::vector<void *> ig, sg;
  std::vector<Tensor> keep;
  for (const Tensor &s : seeds) {
    keep.push_back(s.defined() && scale != 1 ? s * scale : s);
    sd.push_back(ptrOrNull(keep.back()));
  }
  for (const Tensor &s : stateSeeds) {
    keep.push_back(s.defined() && scale != 1 ? s * scale : s);
    ss.push_back(ptrOrNull(keep.back()));
  }
  for (int k = 0; k < m->n_inputs; ++k) {
    bool reached = false;
    for (int j = 0; j < m->n_input_grads; ++j)
      reached |= std::string(m->input_grads[j].name) == m->inputs[k].name;
    reached &= wanted.empty() || wanted[k];
    result.push_back(reached ? at::empty({T, B, elements(m->inputs[k])}, real) : at::empty({0}, real));
    ig.push_back(ptrOrNull(result.back()));
  }
  for (int k = 0; k < m->n_states; ++k) {
    result.push_back(at::empty({m->states[k].depth, B, elements(m->states[k])}, real));
    sg.push_back(result.back().data_ptr());
  }
  Tensor ws = keepWs ? ws_.clone() : ws_;
  int rc = m->backward(ws.data_ptr(), T, B, params.data_ptr(), inputs.data(), sd.data(), ss.data(),
                       result[0].data_ptr(), ig.data(), sg.data(), streamOf(params.device()));
  TORCH_CHECK(rc == 0, m->name, ": ", m->last_error());
  return result;
}

// The ABI's backward writes its scratch into the workspace. The op (inPlace false) runs it on
// a copy, so that the op is functional and backward may run again through one forward
// (retain_graph, gradcheck, a compiled backward); the autograd node's first eager backward
// runs it in place (inPlace true), and a later one on a workspace it runs forward for again.
std::vector<Tensor> backwardImpl(int64_t model, const Tensor &wsView, const Tensor &params_, at::TensorList inputs,
                                 at::TensorList outputGrads, at::TensorList stateGrads, const Tensor &lossGrad,
                                 int64_t T, int64_t B, bool inPlace, const std::vector<bool> &wanted = {}) {
  const rnnc_model *m = lookup(model);
  TORCH_CHECK(m->has_backward, m->name, ": this is a forward-only build; it has no backward");
  auto dt = realType(m);
  Tensor params = params_.contiguous();
  TORCH_CHECK(params.scalar_type() == dt && params.numel() == m->param_elements, m->name, ": params must be ",
              m->param_elements, " ", dt, " elements");
  // The workspace: forward's 0-element view on it, or the whole of it (opcheck passes copies).
  int64_t wsBytes = m->workspace_bytes(T, B);
  bool view = wsView.numel() == 0;
  TORCH_CHECK(wsView.scalar_type() == at::kByte && wsView.device() == params.device() &&
                  (view ? wsView.storage_offset() == 0 && (int64_t)wsView.storage().nbytes() == wsBytes
                        : wsView.numel() == wsBytes && wsView.is_contiguous()),
              m->name, ": the workspace is not one of this model's for T=", T, ", B=", B);
  Tensor ws = view ? fullWorkspace(wsView) : wsView;
  bool keepWs = !inPlace;
  // Forward's inputs again: the bundle reads some of them in place (ABI 7).
  checkInputs(m, params, inputs, T, B);
  std::vector<Tensor> inputsKept; // contiguous copies, alive through the calls
  std::vector<const void *> ins = contiguousPointers(inputs, inputsKept);
  TORCH_CHECK((int64_t)outputGrads.size() == m->n_outputs && (int64_t)stateGrads.size() == m->n_states, m->name,
              ": backward takes one gradient per output and per state (empty for none)");
  // Seeds in the table's order, from the gradients by output name.
  std::vector<Tensor> seeds(m->n_seeds);
  for (int k = 0; k < m->n_outputs; ++k) {
    const Tensor &g = outputGrads[k];
    if (!g.defined() || !g.numel()) continue;
    int j = 0;
    while (j < m->n_seeds && std::string(m->seeds[j].name) != m->outputs[k].name) ++j;
    if (j == m->n_seeds) {
      if (g.any().item<bool>())
        throw c10::NotImplementedError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                       std::string("output '") + m->outputs[k].name + "' of " + m->name +
                                           " has a gradient, but the compiled objective does not reach it");
      continue;
    }
    TORCH_CHECK(g.numel() == T * B * elements(m->outputs[k]) && g.device() == params.device(), m->name,
                ": the gradient of output '", m->outputs[k].name, "' has the wrong shape or device");
    seeds[j] = g.to(dt).contiguous();
  }
  std::vector<Tensor> stateSeeds(m->n_states);
  bool anySeed = false;
  for (const Tensor &s : seeds) anySeed |= s.defined();
  for (int k = 0; k < m->n_states; ++k) {
    const Tensor &g = stateGrads[k];
    if (!g.defined() || !g.numel()) continue;
    TORCH_CHECK(m->has_state_seeds, m->name, " was compiled without final-state seeds");
    TORCH_CHECK(g.numel() == m->states[k].depth * B * elements(m->states[k]) && g.device() == params.device(),
                m->name, ": the gradient of final state '", m->states[k].name, "' has the wrong shape or device");
    stateSeeds[k] = g.to(dt).contiguous();
    anySeed = true;
  }
  if (!m->has_loss) return backwardOnce(m, ws, params, ins, seeds, stateSeeds, 1, T, B, keepWs, wanted);
  double g = lossGrad.defined() && lossGrad.numel() ? lossGrad.item<double>() : 0.0;
  if (g == 1.0) return backwardOnce(m, ws, params, ins, seeds, stateSeeds, 1, T, B, keepWs, wanted);
  if (!anySeed) {
    auto r = backwardOnce(m, ws, params, ins, seeds, stateSeeds, 1, T, B, keepWs, wanted);
    for (Tensor &t : r) t.mul_(g);
    return r;
  }
  // The ABI's objective is loss + <seeds>: b(s) = dL + J's and b(2s) = dL + 2 J's,
  // so g dL + J's = g (2 b(s) - b(2s)) + b(2s) - b(s).
  auto b1 = backwardOnce(m, ws, params, ins, seeds, stateSeeds, 1, T, B, true, wanted);
  auto b2 = backwardOnce(m, ws, params, ins, seeds, stateSeeds, 2, T, B, keepWs, wanted);
  for (size_t i = 0; i < b1.size(); ++i) b1[i] = g * (2 * b1[i] - b2[i]) + (b2[i] - b1[i]);
  return b1;
}

using Mask = std::optional<c10::List<bool>>; // the op's input_grads_mask

std::vector<bool> wantedOf(const Mask &mask, size_t inputs) {
  if (!mask) return {};
  TORCH_CHECK(mask->size() == inputs, "rnnc::backward: input_grads_mask has ", mask->size(), " entries for ", inputs,
              " inputs");
  return std::vector<bool>(mask->begin(), mask->end());
}

Mask maskOf(const std::vector<bool> &wanted) {
  c10::List<bool> mask;
  for (bool w : wanted) mask.push_back(w);
  return mask;
}

std::vector<Tensor> backwardKernel(int64_t model, const Tensor &ws, const Tensor &params, at::TensorList inputs,
                                   at::TensorList outputGrads, at::TensorList stateGrads, const Tensor &lossGrad,
                                   int64_t T, int64_t B, const Mask &mask) {
  return backwardImpl(model, ws, params, inputs, outputGrads, stateGrads, lossGrad, T, B, false,
                      wantedOf(mask, inputs.size()));
}

// A tensor with real storage on the CPU or CUDA, not a fake, functional or traced one.
bool plain(const Tensor &t) {
  static const c10::DispatchKeySet traced({c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
                                           c10::DispatchKey::PythonTLSSnapshot});
  return t.defined() && (t.is_cpu() || t.is_cuda()) && !(t.key_set() & traced).raw_repr() &&
         !(c10::impl::tls_local_dispatch_key_set().included_ & traced).raw_repr();
}

c10::OperatorHandle op(const char *name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

std::vector<Tensor> callForward(int64_t model, const Tensor &params, at::TensorList inputs, at::TensorList states,
                                int64_t T, int64_t B, int64_t seed, const std::optional<Tensor> &lengths,
                                const std::optional<Tensor> &key) {
  static auto handle = op("rnnc::forward")
                           .typed<std::vector<Tensor>(int64_t, const Tensor &, at::TensorList, at::TensorList,
                                                      int64_t, int64_t, int64_t, const std::optional<Tensor> &,
                                                      const std::optional<Tensor> &)>();
  return handle.call(model, params, inputs, states, T, B, seed, lengths, key);
}

std::vector<Tensor> callBackward(int64_t model, const Tensor &ws, const Tensor &params, at::TensorList inputs,
                                 at::TensorList outputGrads, at::TensorList stateGrads, const Tensor &lossGrad,
                                 int64_t T, int64_t B, const Mask &mask) {
  static auto handle = op("rnnc::backward")
                           .typed<std::vector<Tensor>(int64_t, const Tensor &, const Tensor &, at::TensorList,
                                                      at::TensorList, at::TensorList, const Tensor &, int64_t,
                                                      int64_t, const Mask &)>();
  return handle.call(model, ws, params, inputs, outputGrads, stateGrads, lossGrad, T, B, mask);
}

class Forward : public torch::autograd::Function<Forward> {
public:
  static variable_list forward(AutogradContext *ctx, int64_t model, const Tensor &params, at::TensorList inputs,
                               at::TensorList states, int64_t T, int64_t B, int64_t seed,
                               const std::optional<Tensor> &lengths, const std::optional<Tensor> &key) {
    std::vector<Tensor> res;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      res = callForward(model, params, inputs, states, T, B, seed, lengths, key);
    }
    ctx->saved_data["model"] = model;
    ctx->saved_data["seed"] = seed; // a forward run again draws the same masks
    if (lengths && lengths->defined()) ctx->saved_data["lengths"] = *lengths;
    if (key && key->defined()) ctx->saved_data["key"] = key->clone(); // the caller may reuse its tensor
    ctx->saved_data["T"] = T;
    ctx->saved_data["B"] = B;
    ctx->saved_data["n_inputs"] = (int64_t)inputs.size();
    ctx->saved_data["n_states"] = (int64_t)states.size();
    // The first eager backward runs in place in the workspace; a later one through this forward
    // (retain_graph, gradcheck) runs the forward again from the saved params, inputs and states
    // (autograd's version counters guard them).
    ctx->saved_data["used"] = false;
    variable_list saved{res.back(), params};
    saved.insert(saved.end(), inputs.begin(), inputs.end());
    saved.insert(saved.end(), states.begin(), states.end());
    ctx->save_for_backward(saved);
    ctx->mark_non_differentiable({res.back()});
    return res;
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    Tensor ws = saved[0];
    const Tensor &params = saved[1];
    int64_t model = ctx->saved_data["model"].toInt(), T = ctx->saved_data["T"].toInt(),
            B = ctx->saved_data["B"].toInt(), nIn = ctx->saved_data["n_inputs"].toInt(),
            nSt = ctx->saved_data["n_states"].toInt();
    const rnnc_model *m = lookup(model);
    // In place: eager, real tensors, no graph of this backward to record (else the op, on a copy).
    bool inPlace = !at::GradMode::is_enabled() && plain(ws) && plain(params);
    std::vector<Tensor> ins(saved.begin() + 2, saved.begin() + 2 + nIn);
    if (inPlace && ctx->saved_data["used"].toBool()) {
      at::AutoDispatchBelowADInplaceOrView guard;
      std::vector<Tensor> sts(saved.begin() + 2 + nIn, saved.end());
      std::optional<Tensor> lengths, key;
      if (ctx->saved_data.count("lengths")) lengths = ctx->saved_data["lengths"].toTensor();
      if (ctx->saved_data.count("key")) key = ctx->saved_data["key"].toTensor();
      ws = callForward(model, params, ins, sts, T, B, ctx->saved_data["seed"].toInt(), lengths, key).back();
    }
    if (inPlace) ctx->saved_data["used"] = true;
    Tensor empty = at::empty({0}, params.options());
    std::vector<Tensor> og, sg;
    for (int k = 0; k < m->n_outputs; ++k) og.push_back(grads[k].defined() ? grads[k] : empty);
    for (int k = 0; k < m->n_states; ++k)
      sg.push_back(grads[m->n_outputs + k].defined() ? grads[m->n_outputs + k] : empty);
    const Tensor &lg = grads[m->n_outputs + m->n_states];
    // An input that does not require grad (a batch of data) gets no gradient: its product is skipped.
    std::vector<bool> wanted;
    for (const Tensor &x : ins) wanted.push_back(x.requires_grad());
    auto res = inPlace ? backwardImpl(model, ws, params, ins, og, sg, lg.defined() ? lg : empty, T, B, true, wanted)
                       : callBackward(model, ws, params, ins, og, sg, lg.defined() ? lg : empty, T, B,
                                      maskOf(wanted));
    variable_list out;
    out.reserve(2 + nIn + nSt + 3);
    out.emplace_back(); // model
    out.push_back(res[0]);
    for (int64_t k = 0; k < nIn; ++k) out.push_back(res[1 + k].numel() ? res[1 + k] : Tensor());
    for (int64_t k = 0; k < nSt; ++k) out.push_back(res[1 + nIn + k]);
    out.emplace_back(); // T
    out.emplace_back(); // B
    out.emplace_back(); // seed
    out.emplace_back(); // lengths
    out.emplace_back(); // key
    return out;
  }
};

class Backward : public torch::autograd::Function<Backward> {
public:
  static variable_list forward(AutogradContext *, int64_t model, const Tensor &ws, const Tensor &params,
                               at::TensorList inputs, at::TensorList outputGrads, at::TensorList stateGrads,
                               const Tensor &lossGrad, int64_t T, int64_t B, const Mask &mask) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return callBackward(model, ws, params, inputs, outputGrads, stateGrads, lossGrad, T, B, mask);
  }
  static variable_list backward(AutogradContext *, variable_list) {
    TORCH_CHECK(false, "rnnc: a gradient of a gradient (double backward) through a compiled cell is not supported: "
                       "the generated code computes first derivatives only");
  }
};

std::vector<Tensor> forwardAutograd(int64_t model, const Tensor &params, at::TensorList inputs, at::TensorList states,
                                    int64_t T, int64_t B, int64_t seed, const std::optional<Tensor> &lengths,
                                    const std::optional<Tensor> &key) {
  return Forward::apply(model, params, inputs, states, T, B, seed, lengths, key);
}

std::vector<Tensor> backwardAutograd(int64_t model, const Tensor &ws, const Tensor &params, at::TensorList inputs,
                                     at::TensorList outputGrads, at::TensorList stateGrads, const Tensor &lossGrad,
                                     int64_t T, int64_t B, const Mask &mask) {
  if (!at::GradMode::is_enabled()) { // the usual backward (no create_graph): no node to record
    at::AutoDispatchBelowADInplaceOrView guard;
    return callBackward(model, ws, params, inputs, outputGrads, stateGrads, lossGrad, T, B, mask);
  }
  return Backward::apply(model, ws, params, inputs, outputGrads, stateGrads, lossGrad, T, B, mask);
}

} // namespace

TORCH_LIBRARY(rnnc, m) {
  m.def("register_model(int model) -> ()", &registerModel);
  m.def("forward(int model, Tensor params, Tensor[] inputs, Tensor[] states, int T, int B, int seed=-1, "
        "Tensor? lengths=None, Tensor? key=None) -> Tensor[]");
  m.def("backward(int model, Tensor ws, Tensor params, Tensor[] inputs, Tensor[] output_grads, Tensor[] state_grads, "
        "Tensor loss_grad, int T, int B, bool[]? input_grads_mask=None) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(rnnc, CPU, m) {
  m.impl("forward", &forwardKernel);
  m.impl("backward", &backwardKernel);
}

TORCH_LIBRARY_IMPL(rnnc, CUDA, m) {
  m.impl("forward", &forwardKernel);
  m.impl("backward", &backwardKernel);
}

TORCH_LIBRARY_IMPL(rnnc, Autograd, m) {
  m.impl("forward", &forwardAutograd);
  m.impl("backward", &backwardAutograd);
}
