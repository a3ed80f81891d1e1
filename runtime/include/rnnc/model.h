/* The C ABI of a compiled model: what a bundle's <model>.cpp exports and what
 * the runtime (the training loop, `rnnc run/train/bench`) drives. One
 * `rnnc_model` describes the model's tensors and points at its entry points;
 * the compiled code keeps nothing between calls except in the workspace the
 * caller allocates, so one model can run several workspaces at once.
 *
 * Arrays are flat, row-major, time-major: per-step values [T][B][width], index
 * inputs [T][B] int32, states [depth][B][width] (the `depth` steps before the
 * first), params in one flat array laid out as the param table says. Reals are
 * float, or double when the bundle was compiled with RNNC_REAL_DOUBLE, or
 * 16-bit bfloat16 or IEEE half when compiled with --dtype bf16|f16 (dtype
 * and real_bytes say which). See docs/runtime.md and docs/precision.md. */
#ifndef RNNC_MODEL_H
#define RNNC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RNNC_ABI_VERSION 7

/* The element type of a model's real arrays (rnnc_model.dtype): params,
 * inputs, outputs, states, seeds, gradients and the loss. A 16-bit model
 * computes in float; its arrays hold the upper half of a float (bf16) or an
 * IEEE binary16 (f16). */
#define RNNC_DTYPE_F32 0
#define RNNC_DTYPE_F64 1
#define RNNC_DTYPE_BF16 2
#define RNNC_DTYPE_F16 3

/* Where a model's arrays live (rnnc_model.device). */
#define RNNC_DEVICE_CPU 0
#define RNNC_DEVICE_CUDA 1

/* rnnc_model.device_copy's directions. */
#define RNNC_COPY_TO_DEVICE 0
#define RNNC_COPY_TO_HOST 1
#define RNNC_COPY_ON_DEVICE 2

/* A param, a port or a state. */
typedef struct rnnc_tensor {
  const char *name;   /* "h1.W_ih", "x", "h1.c" */
  int32_t rank;       /* params: 1 or 2; ports and states: 1 */
  int64_t shape[2];   /* params: their shape; ports and states: shape[0] = width */
  int64_t offset;     /* params: first element in the flat param array */
  int32_t is_index;   /* inputs: an index input, values in [0, shape[0]) */
  int32_t depth;      /* states: steps before the first that it reads (k of h[t-k]) */
  int32_t init_normal; /* params: drawn from N(0, init_scale^2), else U(-init_scale, init_scale) */
  double init_scale;   /* params: 0 when the bundle does not say (runtime/include/rnnc/init.h) */
} rnnc_tensor;

/* How one forward call runs (NULL: evaluation, seed 0). */
typedef struct rnnc_run_options {
  int32_t train;  /* 1: training: dropout and zoneout draw random masks; 0: evaluation (their expectations) */
  uint64_t seed;  /* the masks' key, with `call` (docs/language.md#dropout-and-zoneout) */
  uint64_t call;  /* a counter the caller advances once per training call, so each call draws new masks */
  /* [B], host memory, read before forward returns: the steps each sequence
   * runs, 1..T (NULL: all T). Only for models with has_lengths. */
  const int32_t *lengths;
  /* What backward multiplies the loss by (0: 1): a training loop's loss
   * scaling for 16-bit storage (docs/precision.md), whose gradients it
   * divides by it again. Finite and not negative. */
  double loss_scale;
} rnnc_run_options;

