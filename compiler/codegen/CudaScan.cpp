// A loop stage with a scan plan prints as (docs/cuda.md, "Loops in parallel
// over time"):
//   chunks = scan_chunks(T, B, shape, guarded)   (0: the loop's own kernels, step by step)
//   scan_N_chunks   per chunk but the last: each thread composes the affine
//                   maps of a run of consecutive steps of one element in
//                   registers (the step's tangent at a zero state); a warp's
//                   lanes hold consecutive runs of E elements and scan them
//                   with shuffles; warps combine through shared memory; the
//                   chunk's map goes to the aggregates
//   scan_N_carries  per element, the state before each chunk from the one
//                   before the loop (at most 64 chunks: a short serial chain)
//   scan_N_steps    per chunk: the runs' maps again, scanned, give each thread
//                   its exact incoming state; it then runs the loop's own step
//                   (every kernel of the loop joined, stores kept) over its run
// A Newton stage guesses the initial state at every step, then `iterations`
// times linearizes each step at the guess into the coefficients and composes
// chunks (newton_N_linearize), carries, and solves the linear recurrence for
// the next guess (newton_N_solve); then the exact steps run from the guess at
// each run's start and measure how far each run's end lands from the guess the
// next run started from (newton_N_steps); newton_N_residual takes the largest,
// and newton_N_serial runs the loop again, one thread per element, when it is
// past the tolerance: the decision stays on the device, so no launch waits for
// the host and a CUDA graph captures the whole stage.
#include "codegen/CudaScan.h"

#include "codegen/HostCode.h"
#include "codegen/ScanIR.h"

#include "support/Crash.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <map>
#include <set>

namespace rnnc::codegen {

namespace {

constexpr int kScanThreads = 256; // threads of every scan kernel (kScanThreads in the prelude)

const char *kDevicePrelude = R"cuda(
// ---- Loops run in parallel over time (docs/cuda.md, "Loops in parallel over time").
// Per element, a step of such a loop maps its K states one step back to the
// new ones as x -> A x + b: a scan's step, or Newton's linearization of one.
template <int K> struct Affine {
  real A[K][K];
  real b[K];
};

template <int K> __device__ __forceinline__ Affine<K> affine_identity() {
  Affine<K> m;
#pragma unroll
  for (int p = 0; p < K; ++p) {
#pragma unroll
    for (int q = 0; q < K; ++q) m.A[p][q] = p == q ? real(1) : real(0);
    m.b[p] = real(0);
  }
  return m;
}

// `later` after `earlier`: x -> later.A (earlier.A x + earlier.b) + later.b.
template <int K> __device__ __forceinline__ Affine<K> compose(const Affine<K> &later, const Affine<K> &earlier) {
  Affine<K> m;
#pragma unroll
  for (int p = 0; p < K; ++p) {
    real b = later.b[p];
#pragma unroll
    for (int q = 0; q < K; ++q) {
      real a = real(0);
#pragma unroll
      for (int r = 0; r < K; ++r) a += later.A[p][r] * earlier.A[r][q];
      m.A[p][q] = a;
      b += later.A[p][q] * earlier.b[q];
    }
    m.b[p] = b;
  }
  return m;
}

// x := m x.
template <int K> __device__ __forceinline__ void apply(const Affine<K> &m, real (&x)[K]) {
  real y[K];
#pragma unroll
  for (int p = 0; p < K; ++p) {
    y[p] = m.b[p];
#pragma unroll
    for (int q = 0; q < K; ++q) y[p] += m.A[p][q] * x[q];
  }
#pragma unroll
  for (int p = 0; p < K; ++p) x[p] = y[p];
}

// The map of the lane `delta` below this one (a lane with none keeps its
// own). Every lane of the warp calls it.
template <int K> __device__ __forceinline__ Affine<K> shfl_up(const Affine<K> &m, int delta) {
  Affine<K> o;
#pragma unroll
  for (int p = 0; p < K; ++p) {
#pragma unroll
    for (int q = 0; q < K; ++q) o.A[p][q] = __shfl_up_sync(0xffffffffu, m.A[p][q], delta);
    o.b[p] = __shfl_up_sync(0xffffffffu, m.b[p], delta);
  }
  return o;
}

// A scan block has kScanThreads threads: E elements side by side in each warp
// (thread % E) and kScanThreads / E time-lanes (thread / E); time-lane u takes
// the u-th run of consecutive steps of the block's chunk.
constexpr int kScanThreads = 256;

// Over the 32 / E time-lanes of a warp, per element: this lane's map composed
// after those of every lane before it.
template <int K, int E> __device__ __forceinline__ Affine<K> warp_scan(Affine<K> m) {
  const int u = (threadIdx.x & 31) / E;
#pragma unroll
  for (int d = 1; d < 32 / E; d *= 2) {
    const Affine<K> before = shfl_up(m, d * E);
    if (u >= d) m = compose(m, before);
  }
  return m;
}

// Over the time-lanes of the block, per element: the maps of every lane before
// this one, composed (the identity for lane 0). Warp scans, then each warp's
// total through shared memory. Every thread of the block calls it.
template <int K, int E> __device__ Affine<K> block_scan(const Affine<K> &mine) {
  __shared__ Affine<K> warps[kScanThreads / 32][E];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const Affine<K> inclusive = warp_scan<K, E>(mine);
  Affine<K> before = shfl_up(inclusive, E);
  if (lane < E) before = affine_identity<K>();
  if (lane >= 32 - E) warps[warp][lane % E] = inclusive;
  __syncthreads();
  Affine<K> prefix = affine_identity<K>();
  for (int w = 0; w < warp; ++w) prefix = compose(warps[w][lane % E], prefix);
  __syncthreads(); // every thread has read warps[] before the next scan writes it
  return compose(before, prefix);
}

// Over the time-lanes of the block, per element: every lane's map, composed in
// order (the map of the block's whole chunk). Every thread of the block calls it.
template <int K, int E> __device__ Affine<K> block_total(const Affine<K> &mine) {
  __shared__ Affine<K> warps[kScanThreads / 32][E];
  const int lane = threadIdx.x & 31;
  const Affine<K> inclusive = warp_scan<K, E>(mine);
  if (lane >= 32 - E) warps[threadIdx.x >> 5][lane % E] = inclusive;
  __syncthreads();
  Affine<K> all = affine_identity<K>();
#pragma unroll
  for (int w = 0; w < kScanThreads / 32; ++w) all = compose(warps[w][lane % E], all);
  __syncthreads(); // every thread has read warps[] before the next scan writes it
  return all;
}

// The first step (in the loop's order) of chunk c of a loop of T steps cut
// into `chunks`, as rnnc::cpu cuts them: the first T % chunks chunks one longer.
__device__ __forceinline__ int64_t chunk_first(int64_t c, int64_t T, int64_t chunks) {
  return c * (T / chunks) + (c < T % chunks ? c : T % chunks);
}

// Chunk c's steps [first, last), and the run [begin, end) of them that
// time-lane `lane` of `lanes` takes (runs at the end of a short chunk are empty).
struct ScanRun {
  int64_t first, last, begin, end;
};
__device__ __forceinline__ ScanRun scan_run(int64_t c, int64_t T, int64_t chunks, int64_t lane, int64_t lanes) {
  ScanRun run;
  run.first = chunk_first(c, T, chunks);
  run.last = chunk_first(c + 1, T, chunks);
  const int64_t share = (run.last - run.first + lanes - 1) / lanes;
  run.begin = run.first + lane * share < run.last ? run.first + lane * share : run.last;
  run.end = run.begin + share < run.last ? run.begin + share : run.last;
  return run;
}

// How far (|a - b| / (1 + |a|)) Newton's exact steps may land from the guess
// the next run started from for its answer to stand: rnnc::cpu's tolerance.
__device__ __forceinline__ real newton_tolerance() { return sizeof(real) == sizeof(float) ? real(1e-4) : real(1e-9); }
)cuda";

/// Whether `text` uses the identifier `id` (to silence unused parameters).
bool uses(const std::string &text, const std::string &id) {
  for (size_t at = text.find(id); at != std::string::npos; at = text.find(id, at + 1)) {
    auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    bool before = at > 0 && word(text[at - 1]);
    bool after = at + id.size() < text.size() && word(text[at + id.size()]);
    if (!before && !after) return true;
  }
  return false;
}

} // namespace

