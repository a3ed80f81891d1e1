// The host part of the CUDA target, around the kernels CudaPrinter prints.
// 1. Each kernel gets a host launcher (launch_<kernel>): a fused kernel's
//    grid and block, or the cuBLAS call of a library kernel.
// 2. Each stage is a function issuing its launches on one stream (a loop
//    stage steps t in its direction); forward and backward issue the stages
//    in schedule order on their streams, waiting on events for the stages
//    they need and for any earlier stage on another stream whose memory they
//    touch (buffers that share memory, the gradient array), then join every
//    stream back into stream 0. With --cuda-graphs a loop stage is captured
//    once per shape and pointers and replayed as one graph.
// 3. A .cu holds kernels and host code; --jit puts the kernels in a string
//    that rnnc/cuda_jit.h compiles with NVRTC on first use.
#include "codegen/Bundle.h"
#include "codegen/CudaPrinter.h"
#include "codegen/CudaScan.h"
#include "codegen/HostCode.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace rnnc::codegen {

namespace {

/// Which memory a stage reads and writes: buffers that share memory are one
/// root; kGradients stands for the param-gradient array.
struct Touches {
  std::set<int> reads, writes;
};
constexpr int kGradients = -2;

class CudaModulePrinter {
public:
  CudaModulePrinter(const Program &p, const SourceManager &sm, const CudaOptions &o) : p_(p), sm_(sm), o_(o) {}
  std::string print();

private:
  int root(int buffer) const {
    while (buffer >= 0 && p_.buffers[buffer].shares >= 0) buffer = p_.buffers[buffer].shares;
    return buffer;
  }
  Touches touches(const StageIR &s) const;
  std::vector<int> waitsOf(int stage) const;
  std::string launcher(const KernelIR &k, int index);
  std::string stageFunction(int stage);
  std::string issue(bool backward);
  std::string forward();
  std::string backward();
  std::string readers();
  std::string at(int buffer, int32_t delay) const {
    return fmt::format("ws.{} + {}", p_.buffers[buffer].name, CPrinter::rowOffset(p_.buffers[buffer], delay, "r0"));
  }

  const Program &p_;
  const SourceManager &sm_;
  CudaOptions o_;
  std::vector<int> kernelIndex_; // kernel -> its index in the table of __global__ functions
  std::vector<Touches> touches_; // per stage
};

HostCall checked() { return {"  RNNC_CUDA_CHECK(", ", s0));\n"}; }

Touches CudaModulePrinter::touches(const StageIR &s) const {
  Touches t;
  for (int ki : s.kernels) {
    const KernelIR &k = p_.kernels[ki];
    for (const Sweep &sw : k.sweeps)
      for (const Instr &in : sw.body) {
        if (in.store >= 0) t.writes.insert(root(in.store));
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) t.reads.insert(root(o.buffer));
      }
    if (k.a >= 0) t.reads.insert(root(k.a));
    if (k.b >= 0) t.reads.insert(root(k.b));
    bool grad = k.kind == KernelIR::Kind::GradMatrix || k.kind == KernelIR::Kind::GradVector ||
                k.kind == KernelIR::Kind::GradEmbed;
    if (grad) t.writes.insert(kGradients);
    else if (k.out >= 0) t.writes.insert(root(k.out));
  }
  return t;
}

/// The stages on other streams that `stage` waits for: those the schedule
/// says it needs, and the last earlier stage of each other stream that
/// writes what it touches or touches what it writes.
std::vector<int> CudaModulePrinter::waitsOf(int stage) const {
  const StageIR &s = p_.stages[stage];
  std::set<int> waits(s.waits.begin(), s.waits.end());
  const Touches &mine = touches_[stage];
  auto meets = [](const std::set<int> &a, const std::set<int> &b) {
    for (int x : a)
      if (b.count(x)) return true;
    return false;
  };
  std::set<int> streamsDone;
  for (int e = stage - 1; e >= 0; --e) {
    const StageIR &other = p_.stages[e];
    if (other.backward != s.backward || other.stream == s.stream || streamsDone.count(other.stream)) continue;
    const Touches &theirs = touches_[e];
    if (meets(theirs.writes, mine.reads) || meets(theirs.writes, mine.writes) || meets(theirs.reads, mine.writes)) {
      waits.insert(e);
      streamsDone.insert(other.stream); // earlier stages of that stream come before this one
    }
  }
  std::vector<int> out;
  for (int w : waits)
    if (p_.stages[w].stream != s.stream && p_.stages[w].backward == s.backward) out.push_back(w);
  return out;
}

