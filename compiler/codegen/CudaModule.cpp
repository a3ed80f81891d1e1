// The host part of the CUDA target: HostCode's shared entry points with
// CUDA's hooks (CudaHost), around the kernels CudaPrinter prints.
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
#include "codegen/CudaPersist.h"
#include "codegen/CudaPrinter.h"
#include "codegen/StoppedRows.h"
#include "codegen/CudaScan.h"
#include "codegen/HostCode.h"
#include "ir/Scalar.h"

#include <algorithm>
#include "support/Crash.h"

#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc::codegen {

namespace {

/// Which memory a stage reads and writes: buffers that share memory are one
/// root; kGradients stands for the param-gradient array.
struct Touches {
  std::set<int> reads, writes;
};
constexpr int kGradients = -2;

class CudaHost : public HostTarget {
public:
  CudaHost(const Program &p, const SourceManager &sm, const CudaOptions &o);

  Target target() const override { return Target::Cuda; }
  const char *targetPhrase() const override { return "CUDA"; }
  void header(Writer &w) override;
  void definitions(Writer &w) override;
  void extras(Writer &w) override;
  /// A failed copy returns 1; a reader's leaves its error in last_error().
  std::string rows(const std::string &call, bool reading) const override {
    // A 16-bit model's copies between a float buffer and a 16-bit port convert (rnnc/cuda.h).
    for (const char *copy : {"copy_rows(", "read_rows("})
      if (isHalf(p_.dtype) && call.rfind(copy, 0) == 0) {
        std::string converting = std::string(copy, 9) + "16(storage(ws, 0), " + call.substr(10) + ", s0)";
        return reading ? "ok(" + converting + ", \"read_rows\");" : "RNNC_CUDA_CHECK(" + converting + ");";
      }
    return reading ? "ok(" + call + ", s0), \"read_rows\");" : "RNNC_CUDA_CHECK(" + call + ", s0));";
  }
  void enter(Writer &w) const override { w.line("if (!ready() || !check_aligned(mem, params)) return 1;"); }
  void context(Writer &w, bool backward) const override;
  std::string indexCheck(size_t k, const PortIR &in) const override {
    return fmt::format(
        "if (check_device_indices(static_cast<const int32_t *>(inputs[{}]), T * B, {}, \"{}\", s0)) return 1;", k, in.width,
        in.name);
  }
  void maskKey(Writer &w) const override {
    w.line("unsigned rng[3];").line("mask_words(options, rng);");
    w.line("if (!launch(kernel_[3], \"set_rng\", 1, 32, s0, ws.rng, rng[0], rng[1], rng[2])) return 1;");
  }
  void lengths(Writer &w) const override {
    w.line("std::vector<int32_t> lengths(static_cast<size_t>(B));").line("real weight;");
    w.line("if (!sequence_lengths(options, T, B, lengths.data(), &weight)) return 1;");
    w.line("// From pageable memory: staged before the calls return.");
    w.line("RNNC_CUDA_CHECK(cudaMemcpyAsync(ws.lengths, lengths.data(), sizeof(int32_t) * B, cudaMemcpyHostToDevice, s0));");
    w.line("RNNC_CUDA_CHECK(cudaMemcpyAsync(ws.loss_weight, &weight, sizeof(real), cudaMemcpyHostToDevice, s0));");
    w.line("ws.host_lengths = lengths.data(); // each step's library calls are cut to the sequences still running");
  }
  void lossScale(Writer &w, bool backward) const override {
    if (backward) return; // the kernels read ws.loss_scale
    w.line("real scale;").line("if (!keep_loss_scale(options, &scale)) return 1;");
    w.line("// From pageable memory: staged before the call returns.");
    w.line("RNNC_CUDA_CHECK(cudaMemcpyAsync(ws.loss_scale, &scale, sizeof(real), cudaMemcpyHostToDevice, s0));");
  }
  void droppedParams(Writer &w, bool backward) const override;
  void clearGradients(Writer &w) const override;
  void stages(Writer &w, bool backward) override;
  std::string launch(const KernelIR &k, const std::string &rows) const override {
    return fmt::format("if (launch_{}(ws, P, G, B, {}, s0, c.blas(0))) return 1;", k.name, rows);
  }
  void fillState(Writer &w, const PortIR &g, const std::string &dst) const override {
    const bool half = isHalf(p_.dtype);
    w.line("if (!launch(kernel_[{}], \"{}\", grid_for({} * B * {}, 256), 256, s0, {}, {} * B * {}, {})) return 1;",
           half ? helper("fill_store") : 0, half ? "fill_store" : "fill", g.depth, g.width, dst, g.depth, g.width,
           CPrinter::literal(g.leaf.value));
  }
  void roundGradients(Writer &w) const override {
    w.line("// The gradients, summed in float, rounded once into the caller's 16-bit array.");
    w.line("if (!launch(kernel_[{}], \"to_store\", grid_for({}, 256), 256, s0, static_cast<const real *>(G), "
           "static_cast<store *>(param_grads), int64_t({}))) return 1;",
           helper("to_store"), p_.paramElements, p_.paramElements);
  }
  void readerLayout(Writer &w, const char *failed, bool rows) const override {
    (void)rows;
    w.line("if (!ready() || !layout(T, B, const_cast<void *>(mem), &ws) || !context().bind(stream)) return{}{};",
           *failed ? " " : "", failed);
    w.line("cudaStream_t s0 = context().stream(0);");
  }
  void lossInto(Writer &w, const Buffer *b) const override {
    if (b && b->half)
      w.line("if (!launch(kernel_[{}], \"mean_store\", 1, 256, s0, static_cast<const store *>(ws.{} + {} * B), T * B, "
             "static_cast<store *>(loss))) return 1;",
             helper("mean_store"), b->name, b->padBefore);
    else if (!b && isHalf(p_.dtype)) w.line("RNNC_CUDA_CHECK(cudaMemsetAsync(loss, 0, sizeof(store), s0));");
    else if (isHalf(p_.dtype)) RNNC_UNREACHABLE("a 16-bit model's loss keeps every step in 16 bits");
    else if (b)
      // The argument types are the kernel's parameter types (the emulator calls it through them).
      w.line("if (!launch(kernel_[2], \"mean\", 1, 256, s0, static_cast<const real *>(ws.{} + {} * B), T * B, "
             "static_cast<real *>(loss))) return 1;",
             b->name, b->padBefore);
    else w.line("RNNC_CUDA_CHECK(cudaMemsetAsync(loss, 0, sizeof(real), s0));");
  }
  void lossMean(Writer &w, const Buffer &b) const override;

private:
  int root(int buffer) const {
    while (buffer >= 0 && p_.buffers[buffer].shares >= 0) buffer = p_.buffers[buffer].shares;
    return buffer;
  }
  Touches touches(const StageIR &s) const;
  std::vector<int> waitsOf(int stage) const;
  void launcher(Writer &w, const KernelIR &k, int index);
  void spannedLibraryCall(Writer &w, const KernelIR &k);
  void stageFunction(Writer &w, int stage);
  void tables(Writer &w);
  void readiness(Writer &w);
  void runner(Writer &w);
  /// The index in kernel_[] of a prelude helper.
  int helper(const char *name) const {
    auto it = std::find(names_.begin(), names_.end(), name);
    RNNC_ASSERT(it != names_.end(), "no such helper");
    return static_cast<int>(it - names_.begin());
  }
  /// Whether a 16-bit model's GEMM reads an operand kept in float (a
  /// recurrent state, a gradient summed in float), which gemm16 rounds to 16
  /// bits by blocks of rows (rnnc/cuda.h) in the plan's scratch
  /// (MemoryPlan::roundedPerRow, which counts these operands' widths).
  bool roundsAnOperand(const KernelIR &k) const {
    const bool a = k.a >= 0 && !p_.buffers[k.a].half, b = k.b >= 0 && !p_.buffers[k.b].half;
    return k.kind == KernelIR::Kind::GradMatrix ? a || b : (k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT) && a;
  }
  std::string call16(Writer &w, const KernelIR &k, const std::string &from, const std::string &to) const;
  std::string biasedGemm(Writer &w, const KernelIR &k, const std::string &from, const std::string &to) const;
  std::string at(int buffer, int32_t delay) const {
    return fmt::format("ws.{} + {}", p_.buffers[buffer].name, CPrinter::rowOffset(p_.buffers[buffer], delay, "r0"));
  }