bool CudaScanPrinter::runsInParallel(const Program &p, int stage) {
  const StageIR &s = p.stages[static_cast<size_t>(stage)];
  if (!s.loop || s.scan.plan == LoopPlan::Sequential || s.scan.states.empty() || s.scan.aggregates < 0 ||
      s.scan.carries < 0 || (s.scan.plan == LoopPlan::Newton && s.scan.coefficients < 0))
    return false;
  // Every buffer the loop touches keeps every step's rows (KernelIR.cpp does
  // so for such loops): a run of steps addresses rows by step alone.
  for (int k : s.kernels) {
    const KernelIR &kernel = p.kernels[static_cast<size_t>(k)];
    if (kernel.kind != KernelIR::Kind::Fused) return false;
    for (const Sweep &sw : kernel.sweeps)
      for (const Instr &in : sw.body) {
        std::vector<int> touched;
        if (in.store >= 0) touched.push_back(in.store);
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) touched.push_back(o.buffer);
        for (int b : touched)
          if (p.buffers[static_cast<size_t>(b)].ring || p.buffers[static_cast<size_t>(b)].stepLocal) return false;
      }
  }
  return true;
}

bool CudaScanPrinter::anyRunsInParallel(const Program &p) {
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (runsInParallel(p, static_cast<int>(s))) return true;
  return false;
}

std::vector<std::string> CudaScanPrinter::kernelNames(const Program &p, int stage) {
  const StageIR &s = p.stages[static_cast<size_t>(stage)];
  std::vector<const char *> passes = s.scan.plan == LoopPlan::Newton
                                         ? std::vector<const char *>{"guess", "linearize", "carries", "solve", "steps",
                                                                     "residual", "serial"}
                                         : std::vector<const char *>{"chunks", "carries", "steps"};
  std::vector<std::string> names;
  for (const char *pass : passes) names.push_back(scanName(s, stage) + "_" + pass);
  return names;
}