typedef struct rnnc_model {
  int32_t abi_version; /* RNNC_ABI_VERSION */
  const char *name;    /* the model or cell compiled */
  const char *source_hash; /* hash of the generated source: checkpoints name it */
  int32_t real_bytes;  /* 4 (float), 8 (double) or 2 (bf16, f16) */
  int32_t dtype;       /* RNNC_DTYPE_*: which of them */

  int64_t param_elements; /* size of the flat param (and gradient) array */
  int32_t n_params;
  const rnnc_tensor *params;
  int32_t n_inputs;
  const rnnc_tensor *inputs;
  int32_t n_outputs;
  const rnnc_tensor *outputs;
  int32_t n_states;
  const rnnc_tensor *states;
  int32_t has_loss;

  /* Backward: dL/dy for these outputs (the objective compiled), the gradients
   * of these inputs (dense inputs the objective reaches). */
  int32_t n_seeds;
  const rnnc_tensor *seeds;
  int32_t n_input_grads;
  const rnnc_tensor *input_grads;
  /* 1: backward reads state_seeds, dL/d(final state) (bundles compile them;
   * `rnnc train` compiles params-only gradients, which do not). */
  int32_t has_state_seeds;
  /* 0: a forward-only build (`rnnc compile --forward-only`): its workspace
   * keeps nothing for backward, and backward fails. */
  int32_t has_backward;
  /* 1: the model draws random masks (dropout, zoneout), so forward's options
   * (train or eval, seed) change its results. */
  int32_t has_masks;
  /* 1: compiled with --lengths: forward takes options->lengths (sequence b
   * runs steps 0..lengths[b]-1; its outputs are zero after, its final state
   * is the state after its last step, the loss a mean over valid steps). */
  int32_t has_lengths;

  /* Bytes of workspace for T steps of B sequences (0: too large). */
  int64_t (*workspace_bytes)(int64_t T, int64_t B);

  /* Runs T steps of B sequences on `stream` (see below). inputs[k] is
   * [T][B][w] real or [T][B] int32; states[k] is [depth][B][w] or NULL for
   * zeros (states may be NULL). Keeps in `ws` what backward reads but the
   * inputs, which backward is given again (the CPU reads some in place, so
   * no output may overlap them). Where not
   * NULL, writes output k to outputs[k] ([T][B][w]), state k's last `depth`
   * steps to final_states[k] ([depth][B][w]) and the loss (one real: the mean
   * over steps and sequences) to *loss. `options` (NULL: evaluation) says
   * train or eval and the masks' seed; backward on the same workspace draws
   * the same masks. Returns 0, or 1 with the reason in last_error (an index
   * out of range, a failed CUDA call). */
  int (*forward)(void *ws, int64_t T, int64_t B, const void *params, const void *const *inputs,
                 const void *const *states, void *const *outputs, void *const *final_states, void *loss,
                 const rnnc_run_options *options, void *stream);

  /* After forward on the same workspace, given the same `inputs` (the
   * arrays themselves, unchanged since; never NULL): the gradient of the objective
   * (the loss, a mean over steps and sequences, plus sum <y, dy> over the
   * seeded outputs, plus <s_final, ds> over the seeded final states).
   * seeds[k] ([T][B][w]) and state_seeds[k] ([depth][B][w], indexed as
   * `states`) may be NULL for zero, and so may either array. Writes
   * param_grads (flat, overwritten), and input_grads[k] / state_grads[k]
   * where not NULL ([T][B][w] and [depth][B][w], the initial states').
   * No array may overlap another, params or ws: the CPU reads some inputs
   * and seeds and writes some input gradients in place while backward runs.
   * Overwrites the backward part of `ws`, so a second backward needs a
   * second forward (or a copy of ws made before the first). Returns 0, or 1
   * with the reason in last_error. */
  int (*backward)(void *ws, int64_t T, int64_t B, const void *params, const void *const *inputs,
                  const void *const *seeds, const void *const *state_seeds, void *param_grads,
                  void *const *input_grads, void *const *state_grads, void *stream);

  /* Results of the last forward, for callers that did not ask forward for
   * them: output k [T][B][w], state k's last `depth` steps [depth][B][w],
   * the loss (mean over steps and sequences; 0 without; waits for `stream`). */
  void (*read_output)(const void *ws, int64_t T, int64_t B, int32_t k, void *out, void *stream);
  void (*read_final_state)(const void *ws, int64_t T, int64_t B, int32_t k, void *out, void *stream);
  double (*read_loss)(const void *ws, int64_t T, int64_t B, void *stream);

  /* The reason the last call failed, in this thread. */
  const char *(*last_error)(void);

  /* RNNC_DEVICE_CPU: every pointer above is host memory, `stream` is
   * ignored and the calls return when done.
   * RNNC_DEVICE_CUDA: ws, params, inputs, states, outputs, seeds, gradients,
   * the loss and the `out` of the readers are device memory; ws and params
   * 16-byte aligned (as cudaMalloc and torch's allocator return them;
   * forward and backward check it).
   * `stream` is the caller's cudaStream_t (NULL: the legacy default
   * stream): forward and backward queue their work on it, and the streams a
   * bundle forks for independent stages wait on it and join back into it
   * with events; nothing synchronizes the device or the host (except an
   * index check, which reads the indices back, and read_loss). The cuBLAS
   * handles are bound to the stream at each call. Streams, events and
   * handles are per thread, so distinct workspaces may run from distinct
   * threads at once. synchronize(stream) waits for the stream. The
   * device_* calls give CUDA memory for such a model (null on the CPU):
   * alloc returns null on failure, copy (RNNC_COPY_*; synchronizes the
   * device first, so it follows all queued work on any stream) returns
   * 0 or 1 with the reason in last_error. */
  int32_t device;
  int (*synchronize)(void *stream);
  void *(*device_alloc)(int64_t bytes);
  void (*device_free)(void *p);
  int (*device_copy)(void *dst, const void *src, int64_t bytes, int32_t direction);
} rnnc_model;

#ifdef __cplusplus
}

namespace rnnc::rt {

/// The elements of tensor `t`: the product of its shape's first `rank` dims
/// (a port's or state's width per step and sequence).
inline int64_t tensorElements(const rnnc_tensor &t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

} // namespace rnnc::rt
#endif

#endif
