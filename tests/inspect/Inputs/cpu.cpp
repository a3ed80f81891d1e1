// CPU kernels (static void NAME(const Workspace &, ...)): one never called, one
// with no equation; BLAS calls are listed, with no status to check.
// EXPECT: 23 never-launched
// EXPECT: 26 no-equation
#include "rnnc/cpu.h"

namespace {

struct Workspace {
  float *a;
};

// gemm_0: a GEMM
//   toy.rnn:3  y = W @ x
static void gemm_0(const Workspace &ws, const float *P) { rnnc::cpu::gemm(false, true, 1, 2, 3, ws.a, P, ws.a, 0.0f); }

// fused_1: called from a loop
//   toy.rnn:4  z = tanh(y)
static void fused_1(const Workspace &ws) { ws.a[0] = 1; }

// fused_2: never called
//   toy.rnn:5  w = z
static void fused_2(const Workspace &ws) { ws.a[0] = 2; }

// fused_3: no equation named
static void fused_3(const Workspace &ws) { ws.a[0] = 3; }

// Not a kernel: no Workspace.
static void helper(float *a) { cblas_sscal(1, 2.0f, a, 1); }

int forward(float *a, const float *P) {
  Workspace ws{a};
  gemm_0(ws, P);
  for (int t = 0; t < 3; ++t) fused_1(ws);
  fused_3(ws);
  helper(a);
  return 0;
}

} // namespace