std::string CudaScanPrinter::devicePrelude() { return kDevicePrelude; }

CudaScanPrinter::CudaScanPrinter(const Program &p, const SourceManager &sm, int stage)
    : CudaPrinter(p, sm), stage_(stage), s_(p.stages[static_cast<size_t>(stage)]), scan_(s_.scan) {
  RNNC_ASSERT(runsInParallel(p, stage), "a scan printed for a stage the GPU runs step by step");
  n_ = scan_.width;
  k_ = static_cast<int64_t>(scan_.states.size());
  elements_ = 1;
  while (elements_ < 8 && elements_ < n_) elements_ *= 2; // 8 floats: one 32-byte sector per time-lane
  groups_ = (n_ + elements_ - 1) / elements_;
}


std::string CudaScanPrinter::name(const char *pass) const { return scanName(s_, stage_) + "_" + pass; }

/// The step at loop position `j`.
std::string CudaScanPrinter::stepAt(const std::string &j) const { return codegen::stepAt(s_.direction, j); }

/// The comment (title, equations) and signature of kernel `pass`.
std::string CudaScanPrinter::header(const char *pass, const std::string &what, const std::string &params) {
  std::string out = fmt::format("// {}: {}\n", name(pass), what) + equationsComment(loopEquations(p_, s_));
  out += fmt::format("RNNC_KERNEL __launch_bounds__({}) void {}(const Workspace ws, {}) {{\n", kScanThreads, name(pass), params);
  return out;
}

/// The block-uniform loop over (chunk, group) blocks and the thread's place:
/// chunk c, sequence r, element i, its run of steps; opened, the caller closes it.
void CudaScanPrinter::blockLoop(Writer &w, const std::string &blocks) const {
  w.line("constexpr int K = {}, E = {}; // states per element; elements side by side in a warp", k_, elements_);
  if (groups_ > 1) w.line("const int64_t groups = B * {}; // of E elements, per chunk", groups_);
  else w.line("const int64_t groups = B; // of E elements (one a sequence), per chunk");
  w.open("for (int64_t block = blockIdx.x; block < {}; block += gridDim.x) {{ // a chunk of a group", blocks);
  if (groups_ > 1)
    w.line("const int64_t c = block / groups, r = block % groups / {}, i = block % {} * E + threadIdx.x % E;", groups_,
           groups_);
  else
    w.line("const int64_t c = block / groups, r = block % groups, i = threadIdx.x % E;");
  if (n_ % elements_) w.line("const bool active = i < {}; // the last group's elements past the row are idle", n_);
  w.line("const ScanRun run = scan_run(c, T, chunks, threadIdx.x / E, kScanThreads / E);");
}

/// One thread per element of each sequence (r, i), its states `s[K]` set to
/// those before the loop's first step (the carries and serial kernels).
void CudaScanPrinter::openSequenceStates(Writer &w) const {
  openElements(w, "B * ");
  w.line("const int64_t r = e / {}, i = e % {};", n_, n_);
  w.line("real s[K];").open("{{");
  initialStates(w, "s");
  w.close();
}

/// `target[p] = ` each state before the loop's first step, for sequence r.
void CudaScanPrinter::initialStates(Writer &w, const std::string &target) const {
  w.line("const int64_t q = {};", s_.direction > 0 ? "r" : "(T - 1) * B + r");
  stateRowsAt(w, s_.direction, target);
}

/// `target[p] = ` the states at row q read with `delay`.
void CudaScanPrinter::stateRowsAt(Writer &w, int32_t delay, const std::string &target) const {
  for (int b : scan_.states) {
    const Buffer &buf = p_.buffers[static_cast<size_t>(b)];
    w.line("const real *__restrict__ {} = ws.{} + {};", rowPointer(b, delay), buf.name, rowOffset(buf, delay, "q"));
  }
  for (size_t p = 0; p < scan_.states.size(); ++p) w.line("{}[{}] = {}[i];", target, p, rowPointer(scan_.states[p], delay));
}

/// `target[p] = ` the carry before chunk `c`.
void CudaScanPrinter::carryLoad(Writer &w, const std::string &c, const std::string &target) const {
  const Buffer &car = p_.buffers[static_cast<size_t>(scan_.carries)];
  w.line("const real *__restrict__ carry = ws.{} + ({} * B + r) * {} + i;", car.name,
         c.find(' ') == std::string::npos ? c : "(" + c + ")", n_ * k_);
  for (int64_t p = 0; p < k_; ++p) w.line("{}[{}] = carry[{}];", target, p, p * n_);
}

/// `real s[K]`: the state before chunk c (before the loop for chunk 0, else its carry).
void CudaScanPrinter::chunkStart(Writer &w) const {
  const bool all = n_ % elements_ == 0;
  w.line("real s[K] = {{}}; // the state before the chunk: before the loop, or its carry");
  w.open("if ({}c == 0) {{", all ? "" : "active && ");
  initialStates(w, "s");
  w.close("}} else{} {{", all ? "" : " if (active)").indent();
  carryLoad(w, "c", "s");
  w.close();
}