  const Program &p_;
  const SourceManager &sm_;
  CudaOptions o_;
  std::vector<std::string> names_; // the __global__ functions, as kernel_[] holds them
  std::vector<int> kernelIndex_;   // kernel -> its index in kernel_[]
  std::vector<int> streamOf_;      // kernel -> the stream its stage runs on
  std::vector<Touches> touches_;   // per stage
  int streams_ = 1;
};

CudaHost::CudaHost(const Program &p, const SourceManager &sm, const CudaOptions &o)
    : p_(p), sm_(sm), o_(o), names_(cudaKernelNames(p)) {
  kernelIndex_.assign(p_.kernels.size(), -1);
  streamOf_.assign(p_.kernels.size(), 0);
  for (const StageIR &s : p_.stages)
    for (int k : s.kernels) streamOf_[k] = s.stream;
  for (size_t k = 0; k < p_.kernels.size(); ++k)
    for (size_t n = 0; n < names_.size(); ++n)
      if (names_[n] == p_.kernels[k].name) kernelIndex_[k] = static_cast<int>(n);
  for (const StageIR &s : p_.stages) {
    streams_ = std::max(streams_, s.stream + 1);
    touches_.push_back(touches(s));
  }
}

Touches CudaHost::touches(const StageIR &s) const {
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
std::vector<int> CudaHost::waitsOf(int stage) const {
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

void CudaHost::launcher(Writer &w, const KernelIR &k, int index) {
  w.line("/// {}: {} on rows [r0, r1).", k.name,
         k.kind == KernelIR::Kind::Fused ? "the kernel"
         : k.biases.empty()              ? "a cuBLAS call"
                                         : "a cuBLASLt call adding the biases");
  // A fused kernel's comment names its equations; a library call's is here.
  if (k.kind != KernelIR::Kind::Fused) w.raw(CudaPrinter(p_, sm_).equationsComment(k));
  w.open("int launch_{}(const Workspace &ws, const {} *P, real *G, int64_t B, int64_t r0, int64_t r1, "
         "cudaStream_t s, cublasHandle_t blas) {{",
         k.name, portType(p_));
  if (p_.hasLengths && k.kind != KernelIR::Kind::Fused) { // cut to the running rows
    spannedLibraryCall(w, k);
    return;
  }
  if (isHalf(p_.dtype) && k.kind != KernelIR::Kind::Fused) {
    w.line("(void)P, (void)G, (void)B, (void)s, (void)blas;");
    w.line("return {} ? 0 : 1;", call16(w, k, "r0", "r1")).close();
    return;
  }
  switch (k.kind) {
  case KernelIR::Kind::Fused: {
    int threads = CudaPrinter::threadsOf(k, p_);
    std::string grid = CudaPrinter::isFlat(k) ? fmt::format("grid_for((r1 - r0) * {}, {})",
                                                            k.sweeps[0].width / CudaPrinter::elementsPerThread(k, p_), threads)
                                              : "grid_for(r1 - r0, 1)";
    w.line("(void)G, (void)blas;");
    w.line("return launch(kernel_[{}], \"{}\", {}, {}, s, ws, P, B, r0, r1) ? 0 : 1;", index, k.name, grid, threads);
    w.close();
    return;
  }
  case KernelIR::Kind::Gemm:
  case KernelIR::Kind::GemmT:
  case KernelIR::Kind::GradMatrix: {
    if (!k.biases.empty()) {
      w.line("(void)G, (void)B;");
      w.line("RNNC_CUDA_CHECK({});", biasedGemm(w, k, "r0", "r1"));
      break;
    }
    GemmCall gemm = gemmCall(p_, k);
    w.line("{}", gemm.comment);
    // A dropped param's product reads neither array: its W and gradient are the workspace's.
    if (k.dropped) w.line("(void)P, (void)G, (void)B, (void)s;");
    else w.line("(void){}, (void)B, (void)s;", k.kind == KernelIR::Kind::GradMatrix ? "P" : "G");
    w.line("RNNC_CUDA_CHECK(gemm(blas, {}));", gemm.args);
    break;
  }
  case KernelIR::Kind::GradVector:
    w.line("(void)P, (void)B, (void)s;");
    if (k.rows == 1) {
      w.line("// G[{}] += every element of d", k.paramOffset);
      w.line("RNNC_CUDA_CHECK(column_sums(blas, (r1 - r0) * {}, 1, {}, ws.ones, G + {}));", k.cols, at(k.a, k.aDelay),
             k.paramOffset);
    } else {
      w.line("// G[{}..{}] += sum over rows of d[r]", k.paramOffset, k.paramOffset + k.cols);
      w.line("RNNC_CUDA_CHECK(column_sums(blas, r1 - r0, {}, {}, ws.ones, G + {}));", k.cols, at(k.a, k.aDelay),
             k.paramOffset);
    }
    break;
  case KernelIR::Kind::GradEmbed:
    w.line("(void)P, (void)B, (void)blas;");
    w.line("const real *d = {};", at(k.a, k.aDelay)).line("const int32_t *row = {};", at(k.b, k.bDelay));
    w.line("real *g = G + {};", k.paramOffset);
    w.line("return launch(kernel_[1], \"grad_embed\", grid_for({}, 256), 256, s, d, row, g, r1 - r0, int64_t({})) ? 0 : 1;",
           k.cols, k.cols);
    w.close();
    return;
  }
  w.line("return 0;").close();
}

/// A --lengths launcher's library call, on the rows of sequences still running
/// only (docs/lengths.md): a product's other rows are zeros, a gradient's get nothing.
void CudaHost::spannedLibraryCall(Writer &w, const KernelIR &k) {
  auto at = [&](int buffer, int32_t delay) {
    return fmt::format("ws.{} + {}", p_.buffers[buffer].name, CPrinter::rowOffset(p_.buffers[buffer], delay, "q0"));
  };
  const bool product = k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT;
  std::string call;
  if (isHalf(p_.dtype)) {
    w.line("(void)P, (void)G, (void)blas;");
    call = call16(w, k, "q0", "q1");
  } else {
  switch (k.kind) {
  case KernelIR::Kind::Gemm:
  case KernelIR::Kind::GemmT:
  case KernelIR::Kind::GradMatrix: {
    if (!k.biases.empty()) {
      w.line("(void)G;");
      call = fmt::format("ok({}, \"gemm_bias\")", biasedGemm(w, k, "q0", "q1"));
      break;
    }
    GemmCall gemm = gemmCall(p_, k, "q0", "q1");
    w.line("{}", gemm.comment);
    if (k.dropped) w.line("(void)P, (void)G;");
    else w.line("(void){};", product ? "G" : "P");
    call = fmt::format("ok(gemm(blas, {}), \"gemm\")", gemm.args);
    break;
  }
  case KernelIR::Kind::GradVector:
    w.line("(void)P;");
    w.line(k.rows == 1 ? "// G[{}] += every element of d" : "// G[{}..] += sum over rows of d[r]", k.paramOffset);
    call = k.rows == 1 ? fmt::format("ok(column_sums(blas, (q1 - q0) * {}, 1, {}, ws.ones, G + {}), \"column_sums\")",
                                     k.cols, at(k.a, k.aDelay), k.paramOffset)
                       : fmt::format("ok(column_sums(blas, q1 - q0, {}, {}, ws.ones, G + {}), \"column_sums\")", k.cols,
                                     at(k.a, k.aDelay), k.paramOffset);
    break;
  case KernelIR::Kind::GradEmbed:
    w.line("(void)P, (void)blas;");
    call = fmt::format("launch(kernel_[1], \"grad_embed\", grid_for({}, 256), 256, s, static_cast<const real *>({}), "
                       "static_cast<const int32_t *>({}), G + {}, q1 - q0, int64_t({}))",
                       k.cols, at(k.a, k.aDelay), at(k.b, k.bDelay), k.paramOffset, k.cols);
    break;
  case KernelIR::Kind::Fused: RNNC_UNREACHABLE("not a library kernel");
  }
  }
  if (!product && k.kind != KernelIR::Kind::GradEmbed && !isHalf(p_.dtype)) w.line("(void)s; // on blas's stream");
  w.line("// Only the rows of sequences still running (docs/lengths.md).").line("bool good = true;");
  w.line("running_spans(ws.host_lengths, B, r0, r1, [&](int64_t q0, int64_t q1) {{ good = good && {}; }},", call);
  if (product) {
    const Buffer &o = p_.buffers[k.out];
    w.line("              [&](int64_t q0, int64_t q1) {{");
    w.line("                good = good && ok(cudaMemsetAsync(ws.{} + {}, 0, sizeof({}) * (q1 - q0) * {}, s), "
           "\"cudaMemsetAsync\");",
           o.name, CPrinter::rowOffset(o, 0, "q0"), CPrinter::elementType(o), o.width);
    w.line("              }});");
  } else {
    w.line("              [](int64_t, int64_t) {{}});");
  }
  w.line("return good ? 0 : 1;").close();
}

/// A product with its biases folded in (FoldBias.h) on rows [from, to): its
/// comment and, for two biases, the lines summing them where the stream keeps
/// them (Context::biasSpace); returns the call of rnnc/cuda.h's gemm_bias (a
/// cublasStatus_t).
std::string CudaHost::biasedGemm(Writer &w, const KernelIR &k, const std::string &from, const std::string &to) const {
  const Buffer &in = p_.buffers[k.a], &out = p_.buffers[k.out];
  const std::string W = fmt::format("{} + {}", k.dropped ? "ws.dropped" : "P", k.paramOffset);
  std::vector<std::string> biases;
  for (int64_t b : k.biases) biases.push_back(fmt::format("P[{}..]", b));
  w.line("// out[r] = W x[r] + {}, W = {}[{}..] [{} x {}]: the biases added by the GEMM's epilogue (gemm_bias)",
         fmt::join(biases, " + "), k.dropped ? "ws.dropped" : "P", k.paramOffset, k.rows, k.cols);
  const int stream = streamOf_[static_cast<size_t>(&k - p_.kernels.data())];
  std::string bias = fmt::format("P + {}", k.biases[0]);
  if (k.biases.size() > 1) {
    bias = "bias";
    w.line("real *bias = static_cast<real *>(context().biasSpace({})); // the two biases' sum", stream);
    w.line("RNNC_CUDA_CHECK(launch(kernel_[{}], \"bias_rows\", grid_for({}, 256), 256, s, bias, int64_t(1), int64_t({}), P + {}, "
           "P + {}));",
           helper("bias_rows"), k.rows, k.rows, k.biases[0], k.biases[1]);
  }
  return fmt::format("gemm_bias(context().lt(), blas, context().blasSpace({}), Context::kBlasSpaceBytes, s, kTf32, "
                     "kernel_[{}], {} - {}, {}, {}, ws.{} + {}, {}, ws.{} + {}, {})",
                     stream, helper("bias_rows"), to, from, k.rows, k.cols, in.name, CPrinter::rowOffset(in, k.aDelay, from),
                     W, out.name, CPrinter::rowOffset(out, 0, from), bias);
}

/// A 16-bit model's library kernel on rows [from, to): an expression true
/// when its work was issued on s (a GEMM through rnnc/cuda.h's gemm16, a
/// column sum or embedding gradient of a 16-bit d by the prelude's kernels).
std::string CudaHost::call16(Writer &w, const KernelIR &k, const std::string &from, const std::string &to) const {
  auto at = [&](int buffer, int32_t delay) {
    return fmt::format("ws.{} + {}", p_.buffers[buffer].name, CPrinter::rowOffset(p_.buffers[buffer], delay, from));
  };
  switch (k.kind) {
  case KernelIR::Kind::Gemm:
  case KernelIR::Kind::GemmT:
  case KernelIR::Kind::GradMatrix: {
    GemmCall gemm = gemmCall(p_, k, from, to, "P");
    w.line("{}: 16-bit operands{}, float sums (tensor cores)", gemm.comment,
           roundsAnOperand(k) ? " (the float one rounded by blocks)" : "");
    return fmt::format("ok(gemm16(blas, s, storage(ws, {}), {}), \"gemm16\")", streamOf_[&k - p_.kernels.data()], gemm.args);
  }
  case KernelIR::Kind::GradVector: {
    const std::string rows = fmt::format("({} - {})", to, from);
    w.line(k.rows == 1 ? "// G[{}] += every element of d" : "// G[{}..] += sum over rows of d[r]", k.paramOffset);
    if (!p_.buffers[k.a].half)
      return fmt::format("ok(column_sums(blas, {}, {}, {}, ws.ones, G + {}), \"column_sums\")",
                         k.rows == 1 ? fmt::format("{} * {}", rows, k.cols) : rows, k.rows == 1 ? int64_t(1) : k.cols,
                         at(k.a, k.aDelay), k.paramOffset);
    return fmt::format("launch(kernel_[{}], \"column_sums_store\", grid_for({}, 256), 256, s, static_cast<const store *>({}), "
                       "{}, int64_t({}), G + {})",
                       helper("column_sums_store"), k.rows == 1 ? 1 : k.cols, at(k.a, k.aDelay),
                       k.rows == 1 ? fmt::format("{} * {}", rows, k.cols) : rows, k.rows == 1 ? int64_t(1) : k.cols,
                       k.paramOffset);
  }
  case KernelIR::Kind::GradEmbed: {
    const bool half = p_.buffers[k.a].half;
    return fmt::format("launch(kernel_[{}], \"{}\", grid_for({}, 256), 256, s, static_cast<const {} *>({}), "
                       "static_cast<const int32_t *>({}), G + {}, {} - {}, int64_t({}))",
                       half ? helper("grad_embed_store") : 1, half ? "grad_embed_store" : "grad_embed", k.cols,
                       half ? "store" : "real", at(k.a, k.aDelay), at(k.b, k.bDelay), k.paramOffset, to, from, k.cols);
  }
  case KernelIR::Kind::Fused: break;
  }
  RNNC_UNREACHABLE("not a library kernel");
}

void CudaHost::stageFunction(Writer &w, int stage) {
  const StageIR &s = p_.stages[stage];
  if (CudaScanPrinter::runsInParallel(p_, stage)) {
    w.raw(CudaScanPrinter(p_, sm_, stage).stageFunction());
    return;
  }
  if (CudaPersistPrinter::persistent(p_, stage)) {
    CudaPersistPrinter(p_, sm_, stage).stageFunction(w, names_);
    return;
  }
  w.line("/// Stage {}{}: {}.", stage, s.backward ? " (backward)" : "",
         s.loop ? fmt::format("a loop over time, t = {}", s.direction > 0 ? "0 .. T-1" : "T-1 .. 0") : "every step at once");
  w.open("int stage_{}(const Workspace &ws, const {} *P, real *G, int64_t T, int64_t B, cudaStream_t s, "
         "cublasHandle_t blas) {{",
         stage, portType(p_));
  stageLaunches(w, p_, s, [](const KernelIR &k, const std::string &rows) {
    return fmt::format("if (launch_{}(ws, P, G, B, {}, s, blas)) return 1;", k.name, rows);
  });
  if (!s.loop) w.line("(void)T;");
  w.line("return 0;").close();
}

/// The stages of one direction on their streams: forks from stream 0, the
/// waits, the events later stages need, and the join into stream 0.
void CudaHost::stages(Writer &w, bool backward) {
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
  if (streams.size() > 1 || (streams.size() == 1 && !streams.count(0))) {
    w.line("// The other streams start after stream 0's copies.");
    w.line("RNNC_CUDA_CHECK(cudaEventRecord(c.event({}), s0));", fork);
    for (int st : streams)
      if (st) w.line("RNNC_CUDA_CHECK(cudaStreamWaitEvent(c.stream({}), c.event({}), 0));", st, fork);
  }
  for (int s : stages) {
    const StageIR &st = p_.stages[s];
    std::string after;
    for (int e : waits[s]) after += fmt::format("{}stage {} (stream {})", after.empty() ? "" : ", ", e, p_.stages[e].stream);
    w.line("// Stage {} on stream {}{}.", s, st.stream, after.empty() ? "" : ", after " + after);
    for (int e : waits[s]) w.line("RNNC_CUDA_CHECK(cudaStreamWaitEvent(c.stream({}), c.event({}), 0));", st.stream, e);
    w.line("if (run(stage_{}, {}, {}, ws, P, G, T, B, {}, mem)) return 1;", s, s, st.loop ? "true" : "false", st.stream);
    if (recorded.count(s)) w.line("RNNC_CUDA_CHECK(cudaEventRecord(c.event({}), c.stream({})));", s, st.stream);
  }
  bool joined = false;
  for (int st : streams)
    if (st) {
      if (!joined) w.line("// Stream 0 waits for the others.");
      joined = true;
      w.line("RNNC_CUDA_CHECK(cudaEventRecord(c.event({}), c.stream({})));", fork + st, st);
      w.line("RNNC_CUDA_CHECK(cudaStreamWaitEvent(s0, c.event({}), 0));", fork + st);
    }
}

void CudaHost::context(Writer &w, bool backward) const {
  w.line("Context &c = context();");
  w.line("if (!c.bind(stream)) return 1;").line("cudaStream_t s0 = c.stream(0); // the caller's");
  if (backward) w.line("(void)c, (void)seeds, (void)state_seeds, (void)input_grads, (void)state_grads;");
  else w.line("(void)c, (void)s0;");
  if (backward && p_.hasLengths) {
    w.line("// The lengths forward kept, on the host: each step's library calls are cut to the sequences");
    w.line("// still running, so backward waits here for forward's work on the caller's stream.");
    w.line("std::vector<int32_t> lengths(static_cast<size_t>(B));");
    w.line("RNNC_CUDA_CHECK(cudaMemcpyAsync(lengths.data(), ws.lengths, sizeof(int32_t) * B, cudaMemcpyDeviceToHost, s0));");
    w.line("RNNC_CUDA_CHECK(cudaStreamSynchronize(s0));").line("ws.host_lengths = lengths.data();");
  }
}

/// One launch per dropped param on stream 0: forward's before the stages
/// fork from it, backward's after they joined it. The argument types are the
/// kernel's parameter types (the emulator calls it through them).
void CudaHost::droppedParams(Writer &w, bool backward) const {
  const int kernel = backward ? 5 : 4;
  for (const DroppedSlot &d : p_.dropped)
    w.line("if (!launch(kernel_[{}], \"{}\", grid_for({}, 256), 256, s0, static_cast<const unsigned *>(ws.rng), {}u, "
           "{}u, {}, static_cast<const {} *>({} + {}), {} + {}, int64_t({}))) return 1;",
           kernel, backward ? "fold_dropped_grad" : "drop_param", (d.elements + 3) / 4, d.site,
           scalar::keep_threshold(d.keep), CPrinter::literal(1 / d.keep), backward ? "real" : portType(p_),
           backward ? "ws.dropped_grad" : "P",
           backward ? d.offset : d.of, backward ? "G" : "ws.dropped", backward ? d.of : d.offset, d.elements);
}

void CudaHost::clearGradients(Writer &w) const {
  w.line("RNNC_CUDA_CHECK(cudaMemsetAsync(G, 0, {} * sizeof(real), s0));", p_.paramElements);
  if (p_.droppedGrads)
    w.line("RNNC_CUDA_CHECK(cudaMemsetAsync(ws.dropped_grad, 0, {} * sizeof(real), s0));", p_.droppedElements);
  if (int64_t n = p_.onesWidth)
    w.line("if (!launch(kernel_[0], \"fill\", grid_for(T * B * {}, 256), 256, s0, ws.ones, T * B * {}, real(1))) return 1;", n,
           n);
}

void CudaHost::lossMean(Writer &w, const Buffer &b) const {
  w.line("std::vector<{}> loss(static_cast<size_t>(T * B));", CPrinter::elementType(b));
  w.line("if (cudaMemcpyAsync(loss.data(), ws.{} + {} * B, loss.size() * sizeof({}), cudaMemcpyDeviceToHost, s0) != "
         "cudaSuccess ||",
         b.name, b.padBefore, CPrinter::elementType(b));
  w.line("    cudaStreamSynchronize(s0) != cudaSuccess)");
  w.indent().line("return NAN;").dedent();
  w.line("return mean_of(loss.data(), T * B);");
}

void CudaHost::header(Writer &w) {
  if (o_.jit) {
    w.line("// Build: c++ -std=c++17 -O2 $(rnnc --print-cflags) -I$CUDA/include -c this file; link cudart, cublas, cublasLt, nvrtc.");
    w.line("// The kernels are a string NVRTC compiles at first use for the GPU that is there.");
  } else {
    w.line("// Build: nvcc -std=c++17 -arch=sm_90 $(rnnc --print-cflags) -c this file; link cudart, cublas and cublasLt.");
  }
  w.line("// Arrays are time-major and live on the device; see runtime/include/rnnc/model.h for the ABI.");
  w.line("#include \"rnnc/{}.h\"", o_.jit ? "cuda_jit" : "cuda").line("#include \"rnnc/model.h\"");
  if (o_.jit && isHalf(p_.dtype)) w.line("#include \"rnnc/half.h\"");
  w.blank();
  w.line("#include <cmath>").line("#include <cstdint>").line("#include <mutex>").line("#include <vector>").blank();
}

/// The device code (in a .cu as it is, with --jit as NVRTC's string), the
/// workspace layout with the ones, then the tables, readiness and launchers.
void CudaHost::definitions(Writer &w) {
  std::string kernels = printCudaKernels(p_, sm_);
  if (o_.tf32 && !isHalf(p_.dtype) && CudaPersistPrinter::anyPersistent(p_))
    kernels = "#define RNNC_TF32\n// --tf32: the persistent loops' products on tensor cores too (docs/cuda.md#persistent-loops).\n" +
              kernels;
  if (o_.jit) {
    w.line("#ifdef RNNC_REAL_DOUBLE").line("using real = double;");
    w.line("const char kRealDefine[] = \"#define RNNC_REAL_DOUBLE\\n\";");
    w.line("#else").line("using real = float;").line("const char kRealDefine[] = \"\";").line("#endif");
    if (isHalf(p_.dtype)) w.line("using store = rnnc::{}; // the host passes the 16-bit arrays, the kernels convert", dtypeName(p_.dtype));
    w.blank();
    w.line("// The device code: what a .cu bundle of this model holds, compiled by NVRTC.");
    w.raw("const char kKernelSource[] = R\"rnnc_cuda(" + kernels + ")rnnc_cuda\";\n").blank();
    w.raw(cudaWorkspaceStruct(p_)).blank();
  } else {
    w.raw(kernels);
  }
  w.line("using namespace rnnc::cuda;").blank();
  std::string extraTake = p_.onesWidth ? fmt::format("ws->ones = c.take<real>(1, 0, {});", p_.onesWidth) : "ws->ones = nullptr;";
  if (p_.hasLengths) extraTake += " ws->host_lengths = nullptr;";
  std::vector<std::string> takes = {extraTake};
  if (p_.lossSeeded) takes.push_back("ws->loss_scale = c.take_fixed<real>(1);");
  if (p_.gridBarrierWords) takes.push_back(fmt::format("ws->grid_barrier = c.take_fixed<unsigned>({});", p_.gridBarrierWords));
  if (isHalf(p_.dtype)) {
    if (p_.hasBackward) takes.push_back(fmt::format("ws->grads = c.take_fixed<real>({});", p_.paramElements));
    const int64_t perRow = p_.roundedPerRow; // the plan's: the widest row of a product's float operands
    // A block of rows rounded to 16 bits: up to MemoryPlan::kRoundedElements, at least one row.
    static_assert(MemoryPlan::kRoundedElements == int64_t(1) << 20, "the text below says 2^20");
    takes.push_back(perRow ? fmt::format("ws->rounded_elements = std::max<int64_t>({0}, std::min<int64_t>(T * B * {0}, "
                                         "int64_t(1) << 20));",
                                         perRow)
                           : "ws->rounded_elements = 0;");
    // One scratch per stream: the stages of different streams run at once.
    takes.push_back(fmt::format("ws->rounded = ws->rounded_elements ? c.take_fixed<store>({} * ws->rounded_elements) : "
                                "nullptr;",
                                streams_));
  }
  w.raw(workspaceLayout(p_, takes)).blank();
  tables(w);
  if (isHalf(p_.dtype)) {
    w.line("/// The 16-bit products' storage type, conversion kernels and the rounding scratch of a stream");
    w.line("/// (rnnc/cuda.h's gemm16).");
    w.open("Storage16<store> storage(const Workspace &ws, int stream) {{");
    w.line("return {{{}, kernel_[{}], kernel_[{}], ws.rounded + stream * ws.rounded_elements, ws.rounded_elements}};",
           p_.dtype == DType::BF16 ? "CUDA_R_16BF" : "CUDA_R_16F", helper("to_real"), helper("to_store"));
    w.close().blank();
  }
  readiness(w);
  for (size_t k = 0; k < p_.kernels.size(); ++k) {
    launcher(w, p_.kernels[k], kernelIndex_[k]);
    w.blank();
  }
  for (size_t s = 0; s < p_.stages.size(); ++s)
    if (CudaScanPrinter::runsInParallel(p_, static_cast<int>(s)))
      w.raw(CudaScanPrinter(p_, sm_, static_cast<int>(s)).launchers([&](const std::string &kernel) {
        return static_cast<int>(std::find(names_.begin(), names_.end(), kernel) - names_.begin());
      }));
  for (size_t s = 0; s < p_.stages.size(); ++s) {
    stageFunction(w, static_cast<int>(s));
    w.blank();
  }
  runner(w);
}

/// The streams, events and options, and the __global__ functions by index and name.
void CudaHost::tables(Writer &w) {
  int events = static_cast<int>(p_.stages.size()) + 1 + streams_;
  w.line("constexpr int kStreams = {}, kEvents = {};", streams_, events);
  w.line("constexpr bool kTf32 = {}, kCudaGraphs = {};", o_.tf32, o_.cudaGraphs).blank();
  w.line("/// The __global__ functions, indexed by the launchers.");
  if (o_.jit) {
    w.line("const void *kernel_[{}];", names_.size());
  } else {
    w.open("const void *kernel_[{}] = {{", names_.size()).indent();
    for (const std::string &n : names_) w.line("reinterpret_cast<const void *>({}),", n);
    w.dedent().close("}};");
  }
  std::string nameList;
  for (const std::string &n : names_) nameList += fmt::format("{}\"{}\"", nameList.empty() ? "" : ", ", n);
  w.line("const char *const kKernelNames[] = {{{}}};", nameList).blank();
}

/// context() and ready() (with --jit, the kernels loaded once), and the check
/// of index inputs, which live on the device.
void CudaHost::readiness(Writer &w) {
  w.line("/// This thread's streams, events and cuBLAS handles: distinct threads run distinct workspaces at once.");
  w.open("Context &context() {{").line("thread_local Context c;").line("return c;").close().blank();
  w.line("/// The streams, events and cuBLAS handles of this thread (and, --jit, the compiled kernels), once.");
  w.open("bool ready() {{").line("if (!context().ready(kStreams, kEvents, kTf32)) return false;");
  if (o_.jit) {
    w.line("static std::mutex mutex;").line("static int loaded = -1;");
    w.line("static std::string failure; // every later call reports it too");
    w.line("std::lock_guard<std::mutex> lock(mutex);");
    w.open("if (loaded < 0) {{").line("std::string source = std::string(kRealDefine) + kKernelSource;");
    w.line("loaded = load_kernels(source.c_str(), kKernelNames, {}, kernel_) == 0 ? 1 : 0;", names_.size());
    w.line("if (!loaded) failure = \"loading the kernels: \" + last_error();").close();
    w.line("if (!loaded) last_error() = failure;").line("return loaded == 1;");
  } else {
    w.line("(void)kKernelNames;").line("return true;");
  }
  w.close().blank();
  bool indexInputs = false;
  for (const PortIR &in : p_.inputs) indexInputs |= in.index;
  if (!indexInputs) return;
  w.line("/// Index input x (device memory, written by work on stream s) checked on the host: every value in [0, range).");
  w.open("int check_device_indices(const int32_t *x, int64_t n, int64_t range, const char *input, cudaStream_t s) {{");
  w.line("std::vector<int32_t> host(static_cast<size_t>(n));");
  w.line("RNNC_CUDA_CHECK(cudaMemcpyAsync(host.data(), x, host.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, s));");
  w.line("RNNC_CUDA_CHECK(cudaStreamSynchronize(s));");
  w.line("return check_indices(host.data(), n, range, input) ? 0 : 1;").close().blank();
}

/// run(): a stage on its stream, or its CUDA graph's replay.
void CudaHost::runner(Writer &w) {
  w.line("using StageFn = int (*)(const Workspace &, const {} *, real *, int64_t, int64_t, cudaStream_t, cublasHandle_t);",
         portType(p_))
      .blank();
  w.line("/// Stage `stage` on stream `s`; with --cuda-graphs a loop stage is replayed as a");
  w.line("/// CUDA graph captured once per shape and pointers.");
  w.line("int run(StageFn fn, int stage, bool loop, const Workspace &ws, const {} *P, real *G, int64_t T, int64_t B, int s,",
         portType(p_));
  w.open("        const void *mem) {{");
  w.line("Context &c = context();").line("if (!kCudaGraphs || !loop) return fn(ws, P, G, T, B, c.stream(s), c.blas(s));");
  w.line("thread_local GraphCache graphs;");
  w.line("std::vector<const void *> key = {{mem, P, G, reinterpret_cast<const void *>(T), reinterpret_cast<const void *>(B)}};");
  if (p_.hasLengths) {
    w.line("// A graph holds its library calls' rows: the lengths are part of its key.");
    w.line("for (int64_t b = 0; b < B; ++b) key.push_back(reinterpret_cast<const void *>(intptr_t(ws.host_lengths[b])));");
  }
  w.line("return run_captured(graphs, stage, key, c.stream(s), c.captureStream(), c.blas(s), [&](cudaStream_t stream) {{");
  w.line("  return fn(ws, P, G, T, B, stream, c.blas(s));").line("}});");
  w.close().blank();
}

void CudaHost::extras(Writer &w) {
  w.open("int synchronize(void *stream) {{").line("if (!ready() || !context().bind(stream)) return 1;");
  w.line("RNNC_CUDA_CHECK(cudaStreamSynchronize(context().stream(0)));").line("return 0;").close().blank();
}

} // namespace

std::string printCudaModule(const Program &p, const SourceManager &sm, const CudaOptions &o) {
  Program cuda = p; // the rows past a sequence's end fold (--lengths), but for four elements a thread
  foldStoppedRows(cuda, [&](const KernelIR &k) { return CudaPrinter::elementsPerThread(k, p) == 1; });
  CudaHost host(cuda, sm, o);
  return printHostModule(cuda, host);
}

} // namespace rnnc::codegen