std::string CudaModulePrinter::launcher(const KernelIR &k, int index) {
  std::string out = fmt::format("/// {}: {} on rows [r0, r1).\n", k.name,
                                k.kind == KernelIR::Kind::Fused ? "the kernel" : "a cuBLAS call");
  // A fused kernel's comment names its equations; a library call's is here.
  if (k.kind != KernelIR::Kind::Fused) out += CudaPrinter(p_, sm_).equationsComment(k);
  out += fmt::format("int launch_{}(const Workspace &ws, const real *P, real *G, int64_t B, int64_t r0, int64_t r1, "
                     "cudaStream_t s, cublasHandle_t blas) {{\n",
                     k.name);
  switch (k.kind) {
  case KernelIR::Kind::Fused: {
    int threads = CudaPrinter::threadsOf(k);
    std::string grid = CudaPrinter::isFlat(k) ? fmt::format("grid_for((r1 - r0) * {}, {})",
                                                            k.sweeps[0].width / CudaPrinter::elementsPerThread(k, p_), threads)
                                              : "grid_for(r1 - r0, 1)";
    out += "  (void)G, (void)blas;\n";
    out += fmt::format("  return launch(kernel_[{}], \"{}\", {}, {}, s, ws, P, B, r0, r1) ? 0 : 1;\n}}\n", index, k.name,
                       grid, threads);
    return out;
  }
  case KernelIR::Kind::Gemm:
    out += fmt::format("  // out[r] = W x[r], W = P[{}..] [{} x {}]\n  (void)G, (void)B, (void)s;\n", k.paramOffset, k.rows, k.cols);
    out += fmt::format("  RNNC_CUDA_CHECK(gemm(blas, false, true, r1 - r0, {}, {}, {}, P + {}, {}, real(0)));\n", k.rows,
                       k.cols, at(k.a, k.aDelay), k.paramOffset, at(k.out, 0));
    break;
  case KernelIR::Kind::GemmT:
    out += fmt::format("  // out[r] = W^T d[r], W = P[{}..] [{} x {}]\n  (void)G, (void)B, (void)s;\n", k.paramOffset, k.rows, k.cols);
    out += fmt::format("  RNNC_CUDA_CHECK(gemm(blas, false, false, r1 - r0, {}, {}, {}, P + {}, {}, real(0)));\n", k.cols,
                       k.rows, at(k.a, k.aDelay), k.paramOffset, at(k.out, 0));
    break;
  case KernelIR::Kind::GradMatrix:
    out += fmt::format("  // G[{}..] [{} x {}] += sum over rows of d[r] x[r]^T\n  (void)P, (void)B, (void)s;\n", k.paramOffset,
                       k.rows, k.cols);
    out += fmt::format("  RNNC_CUDA_CHECK(gemm(blas, true, false, {}, {}, r1 - r0, {}, {}, G + {}, real(1)));\n", k.rows,
                       k.cols, at(k.a, k.aDelay), at(k.b, k.bDelay), k.paramOffset);
    break;
  case KernelIR::Kind::GradVector:
    out += "  (void)P, (void)B, (void)s;\n";
    if (k.rows == 1) {
      out += fmt::format("  // G[{}] += every element of d\n", k.paramOffset);
      out += fmt::format("  RNNC_CUDA_CHECK(column_sums(blas, (r1 - r0) * {}, 1, {}, ws.ones, G + {}));\n", k.cols,
                         at(k.a, k.aDelay), k.paramOffset);
    } else {
      out += fmt::format("  // G[{}..{}] += sum over rows of d[r]\n", k.paramOffset, k.paramOffset + k.cols);
      out += fmt::format("  RNNC_CUDA_CHECK(column_sums(blas, r1 - r0, {}, {}, ws.ones, G + {}));\n", k.cols,
                         at(k.a, k.aDelay), k.paramOffset);
    }
    break;
  case KernelIR::Kind::GradEmbed:
    out += "  (void)P, (void)B, (void)blas;\n";
    out += fmt::format("  const real *d = {};\n  const int32_t *row = {};\n  real *g = G + {};\n", at(k.a, k.aDelay),
                       at(k.b, k.bDelay), k.paramOffset);
    out += fmt::format("  return launch(kernel_[1], \"grad_embed\", grid_for({}, 256), 256, s, d, row, g, r1 - r0, int64_t({})) ? 0 : 1;\n}}\n",
                       k.cols, k.cols);
    return out;
  }
  return out + "  return 0;\n}\n";
}