/// Row pointers at row q of what `s` loads (but the states one step back and
/// what it computed itself) and, with `stores`, of what it stores.
void CudaScanPrinter::rowPointers(Writer &w, const Sweep &s, bool stores) const {
  std::set<std::pair<int, int32_t>> loads;
  std::set<int> written;
  std::set<int> states(scan_.states.begin(), scan_.states.end());
  for (const Instr &in : s.body) {
    if (stores && in.store >= 0) written.insert(in.store);
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Load && !(states.count(o.buffer) && o.delay == s_.direction)) loads.insert({o.buffer, o.delay});
  }
  for (auto [buffer, delay] : loads) {
    const Buffer &b = p_.buffers[static_cast<size_t>(buffer)];
    w.line("const {} *__restrict__ {} = ws.{} + {};", elementType(b), rowPointer(buffer, delay), b.name,
           rowOffset(b, delay, "q"));
  }
  for (int buffer : written) {
    const Buffer &b = p_.buffers[static_cast<size_t>(buffer)];
    w.line("real *__restrict__ {} = ws.{} + {};", rowPointer(buffer, 0), b.name, rowOffset(b, 0, "q"));
  }
}

/// The step's tangent at element i of row q, from a zero state or (Newton)
/// from the guess of the step before: a_P_Q and f_P (CPrinter::tangentStep).
void CudaScanPrinter::tangent(Writer &w, bool atGuess) {
  rowPointers(w, scan_.step, false);
  if (atGuess)
    for (int b : scan_.states) {
      const Buffer &buf = p_.buffers[static_cast<size_t>(b)];
      w.line("const real *__restrict__ {} = ws.{} + {};", rowPointer(b, s_.direction), buf.name,
             rowOffset(buf, s_.direction, "q"));
    }
  for (int64_t p = 0; p < k_; ++p) {
    if (!atGuess) w.line("const real s{} = real(0);", p);
    else w.line("const real s{} = {}[i];", p, rowPointer(scan_.states[static_cast<size_t>(p)], s_.direction));
  }
  w.raw(tangentStep(scan_, s_.direction, w.pad()));
}

/// The loop's own step at element i of row q from the states s[], storing
/// what its kernels store; s[] then holds the new states.
void CudaScanPrinter::exactStep(Writer &w) {
  rowPointers(w, scan_.exactStep, true);
  row_ = "q";
  substitutes_.clear();
  for (size_t p = 0; p < scan_.states.size(); ++p) substitutes_[{scan_.states[p], s_.direction}] = fmt::format("s[{}]", p);
  for (size_t j = 0; j < scan_.exactStep.body.size(); ++j) {
    const Instr &in = scan_.exactStep.body[j];
    w.line("const real v{} = {};", j, mapExpr(in));
    if (in.store >= 0) w.line("{}[i] = v{};", rowPointer(in.store, 0), j);
  }
  substitutes_.clear();
  row_ = "r";
  for (size_t p = 0; p < scan_.states.size(); ++p) w.line("s[{}] = v{};", p, scan_.exactStateLocals[p]);
}

/// `const Affine<K> step = ` the tangent's map (a_P_Q, f_P); Newton's is
/// linearized at s: b = f - A s.
void CudaScanPrinter::stepMap(Writer &w) const {
  std::string A, b;
  for (int64_t p = 0; p < k_; ++p) {
    std::string row, minus;
    for (int64_t q = 0; q < k_; ++q) {
      row += fmt::format("{}a_{}_{}", q ? ", " : "", p, q);
      if (newton()) minus += fmt::format(" - a_{}_{} * s{}", p, q, q);
    }
    A += fmt::format("{}{{{}}}", p ? ", " : "", row);
    b += fmt::format("{}f_{}{}", p ? ", " : "", p, minus);
  }
  w.line("const Affine<K> step = {{{{{}}}, {{{}}}}};", A, b);
}

/// `const Affine<K> step = ` the coefficients of row q (Newton).
void CudaScanPrinter::coefficientMap(Writer &w) const {
  const Buffer &coef = p_.buffers[static_cast<size_t>(scan_.coefficients)];
  w.line("const real *__restrict__ coefficients = ws.{} + {} + i;", coef.name, rowOffset(coef, 0, "q"));
  std::string A, b;
  for (int64_t p = 0; p < k_; ++p) {
    std::string row;
    for (int64_t q = 0; q < k_; ++q) row += fmt::format("{}coefficients[{}]", q ? ", " : "", (p * k_ + q) * n_);
    A += fmt::format("{}{{{}}}", p ? ", " : "", row);
    b += fmt::format("{}coefficients[{}]", p ? ", " : "", (k_ * k_ + p) * n_);
  }
  w.line("const Affine<K> step = {{{{{}}}, {{{}}}}};", A, b);
}

