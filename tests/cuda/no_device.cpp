// The C ABI of a CUDA --jit bundle (samples/lstm.rnn, compiled at build time)
// in a program linked with cudart, cublas, cublasLt and nvrtc only (never the driver
// stub libcuda), so it starts on a machine with no GPU and no driver.
//
// No GPU (cudaGetDeviceCount fails or finds 0): device_alloc returns null,
// forward, backward and synchronize return 1 and last_error() says "no CUDA
// device", every time they are called; exit 0 when all of that holds.
//
// A GPU: forward and backward of T = 3 steps of B = 2 sequences, the output
// and the final states against a plain loop on the host, the gradients finite
// and not all zero; exit 0 when they are.
#include "LSTM.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

int failures = 0;

void expect(bool good, const std::string &what) {
  if (good) return;
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  ++failures;
}

bool says(const rnnc_model &m, const char *text) {
  const char *e = m.last_error();
  return e && std::strstr(e, text) != nullptr;
}

/// No GPU: every entry point that needs the device fails with "no CUDA device".
void noDevice(const rnnc_model &m, int64_t T, int64_t B) {
  void *ws = m.device_alloc(m.workspace_bytes(T, B));
  expect(ws == nullptr, "device_alloc returns null with no GPU");
  std::printf("device_alloc: %s (%s)\n", ws ? "memory" : "null", m.last_error());
  // forward and backward say so before they touch a pointer; the inputs,
  // states and seeds arrays are real arrays of nulls all the same.
  const void *inputs[1] = {nullptr};
  const void *states[2] = {nullptr, nullptr};
  const void *seeds[1] = {nullptr};
  void *inputGrads[1] = {nullptr};
  void *stateGrads[2] = {nullptr, nullptr};
  for (int attempt = 0; attempt < 2; ++attempt) { // the answer is kept, not lost after the first call
    int rc = m.forward(ws, T, B, nullptr, inputs, states, nullptr, nullptr, nullptr, nullptr, nullptr);
    std::printf("forward: %d: %s\n", rc, m.last_error());
    expect(rc == 1, "forward returns 1 with no GPU");
    expect(says(m, "no CUDA device"), std::string("forward's last_error says \"no CUDA device\": ") + m.last_error());
    rc = m.backward(ws, T, B, nullptr, inputs, seeds, nullptr, nullptr, inputGrads, stateGrads, nullptr);
    expect(rc == 1, "backward returns 1 with no GPU");
    expect(says(m, "no CUDA device"), std::string("backward's last_error says \"no CUDA device\": ") + m.last_error());
    rc = m.synchronize(nullptr);
    expect(rc == 1, "synchronize returns 1 with no GPU");
    expect(says(m, "no CUDA device"), std::string("synchronize's last_error says \"no CUDA device\": ") + m.last_error());
  }
  float host = 0;
  expect(m.device_copy(&host, &host, sizeof host, RNNC_COPY_ON_DEVICE) == 1, "device_copy returns 1 with no GPU");
  m.device_free(nullptr);
}

// A GPU: the bundle against a plain LSTM on the host.
#define CUDA_OK(call)                                                                                                  \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) {                                                                                           \
      std::fprintf(stderr, "FAILED: %s: %s\n", #call, cudaGetErrorString(e_));                                         \
      return 1;                                                                                                        \
    }                                                                                                                  \
  } while (0)

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

/// torch.nn.LSTM: gates i, f, g, o of W_ih x + b_ih + W_hh h + b_hh.
void hostLstm(const std::vector<float> &P, const std::vector<float> &x, int64_t T, int64_t B, int64_t I, int64_t H,
              std::vector<float> &h, std::vector<float> &cLast) {
  const int64_t G = 4 * H;
  const float *Wih = P.data() + LSTMModel::kParam_W_ih, *Whh = P.data() + LSTMModel::kParam_W_hh;
  const float *bih = P.data() + LSTMModel::kParam_b_ih, *bhh = P.data() + LSTMModel::kParam_b_hh;
  std::vector<float> hp(static_cast<size_t>(B * H), 0), cp(static_cast<size_t>(B * H), 0), a(static_cast<size_t>(G));
  h.assign(static_cast<size_t>(T * B * H), 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) {
      const float *xt = x.data() + (t * B + b) * I;
      for (int64_t r = 0; r < G; ++r) {
        double s = bih[r] + bhh[r];
        for (int64_t k = 0; k < I; ++k) s += double(Wih[r * I + k]) * xt[k];
        for (int64_t k = 0; k < H; ++k) s += double(Whh[r * H + k]) * hp[static_cast<size_t>(b * H + k)];
        a[static_cast<size_t>(r)] = static_cast<float>(s);
      }
      for (int64_t k = 0; k < H; ++k) {
        float i = sigmoidf(a[static_cast<size_t>(k)]), f = sigmoidf(a[static_cast<size_t>(H + k)]);
        float g = std::tanh(a[static_cast<size_t>(2 * H + k)]), o = sigmoidf(a[static_cast<size_t>(3 * H + k)]);
        float &c = cp[static_cast<size_t>(b * H + k)];
        c = f * c + i * g;
        h[static_cast<size_t>((t * B + b) * H + k)] = o * std::tanh(c);
      }
      for (int64_t k = 0; k < H; ++k) hp[static_cast<size_t>(b * H + k)] = h[static_cast<size_t>((t * B + b) * H + k)];
    }
  cLast = cp;
}