std::string CudaModulePrinter::stageFunction(int stage) {
  const StageIR &s = p_.stages[stage];
  if (CudaScanPrinter::runsInParallel(p_, stage)) return CudaScanPrinter(p_, sm_, stage).stageFunction();
  std::string out = fmt::format("/// Stage {}{}: {}.\n", stage, s.backward ? " (backward)" : "",
                                s.loop ? fmt::format("a loop over time, t = {}", s.direction > 0 ? "0 .. T-1" : "T-1 .. 0")
                                       : "every step at once");
  out += fmt::format("int stage_{}(const Workspace &ws, const real *P, real *G, int64_t T, int64_t B, cudaStream_t s, "
                     "cublasHandle_t blas) {{\n",
                     stage);
  std::string indent = "  ", rows = "0, T * B";
  if (s.loop) {
    out += s.direction > 0 ? "  for (int64_t t = 0; t < T; ++t) {\n" : "  for (int64_t t = T - 1; t >= 0; --t) {\n";
    indent = "    ";
    rows = "t * B, (t + 1) * B";
  }
  for (int k : s.kernels)
    out += fmt::format("{}if (launch_{}(ws, P, G, B, {}, s, blas)) return 1;\n", indent, p_.kernels[k].name, rows);
  if (s.loop) out += "  }\n";
  else out += "  (void)T;\n";
  return out + "  return 0;\n}\n";
}

/// The stages of one direction on their streams: forks from stream 0, the
/// waits, the events later stages need, and the join into stream 0.
std::string CudaModulePrinter::issue(bool backward) {
  std::vector<int> stages;
  for (size_t s = 0; s < p_.stages.size(); ++s)
    if (p_.stages[s].backward == backward) stages.push_back(static_cast<int>(s));
  std::set<int> streams, recorded;
  std::map<int, std::vector<int>> waits;
  for (int s : stages) {
    streams.insert(p_.stages[s].stream);
    waits[s] = waitsOf(s);
    recorded.insert(waits[s].begin(), waits[s].end());
  }
  int fork = static_cast<int>(p_.stages.size());
  std::string out;
  if (streams.size() > 1 || (streams.size() == 1 && !streams.count(0))) {
    out += "  // The other streams start after stream 0's copies.\n";
    out += fmt::format("  RNNC_CUDA_CHECK(cudaEventRecord(c.event({}), s0));\n", fork);
    for (int st : streams)
      if (st) out += fmt::format("  RNNC_CUDA_CHECK(cudaStreamWaitEvent(c.stream({}), c.event({}), 0));\n", st, fork);
  }
  for (int s : stages) {
    const StageIR &st = p_.stages[s];
    std::string after;
    for (int w : waits[s]) after += fmt::format("{}stage {} (stream {})", after.empty() ? "" : ", ", w, p_.stages[w].stream);
    out += fmt::format("  // Stage {} on stream {}{}.\n", s, st.stream, after.empty() ? "" : ", after " + after);
    for (int w : waits[s])
      out += fmt::format("  RNNC_CUDA_CHECK(cudaStreamWaitEvent(c.stream({}), c.event({}), 0));\n", st.stream, w);
    out += fmt::format("  if (run(stage_{}, {}, {}, ws, P, G, T, B, {}, mem)) return 1;\n", s, s, st.loop ? "true" : "false",
                       st.stream);
    if (recorded.count(s)) out += fmt::format("  RNNC_CUDA_CHECK(cudaEventRecord(c.event({}), c.stream({})));\n", s, st.stream);
  }
  bool joined = false;
  for (int st : streams)
    if (st) {
      if (!joined) out += "  // Stream 0 waits for the others.\n";
      joined = true;
      out += fmt::format("  RNNC_CUDA_CHECK(cudaEventRecord(c.event({}), c.stream({})));\n", fork + st, st);
      out += fmt::format("  RNNC_CUDA_CHECK(cudaStreamWaitEvent(s0, c.event({}), 0));\n", fork + st);
    }
  return out;
}