/// Map `map` stored coefficient-major at `base` (a pointer at element i).
void CudaScanPrinter::storeMap(Writer &w, const std::string &map, const std::string &base) const {
  for (int64_t p = 0; p < k_; ++p) {
    for (int64_t q = 0; q < k_; ++q) w.line("{}[{}] = {}.A[{}][{}];", base, (p * k_ + q) * n_, map, p, q);
    w.line("{}[{}] = {}.b[{}];", base, (k_ * k_ + p) * n_, map, p);
  }
}

/// `for (int64_t j = run.begin; j < run.end; ++j) {` over this thread's run
/// and the step's t and row q, opened.
void CudaScanPrinter::openRun(Writer &w) const {
  w.open("for (int64_t j = run.begin; {}j < run.end; ++j) {{", n_ % elements_ ? "active && " : "");
  w.line("const int64_t t = {}, q = t * B + r;", stepAt("j"));
}

/// The grid-stride loop over every element of every sequence, opened: r, i.
void CudaScanPrinter::openElements(Writer &w, const char *count) const {
  w.open("for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < {}{}; e += int64_t(gridDim.x) * blockDim.x) {{",
         count, n_);
}

namespace {

/// The scan kernels' parameters after the workspace (P: the model's params, in its storage type).
std::string scanParams(const Program &p) {
  return fmt::format("const {} *__restrict__ P, int64_t T, int64_t B, int64_t chunks", portType(p));
}

/// `(void)P;`-style lines for the parameters `body` does not use.
std::string unused(const std::string &body, const std::vector<std::string> &params) {
  std::string names;
  for (const std::string &p : params)
    if (!uses(body, p)) names += (names.empty() ? "(void)" : ", (void)") + p;
  return names.empty() ? "" : "  " + names + ";\n";
}

std::string finish(const std::string &head, Writer &body) {
  std::string text = body.take();
  return head + unused(text, {"P", "T", "B", "chunks"}) + text + "}\n";
}

} // namespace

std::string CudaScanPrinter::chunksKernel() {
  const Buffer &agg = p_.buffers[static_cast<size_t>(scan_.aggregates)];
  const std::string act = n_ % elements_ ? "active && " : "";
  std::string head = header("chunks", "each chunk's steps but the last chunk's, composed into one affine map per element", scanParams(p_));
  Writer w(1);
  blockLoop(w, "(chunks - 1) * groups");
  w.line("// This thread's run of steps, each an affine map at a zero state (rnnc's tangent), composed in registers.");
  w.line("Affine<K> steps = affine_identity<K>();");
  openRun(w);
  tangent(w, false);
  stepMap(w);
  w.line("steps = compose(step, steps);").close();
  w.line("const Affine<K> chunk = block_total<K, E>(steps);");
  w.open("if ({}threadIdx.x < E) {{ // time-lane 0 keeps the chunk's map", act);
  w.line("real *__restrict__ aggregate = ws.{} + (c * B + r) * {} + i;", agg.name, n_ * (k_ * k_ + k_));
  storeMap(w, "chunk", "aggregate");
  w.close().close();
  return finish(head, w);
}

std::string CudaScanPrinter::carriesKernel() {
  const Buffer &agg = p_.buffers[static_cast<size_t>(scan_.aggregates)];
  const Buffer &car = p_.buffers[static_cast<size_t>(scan_.carries)];
  std::string head = header("carries", "the state before each chunk: the one before the loop, then each chunk's map in turn", scanParams(p_));
  Writer w(1);
  w.line("constexpr int K = {};", k_);
  openSequenceStates(w);
  w.line("// Unrolled, the chunks' maps load ahead of the dependent chain through them.").line("#pragma unroll 4");
  w.open("for (int64_t c = 1; c < chunks; ++c) {{");
  w.line("const real *__restrict__ aggregate = ws.{} + ((c - 1) * B + r) * {} + i;", agg.name, n_ * (k_ * k_ + k_));
  std::string A, b;
  for (int64_t p = 0; p < k_; ++p) {
    std::string row;
    for (int64_t q = 0; q < k_; ++q) row += fmt::format("{}aggregate[{}]", q ? ", " : "", (p * k_ + q) * n_);
    A += fmt::format("{}{{{}}}", p ? ", " : "", row);
    b += fmt::format("{}aggregate[{}]", p ? ", " : "", (k_ * k_ + p) * n_);
  }
  w.line("const Affine<K> chunk = {{{{{}}}, {{{}}}}};", A, b);
  w.line("apply(chunk, s);");
  w.line("real *__restrict__ carry = ws.{} + (c * B + r) * {} + i;", car.name, n_ * k_);
  for (int64_t p = 0; p < k_; ++p) w.line("carry[{}] = s[{}];", p * n_, p);
  w.close().close();
  return finish(head, w);
}