int withDevice(const rnnc_model &m, int64_t T, int64_t B) {
  const int64_t I = m.inputs[0].shape[0], H = m.outputs[0].shape[0];
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  std::vector<float> P(static_cast<size_t>(m.param_elements)), x(static_cast<size_t>(T * B * I));
  for (float &p : P) p = u(rng);
  for (float &v : x) v = 5 * u(rng);
  const size_t pBytes = P.size() * sizeof(float), xBytes = x.size() * sizeof(float);
  const size_t hBytes = static_cast<size_t>(T * B * H) * sizeof(float), sBytes = static_cast<size_t>(B * H) * sizeof(float);

  void *ws = m.device_alloc(m.workspace_bytes(T, B));
  void *dP = m.device_alloc(static_cast<int64_t>(pBytes)), *dG = m.device_alloc(static_cast<int64_t>(pBytes));
  void *dx = m.device_alloc(static_cast<int64_t>(xBytes)), *dxg = m.device_alloc(static_cast<int64_t>(xBytes));
  void *dh = m.device_alloc(static_cast<int64_t>(hBytes)), *dseed = m.device_alloc(static_cast<int64_t>(hBytes));
  void *dc = m.device_alloc(static_cast<int64_t>(sBytes));
  if (!ws || !dP || !dG || !dx || !dxg || !dh || !dseed || !dc) {
    std::fprintf(stderr, "FAILED: device_alloc: %s\n", m.last_error());
    return 1;
  }
  expect(m.device_copy(dP, P.data(), static_cast<int64_t>(pBytes), RNNC_COPY_TO_DEVICE) == 0, "device_copy params");
  expect(m.device_copy(dx, x.data(), static_cast<int64_t>(xBytes), RNNC_COPY_TO_DEVICE) == 0, "device_copy x");
  std::vector<float> ones(static_cast<size_t>(T * B * H), 1.0f);
  expect(m.device_copy(dseed, ones.data(), static_cast<int64_t>(hBytes), RNNC_COPY_TO_DEVICE) == 0, "device_copy seed");

  // On a stream of the caller's (ABI v3), forward writing h and c_n itself.
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const void *inputs[1] = {dx};
  void *outputs[1] = {dh};
  void *finals[2] = {dc, nullptr};
  if (m.forward(ws, T, B, dP, inputs, nullptr, outputs, finals, nullptr, nullptr, stream) != 0) {
    std::fprintf(stderr, "FAILED: forward: %s\n", m.last_error());
    return 1;
  }
  const void *seeds[1] = {dseed};
  void *inputGrads[1] = {dxg};
  if (m.backward(ws, T, B, dP, inputs, seeds, nullptr, dG, inputGrads, nullptr, stream) != 0) {
    std::fprintf(stderr, "FAILED: backward: %s\n", m.last_error());
    return 1;
  }
  if (m.synchronize(stream) != 0) {
    std::fprintf(stderr, "FAILED: synchronize: %s\n", m.last_error());
    return 1;
  }
  std::vector<float> h(static_cast<size_t>(T * B * H)), c(static_cast<size_t>(B * H)), G(P.size()), xg(x.size());
  CUDA_OK(cudaMemcpy(h.data(), dh, hBytes, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(c.data(), dc, sBytes, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(G.data(), dG, pBytes, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(xg.data(), dxg, xBytes, cudaMemcpyDeviceToHost));

  std::vector<float> hRef, cRef;
  hostLstm(P, x, T, B, I, H, hRef, cRef);
  double worst = 0;
  bool finite = true;
  for (size_t k = 0; k < h.size(); ++k) {
    finite &= std::isfinite(h[k]);
    worst = std::max(worst, std::fabs(double(h[k]) - hRef[k]));
  }
  for (size_t k = 0; k < c.size(); ++k) {
    finite &= std::isfinite(c[k]);
    worst = std::max(worst, std::fabs(double(c[k]) - cRef[k]));
  }
  std::printf("forward: max |GPU - host| = %.3g over h and the final c\n", worst);
  expect(finite, "the outputs are finite");
  expect(worst < 1e-4, "the outputs match the host loop to 1e-4");
  double gNorm = 0, xgNorm = 0;
  for (float g : G) finite &= std::isfinite(g), gNorm += double(g) * g;
  for (float g : xg) finite &= std::isfinite(g), xgNorm += double(g) * g;
  std::printf("backward: |dP| = %.6g, |dx| = %.6g\n", std::sqrt(gNorm), std::sqrt(xgNorm));
  expect(finite, "the gradients are finite");
  expect(gNorm > 0 && xgNorm > 0, "the gradients are not all zero");

  // Two threads at once, each with a workspace and a stream of its own (ABI
  // v3: contexts are per thread): each gets the outputs and gradient above
  // (to 1e-5: a race would give garbage, not rounding).
  auto worker = [&](int id, int &bad) {
    void *w = m.device_alloc(m.workspace_bytes(T, B)), *wh = m.device_alloc(static_cast<int64_t>(hBytes));
    void *wg = m.device_alloc(static_cast<int64_t>(pBytes));
    cudaStream_t s = nullptr;
    if (!w || !wh || !wg || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      bad = 1;
      return;
    }
    void *outs[1] = {wh};
    std::vector<float> h2(h.size()), G2(G.size());
    for (int round = 0; round < 20 && !bad; ++round) {
      if (m.forward(w, T, B, dP, inputs, nullptr, outs, nullptr, nullptr, nullptr, s) != 0 ||
          m.backward(w, T, B, dP, inputs, seeds, nullptr, wg, nullptr, nullptr, s) != 0 || m.synchronize(s) != 0) {
        std::fprintf(stderr, "thread %d: %s\n", id, m.last_error());
        bad = 1;
        break;
      }
      cudaMemcpy(h2.data(), wh, hBytes, cudaMemcpyDeviceToHost);
      cudaMemcpy(G2.data(), wg, pBytes, cudaMemcpyDeviceToHost);
      auto close = [](const std::vector<float> &a, const std::vector<float> &b) {
        double top = 1e-30, gap = 0;
        for (size_t k = 0; k < a.size(); ++k)
          top = std::max(top, std::fabs(double(a[k]))), gap = std::max(gap, std::fabs(double(a[k]) - b[k]));
        return gap <= 1e-5 * top;
      };
      bad = !close(h, h2) || !close(G, G2);
    }
    cudaStreamDestroy(s);
    for (void *p : {w, wh, wg}) m.device_free(p);
  };
  int bad1 = 0, bad2 = 0;
  std::thread t1(worker, 1, std::ref(bad1)), t2(worker, 2, std::ref(bad2));
  t1.join();
  t2.join();
  std::printf("two threads, 20 rounds each: %s\n", bad1 || bad2 ? "DIFFERENT" : "the same results (1e-5)");
  expect(!bad1 && !bad2, "two threads with their own workspaces and streams get the same results");
  for (void *p : {ws, dP, dG, dx, dxg, dh, dseed, dc}) m.device_free(p);
  return 0;
}

} // namespace

int main() {
  const rnnc_model &m = *rnnc_model_LSTM();
  expect(m.abi_version == RNNC_ABI_VERSION, "abi_version is RNNC_ABI_VERSION");
  expect(m.device == RNNC_DEVICE_CUDA, "device is RNNC_DEVICE_CUDA");
  expect(m.real_bytes == 4, "a float model");
  expect(m.synchronize && m.device_alloc && m.device_free && m.device_copy, "the device entry points are set");
  const int64_t T = 3, B = 2;
  expect(m.workspace_bytes(T, B) > 0, "workspace_bytes(3, 2) > 0");
  if (failures) return 1;

  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("no GPU here (cudaGetDeviceCount: %s): the ABI must say so\n",
                e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    noDevice(m, T, B);
  } else {
    std::printf("%d GPU(s): forward and backward of T = %lld, B = %lld\n", devices, static_cast<long long>(T),
                static_cast<long long>(B));
    if (withDevice(m, T, B)) ++failures;
  }
  std::printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