std::string CudaModulePrinter::forward() {
  std::string out = "int forward(void *mem, int64_t T, int64_t B, const void *params, const void *const *inputs,\n"
                    "            const void *const *states) {\n";
  out += "  if (!ready()) return 1;\n  Workspace ws;\n  if (!layout(T, B, mem, &ws)) return fail_too_large(T, B);\n";
  out += "  const real *P = static_cast<const real *>(params);\n  real *G = nullptr;\n";
  out += "  Context &c = context();\n  cudaStream_t s0 = c.stream(0);\n  (void)c, (void)s0;\n";
  for (size_t k = 0; k < p_.inputs.size(); ++k)
    if (p_.inputs[k].index)
      out += fmt::format("  if (check_device_indices(static_cast<const int32_t *>(inputs[{}]), T * B, {}, \"{}\")) return 1;\n", k,
                         p_.inputs[k].width, p_.inputs[k].name);
  out += "  // Padding: zeros, then the inputs and the initial states.\n" + paddingClears(p_, false, checked()) +
         inputCopies(p_, checked());
  out += issue(false);
  return out + "  (void)G;\n  return 0;\n}\n";
}

std::string CudaModulePrinter::backward() {
  std::string out = "int backward(void *mem, int64_t T, int64_t B, const void *params, const void *const *seeds,\n"
                    "             void *param_grads, void *const *input_grads, void *const *state_grads) {\n";
  out += "  if (!ready()) return 1;\n  Workspace ws;\n  if (!layout(T, B, mem, &ws)) return fail_too_large(T, B);\n";
  out += "  const real *P = static_cast<const real *>(params);\n  real *G = static_cast<real *>(param_grads);\n";
  out += "  Context &c = context();\n  cudaStream_t s0 = c.stream(0);\n  (void)c, (void)seeds, (void)input_grads, (void)state_grads;\n";
  out += fmt::format("  RNNC_CUDA_CHECK(cudaMemsetAsync(G, 0, {} * sizeof(real), s0));\n", p_.paramElements);
  if (int64_t w = p_.onesWidth)
    out += fmt::format("  if (!launch(kernel_[0], \"fill\", grid_for(T * B * {}, 256), 256, s0, ws.ones, T * B * {}, real(1))) return 1;\n",
                       w, w);
  out += paddingClears(p_, true, checked()) + seedCopies(p_, checked());
  out += issue(true);
  if (!p_.epilogue.empty()) out += "  // The initial states' gradients: the state adjoints at steps -depth .. -1.\n";
  for (int k : p_.epilogue)
    out += fmt::format("  if (launch_{}(ws, P, G, B, -{} * B, 0, s0, c.blas(0))) return 1;\n", p_.kernels[k].name,
                       p_.kernels[k].epilogueDepth);
  out += gradientReads(p_, checked(), [](const PortIR &g, const std::string &dst) {
    return fmt::format("  if (!launch(kernel_[0], \"fill\", grid_for({} * B * {}, 256), 256, s0, {}, {} * B * {}, {})) return 1;\n",
                       g.depth, g.width, dst, g.depth, g.width, CPrinter::literal(g.leaf.value));
  });
  return out + "  return 0;\n}\n";
}

std::string CudaModulePrinter::readers() {
  // The readers return nothing: a failure is left in last_error().
  const HostCall noted{"  ok(", ", s0), \"read_rows\");\n"};
  std::string out = "void read_output(const void *mem, int64_t T, int64_t B, int32_t k, void *out) {\n";
  out += "  Workspace ws;\n  if (!ready() || !layout(T, B, const_cast<void *>(mem), &ws)) return;\n";
  out += "  cudaStream_t s0 = context().stream(0);\n  switch (k) {\n";
  out += outputReadCases(p_, noted) + "  }\n}\n\n";
  out += "void read_final_state(const void *mem, int64_t T, int64_t B, int32_t k, void *out) {\n";
  out += "  Workspace ws;\n  if (!ready() || !layout(T, B, const_cast<void *>(mem), &ws)) return;\n";
  out += "  cudaStream_t s0 = context().stream(0);\n  switch (k) {\n";
  out += finalStateReadCases(p_, noted) + "  }\n}\n\n";
  out += "double read_loss(const void *mem, int64_t T, int64_t B) {\n";
  if (p_.lossBuffer >= 0) {
    const Buffer &b = p_.buffers[p_.lossBuffer];
    out += "  Workspace ws;\n  if (!ready() || !layout(T, B, const_cast<void *>(mem), &ws)) return NAN;\n";
    out += "  std::vector<real> loss(static_cast<size_t>(T * B));\n";
    out += fmt::format("  if (cudaMemcpy(loss.data(), ws.{} + {} * B, loss.size() * sizeof(real), cudaMemcpyDeviceToHost) != "
                       "cudaSuccess)\n    return NAN;\n",
                       b.name, b.padBefore);
    out += "  return mean_of(loss.data(), T * B);\n";
  } else {
    out += "  (void)mem, (void)T, (void)B;\n  return 0;\n";
  }
  return out + "}\n";
}