std::string CudaScanPrinter::stepsKernel() {
  std::string head = header("steps", "each thread's run of steps from its exact incoming state, storing what the loop's kernels store",
                            scanParams(p_));
  Writer w(1);
  blockLoop(w, "chunks * groups");
  w.line("// This thread's run of steps as one affine map (as in scan_{}_chunks), and those", stage_);
  w.line("// of the runs before it in the chunk.");
  w.line("Affine<K> steps = affine_identity<K>();");
  openRun(w);
  tangent(w, false);
  stepMap(w);
  w.line("steps = compose(step, steps);").close();
  w.line("const Affine<K> before = block_scan<K, E>(steps);");
  w.line("// The state before the run: the one before the chunk (before the loop, or the carry), then the runs before it.");
  chunkStart(w);
  w.line("apply(before, s);");
  w.line("// The loop's own step over the run: every value its kernels store, at every step.");
  openRun(w);
  exactStep(w);
  w.close().close();
  return finish(head, w);
}

std::string CudaScanPrinter::guessKernel() {
  std::string head = header("guess", "Newton's first guess: the state before the loop, at every step", scanParams(p_));
  Writer w(1);
  openElements(w, "T * B * ");
  w.line("const int64_t row = e / {}, r = row % B, i = e % {};", n_, n_);
  w.line("const int64_t q = {};", s_.direction > 0 ? "r" : "(T - 1) * B + r");
  for (int b : scan_.states) {
    const Buffer &buf = p_.buffers[static_cast<size_t>(b)];
    w.line("const real *__restrict__ {} = ws.{} + {};", rowPointer(b, s_.direction), buf.name, rowOffset(buf, s_.direction, "q"));
    w.line("real *__restrict__ {} = ws.{} + {};", rowPointer(b, 0), buf.name, rowOffset(buf, 0, "row"));
    w.line("{}[i] = {}[i];", rowPointer(b, 0), rowPointer(b, s_.direction));
  }
  w.close();
  return finish(head, w);
}

std::string CudaScanPrinter::linearizeKernel() {
  const Buffer &agg = p_.buffers[static_cast<size_t>(scan_.aggregates)];
  const std::string act = n_ % elements_ ? "active && " : "";
  std::string head = header("linearize",
                            "each step linearized at the guess into the coefficients; each chunk's but the last composed", scanParams(p_));
  Writer w(1);
  blockLoop(w, "chunks * groups");
  w.line("// This thread's run of steps linearized at the guess, x -> A x + (f - A guess), composed in registers.");
  w.line("Affine<K> steps = affine_identity<K>();");
  openRun(w);
  tangent(w, true);
  stepMap(w);
  const Buffer &coef = p_.buffers[static_cast<size_t>(scan_.coefficients)];
  w.line("real *__restrict__ coefficients = ws.{} + {} + i;", coef.name, rowOffset(coef, 0, "q"));
  storeMap(w, "step", "coefficients");
  w.line("steps = compose(step, steps);").close();
  w.open("if (c + 1 < chunks) {{ // the last chunk's map is never needed");
  w.line("const Affine<K> chunk = block_total<K, E>(steps);");
  w.open("if ({}threadIdx.x < E) {{ // time-lane 0 keeps the chunk's map", act);
  w.line("real *__restrict__ aggregate = ws.{} + (c * B + r) * {} + i;", agg.name, n_ * (k_ * k_ + k_));
  storeMap(w, "chunk", "aggregate");
  w.close().close().close();
  return finish(head, w);
}

std::string CudaScanPrinter::solveKernel() {
  std::string head = header("solve", "the linear recurrence of the coefficients solved from each run's incoming state: the next guess",
                            scanParams(p_));
  Writer w(1);
  blockLoop(w, "chunks * groups");
  w.line("Affine<K> steps = affine_identity<K>();");
  openRun(w);
  coefficientMap(w);
  w.line("steps = compose(step, steps);").close();
  w.line("const Affine<K> before = block_scan<K, E>(steps);");
  chunkStart(w);
  w.line("apply(before, s);");
  openRun(w);
  coefficientMap(w);
  w.line("apply(step, s);");
  for (size_t p = 0; p < scan_.states.size(); ++p) {
    const Buffer &buf = p_.buffers[static_cast<size_t>(scan_.states[p])];
    w.line("real *__restrict__ {} = ws.{} + {};", rowPointer(scan_.states[p], 0), buf.name, rowOffset(buf, 0, "q"));
    w.line("{}[i] = s[{}];", rowPointer(scan_.states[p], 0), p);
  }
  w.close().close();
  return finish(head, w);
}