std::string CudaModulePrinter::print() {
  std::vector<std::string> names = cudaKernelNames(p_);
  kernelIndex_.assign(p_.kernels.size(), -1);
  for (size_t k = 0; k < p_.kernels.size(); ++k)
    for (size_t n = 0; n < names.size(); ++n)
      if (names[n] == p_.kernels[k].name) kernelIndex_[k] = static_cast<int>(n);
  int streams = 1;
  for (const StageIR &s : p_.stages) {
    streams = std::max(streams, s.stream + 1);
    touches_.push_back(touches(s));
  }
  int events = static_cast<int>(p_.stages.size()) + 1 + streams;

  std::string out = fmt::format("// {}: generated by rnnc {} for CUDA. Do not edit: change the .rnn and recompile.\n", p_.name,
                                RNNC_VERSION);
  if (o_.jit)
    out += "// Build: c++ -std=c++17 -O2 $(rnnc --print-cflags) -I$CUDA/include -c this file; link cudart, cublas, nvrtc.\n"
           "// The kernels are a string NVRTC compiles at first use for the GPU that is there.\n";
  else
    out += "// Build: nvcc -std=c++17 -arch=sm_90 $(rnnc --print-cflags) -c this file; link cudart and cublas.\n";
  out += "// Arrays are time-major and live on the device; see runtime/include/rnnc/model.h for the ABI.\n";
  out += o_.jit ? "#include \"rnnc/cuda_jit.h\"\n" : "#include \"rnnc/cuda.h\"\n";
  out += "#include \"rnnc/model.h\"\n\n#include <cmath>\n#include <cstdint>\n#include <mutex>\n#include <vector>\n\n";
  std::string kernels = printCudaKernels(p_, sm_);
  std::string onesTake;
  if (int64_t w = p_.onesWidth) onesTake = fmt::format("  ws->ones = c.take<real>(1, 0, {});\n", w);
  else onesTake = "  ws->ones = nullptr;\n";
  out += "namespace {\n\n";
  if (o_.jit) {
    out += "#ifdef RNNC_REAL_DOUBLE\nusing real = double;\nconst char kRealDefine[] = \"#define RNNC_REAL_DOUBLE\\n\";\n#else\n"
           "using real = float;\nconst char kRealDefine[] = \"\";\n#endif\n\n";
    out += "// The device code: what a .cu bundle of this model holds, compiled by NVRTC.\n";
    out += "const char kKernelSource[] = R\"rnnc_cuda(" + kernels + ")rnnc_cuda\";\n\n";
    out += workspaceStruct(p_, "  real *ones; // [T][B][n] ones: what the bias gradients' column sums multiply\n") + "\n";
  } else {
    out += kernels;
  }
  out += "using namespace rnnc::cuda;\n\n";
  out += workspaceLayout(p_, onesTake) + "\n";
  out += fmt::format("constexpr int kStreams = {}, kEvents = {};\nconstexpr bool kTf32 = {}, kCudaGraphs = {};\n\n", streams,
                     events, o_.tf32 ? "true" : "false", o_.cudaGraphs ? "true" : "false");
  out += fmt::format("/// The __global__ functions, indexed by the launchers.\nconst void *kernel_[{}]{};\n", names.size(),
                     o_.jit ? "" : " = {\n" + [&] {
                       std::string list;
                       for (const std::string &n : names) list += fmt::format("    reinterpret_cast<const void *>({}),\n", n);
                       return list;
                     }() + "}");
  std::string nameList;
  for (const std::string &n : names) nameList += fmt::format("\"{}\", ", n);
  out += fmt::format("const char *const kKernelNames[] = {{{}}};\n\n", nameList.substr(0, nameList.size() - 2));
  out += "Context &context() {\n  static Context c;\n  return c;\n}\n\n";
  out += "/// The streams, events and cuBLAS handles (and, --jit, the compiled kernels), once.\nbool ready() {\n";
  out += "  if (!context().ready(kStreams, kEvents, kTf32)) return false;\n";
  if (o_.jit) {
    out += "  static std::mutex mutex;\n  static int loaded = -1;\n  static std::string failure; // every later call reports it too\n";
    out += "  std::lock_guard<std::mutex> lock(mutex);\n";
    out += "  if (loaded < 0) {\n    std::string source = std::string(kRealDefine) + kKernelSource;\n";
    out += fmt::format("    loaded = load_kernels(source.c_str(), kKernelNames, {}, kernel_) == 0 ? 1 : 0;\n", names.size());
    out += "    if (!loaded) failure = \"loading the kernels: \" + last_error();\n  }\n";
    out += "  if (!loaded) last_error() = failure;\n  return loaded == 1;\n}\n\n";
  } else {
    out += "  (void)kKernelNames;\n  return true;\n}\n\n";
  }
  bool indexInputs = false;
  for (const PortIR &in : p_.inputs) indexInputs |= in.index;
  if (indexInputs) {
    out += "/// Index input x (device memory) checked on the host: every value in [0, range).\n";
    out += "int check_device_indices(const int32_t *x, int64_t n, int64_t range, const char *input) {\n";
    out += "  std::vector<int32_t> host(static_cast<size_t>(n));\n";
    out += "  RNNC_CUDA_CHECK(cudaMemcpy(host.data(), x, host.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));\n";
    out += "  return check_indices(host.data(), n, range, input) ? 0 : 1;\n}\n\n";
  }
  for (size_t k = 0; k < p_.kernels.size(); ++k) out += launcher(p_.kernels[k], kernelIndex_[k]) + "\n";
  for (size_t s = 0; s < p_.stages.size(); ++s)
    if (CudaScanPrinter::runsInParallel(p_, static_cast<int>(s)))
      out += CudaScanPrinter(p_, sm_, static_cast<int>(s)).launchers([&](const std::string &kernel) {
        return static_cast<int>(std::find(names.begin(), names.end(), kernel) - names.begin());
      });
  for (size_t s = 0; s < p_.stages.size(); ++s) out += stageFunction(static_cast<int>(s)) + "\n";
  out += "using StageFn = int (*)(const Workspace &, const real *, real *, int64_t, int64_t, cudaStream_t, cublasHandle_t);\n\n";
  out += "/// Stage `stage` on stream `s`; with --cuda-graphs a loop stage is replayed as a\n"
         "/// CUDA graph captured once per shape and pointers.\n";
  out += "int run(StageFn fn, int stage, bool loop, const Workspace &ws, const real *P, real *G, int64_t T, int64_t B, int s,\n"
         "        const void *mem) {\n";
  out += "  Context &c = context();\n  if (!kCudaGraphs || !loop) return fn(ws, P, G, T, B, c.stream(s), c.blas(s));\n";
  out += "  static GraphCache graphs;\n";
  out += "  std::vector<const void *> key = {mem, P, G, reinterpret_cast<const void *>(T), reinterpret_cast<const void *>(B)};\n";
  out += "  return run_captured(graphs, stage, key, c.stream(s), [&](cudaStream_t stream) { return fn(ws, P, G, T, B, stream, c.blas(s)); });\n}\n\n";
  out += forward() + "\n" + backward() + "\n" + readers() + "\n";
  out += "int synchronize() {\n  if (!ready()) return 1;\n  RNNC_CUDA_CHECK(cudaStreamSynchronize(context().stream(0)));\n  return 0;\n}\n\n";
  out += "} // namespace\n\n" + abiTable(p_, true);
  return out;
}

} // namespace

std::string printCudaModule(const Program &p, const SourceManager &sm, const CudaOptions &o) {
  return CudaModulePrinter(p, sm, o).print();
}

} // namespace rnnc::codegen