std::string CudaScanPrinter::newtonStepsKernel() {
  const Buffer &agg = p_.buffers[static_cast<size_t>(scan_.aggregates)];
  const std::string act = n_ % elements_ ? "active && " : "";
  // With no iteration the guess is the state before the loop everywhere, and no carry was computed.
  const bool carried = scan_.iterations > 0;
  std::string head = header("steps",
                            "the loop's own steps from the guess at each run's start; how far each run's end lands from the "
                            "guess the next run starts from",
                            scanParams(p_));
  Writer w(1);
  blockLoop(w, "chunks * groups");
  w.line("// The guess this run starts from, and the one the next run starts from (a chunk's first run starts");
  w.line("// from the chunk's carry: the row before it is another block's).");
  w.line("real s[K] = {{}}, next[K] = {{}};");
  w.line("const bool compared = run.begin < run.end && (run.end < run.last || c + 1 < chunks);");
  w.open("if ({}run.begin < run.end) {{", act);
  w.open("if (run.begin > run.first) {{").line("const int64_t q = ({}) * B + r;", stepAt("run.begin - 1"));
  stateRowsAt(w, 0, "s");
  if (carried) {
    w.close("}} else if (c > 0) {{").indent();
    carryLoad(w, "c", "s");
  }
  w.close("}} else {{").indent();
  initialStates(w, "s");
  w.close();
  w.open("if (run.end < run.last) {{").line("const int64_t q = ({}) * B + r;", stepAt("run.end - 1"));
  stateRowsAt(w, 0, "next");
  w.close("}} else if (c + 1 < chunks) {{").indent();
  if (carried) carryLoad(w, "c + 1", "next");
  else initialStates(w, "next");
  w.close().close();
  w.line("__syncthreads(); // every run has read its guesses before any step overwrites them");
  openRun(w);
  exactStep(w);
  w.close();
  w.line("real gap = real(0); // NaN counts as infinitely far");
  w.line("if ({}compared)", act).indent().open("for (int p = 0; p < K; ++p) {{");
  w.line("const real d = math::fabs(s[p] - next[p]) / (real(1) + math::fabs(s[p]));");
  w.line("if (!(d <= gap)) gap = d == d ? d : real(INFINITY);").close().dedent();
  w.line("gap = block_max(gap);");
  w.line("real *__restrict__ residual = ws.{}; // [0]: the largest gap, [1 + block]: each block's", agg.name);
  w.line("if (threadIdx.x == 0) residual[1 + block] = gap;").close();
  return finish(head, w);
}

std::string CudaScanPrinter::residualKernel() {
  const Buffer &agg = p_.buffers[static_cast<size_t>(scan_.aggregates)];
  std::string head = header("residual", "the largest gap newton_" + std::to_string(stage_) + "_steps measured, one block", scanParams(p_));
  Writer w(1);
  w.line("real *__restrict__ residual = ws.{}; // [0]: the largest gap, [1 + block]: each block's", agg.name);
  w.line("real top = real(0);");
  w.line("for (int64_t block = threadIdx.x; block < chunks * B * {}; block += blockDim.x)", groups_);
  w.indent().line("top = math::max(top, residual[1 + block]);").dedent();
  w.line("top = block_max(top);").line("if (threadIdx.x == 0) residual[0] = top;");
  return finish(head, w);
}

std::string CudaScanPrinter::serialKernel() {
  const Buffer &agg = p_.buffers[static_cast<size_t>(scan_.aggregates)];
  std::string head = header("serial", "where Newton did not converge, the loop again: one thread per element, step by step", scanParams(p_));
  Writer w(1);
  w.line("const real *__restrict__ residual = ws.{};", agg.name);
  w.line("if (residual[0] <= newton_tolerance()) return; // Newton's answer stands");
  w.line("constexpr int K = {};", k_);
  openSequenceStates(w);
  w.line("// Unrolled, the steps' loads issue ahead of the dependent chain through the states.").line("#pragma unroll 4");
  w.open("for (int64_t j = 0; j < T; ++j) {{").line("const int64_t t = {}, q = t * B + r;", stepAt("j"));
  exactStep(w);
  w.close().close();
  return finish(head, w);
}

std::string CudaScanPrinter::kernels() {
  std::string out;
  if (newton())
    for (const std::string &k : {guessKernel(), linearizeKernel(), carriesKernel(), solveKernel(), newtonStepsKernel(),
                                 residualKernel(), serialKernel()})
      out += k + "\n";
  else
    for (const std::string &k : {chunksKernel(), carriesKernel(), stepsKernel()}) out += k + "\n";
  return out;
}

std::string CudaScanPrinter::launchers(const std::function<int(const std::string &)> &kernelIndex) const {
  // Blocks of each pass: a (chunk, group of elements) pair each, or 256
  // elements of every sequence (the carries, the serial loop), or 256 of
  // every step (the guess), or one (the residual).
  const std::map<std::string, std::pair<std::string, std::string>> blocks = {
      {"chunks", {fmt::format("(chunks - 1) * B * {}", groups_), "a block per chunk but the last, per group of elements"}},
      {"steps", {fmt::format("chunks * B * {}", groups_), "a block per chunk and group of elements"}},
      {"linearize", {fmt::format("chunks * B * {}", groups_), "a block per chunk and group of elements"}},
      {"solve", {fmt::format("chunks * B * {}", groups_), "a block per chunk and group of elements"}},
      {"carries", {fmt::format("(B * {} + 255) / 256", n_), "a thread per element of every sequence"}},
      {"serial", {fmt::format("(B * {} + 255) / 256", n_), "a thread per element of every sequence"}},
      {"guess", {fmt::format("(T * B * {} + 255) / 256", n_), "a thread per element of every step"}},
      {"residual", {"1", "one block"}},
  };
  Writer w;
  for (const std::string &k : kernelNames(p_, stage_)) {
    const auto &[grid, what] = blocks.at(k.substr(k.rfind('_') + 1));
    w.line("/// {}: the kernel, {}.", k, what);
    w.open("int launch_{}(const Workspace &ws, const {} *P, int64_t T, int64_t B, int64_t chunks, cudaStream_t s) {{", k,
           portType(p_));
    w.line("return launch(kernel_[{}], \"{}\", scan_grid({}), {}, s, ws, P, T, B, chunks) ? 0 : 1;", kernelIndex(k), k, grid,
           kScanThreads);
    w.close().blank();
  }
  return w.take();
}

std::string CudaScanPrinter::stageFunction() const {
  // The cost model's inputs (rnnc/cuda.h, scan_chunks): reals each pass
  // loads and stores per element and step.
  std::set<std::pair<int, int32_t>> exactLoads, tangentLoads;
  std::set<int> stores, states(scan_.states.begin(), scan_.states.end());
  for (const Instr &in : scan_.exactStep.body) {
    if (in.store >= 0) stores.insert(in.store);
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Load && !o.scalar && !(states.count(o.buffer) && o.delay == s_.direction))
        exactLoads.insert({o.buffer, o.delay});
  }
  for (const Instr &in : scan_.step.body)
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Load && !o.scalar && !(states.count(o.buffer) && o.delay == s_.direction))
        tangentLoads.insert({o.buffer, o.delay});
  const int64_t exact = static_cast<int64_t>(exactLoads.size() + stores.size()), tl = static_cast<int64_t>(tangentLoads.size());
  const int64_t coefficients = k_ * k_ + k_;
  const int64_t stepWords = exact + k_; // the steps also read the states one step back
  int64_t words = 0, launches = 0;
  if (newton()) {
    words = k_ + scan_.iterations * (tl + k_ + coefficients + 2 * coefficients + k_) + exact;
    launches = 1 + 3 * scan_.iterations + 3;
  } else {
    words = 2 * tl + exact;
    launches = 3;
  }
  Writer w;
  w.line("/// Stage {}{}: a loop over time, t = {}, {} (docs/cuda.md).", stage_, s_.backward ? " (backward)" : "",
         s_.direction > 0 ? "0 .. T-1" : "T-1 .. 0",
         newton() ? "by Newton iterations of parallel scans" : "as a parallel scan");
  w.open("int stage_{}(const Workspace &ws, const {} *P, real *G, int64_t T, int64_t B, cudaStream_t s, "
         "cublasHandle_t blas) {{",
         stage_, portType(p_));
  w.line("// The cost model's inputs: elements of a state; groups of elements and time-lanes per block; the");
  w.line("// launches and reals per element-step of the loop step by step, then of the parallel passes.");
  w.line("constexpr ScanShape kShape = {{{}, {}, {}, {}, {}, {}, {}}};", n_, groups_, kScanThreads / elements_,
         s_.kernels.size(), stepWords, launches, words);
  w.line("const int64_t chunks = scan_chunks(T, B, kShape, {}, sizeof(real));", scan_.guarded);
  w.open("if (chunks < 1) {{ // the loop, step by step: {}",
         scan_.guarded ? "the cost model expects it to be faster, or RNNC_TIME_PARALLEL=off"
                       : "RNNC_TIME_PARALLEL=off, or no step");
  stageLaunches(w, p_, s_, [](const KernelIR &k, const std::string &rows) {
    return fmt::format("if (launch_{}(ws, P, G, B, {}, s, blas)) return 1;", k.name, rows);
  });
  w.line("return 0;").close();
  auto call = [&](const char *pass) { return fmt::format("launch_{}(ws, P, T, B, chunks, s)", name(pass)); };
  if (newton()) {
    w.line("if ({}) return 1;", call("guess"));
    w.open("for (int iteration = 0; iteration < {}; ++iteration) {{", scan_.iterations);
    w.line("if ({}) return 1;", call("linearize"));
    w.line("if (chunks > 1 && {}) return 1;", call("carries"));
    w.line("if ({}) return 1;", call("solve")).close();
    w.line("if ({}) return 1;", call("steps"));
    w.line("if ({}) return 1;", call("residual"));
    w.line("if ({}) return 1; // only where Newton did not converge", call("serial"));
    const Buffer &agg = p_.buffers[static_cast<size_t>(scan_.aggregates)];
    w.line("// RNNC_SCAN_REPORT: whether Newton's answer stood (a copy back, so not inside a captured graph).");
    w.line("if (!kCudaGraphs && newton_report(\"{} stage {}\", {}, ws.{}, s)) return 1;", s_.backward ? "backward" : "forward",
           stageOrdinal(p_, stage_), scan_.iterations, agg.name);
  } else {
    w.open("if (chunks > 1) {{");
    w.line("if ({}) return 1;", call("chunks"));
    w.line("if ({}) return 1;", call("carries")).close();
    w.line("if ({}) return 1;", call("steps"));
  }
  return w.line("return 0;").close().take();
}

} // namespace rnnc::codegen
