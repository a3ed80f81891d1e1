// A scan stage prints as
//   chunks = scan_chunks(T, ...)       (< 2: the loop step by step, as without a plan)
//   1. per chunk but the last, per row, per element: the step's coefficients
//      at a zero state (tangentStep) composed over the chunk's steps;
//   2. the state before each chunk: the one before the first step, then each
//      chunk's composed map in turn (cheap: chunks · B · n);
//   3. per chunk: the loop's own kernels over its steps, from that state; all
//      but each chunk's last step first, since the next chunk starts by
//      reading the state there, then the last steps.
// A Newton stage linearizes the step around a guess of every step (at first
// the state before the first step, everywhere), solves the linear recurrence
// with 1-2 and a pass like 3 over the stored coefficients, `iterations`
// times; then runs 3 from the guess at the chunk boundaries and compares each
// chunk's exact end with the guess the next chunk started from: past the
// tolerance the loop runs again step by step.
#include "codegen/CppScan.h"

#include "codegen/ScanIR.h"

#include <fmt/format.h>
#include <set>

namespace rnnc::codegen {

namespace {

/// Row r of the step at loop position `j`: "j * B + r", "(T - 1 - j) * B + r".
std::string rowAt(int direction, const std::string &j) {
  std::string t = stepAt(direction, j);
  if (t == "0") return "r";
  bool simple = t.find(' ') == std::string::npos;
  return fmt::format(simple ? "{} * B + r" : "({}) * B + r", t);
}

} // namespace

CppScanPrinter::CppScanPrinter(const Program &p, const SourceManager &sm) : CppPrinter(p, sm) {
  for (const StageIR &s : p.stages)
    if (s.loop && s.scan.plan != LoopPlan::Sequential)
      for (int k : s.kernels) inParallelLoops_.insert(&p.kernels[k]);
}

bool CppScanPrinter::rowsInParallel(const KernelIR &k) const { return !inParallelLoops_.count(&k); }

std::string CppScanPrinter::functionName(const StageIR &s, int index) { return scanName(s, index); }

void CppScanPrinter::stepCalls(Writer &w, const StageIR &s, const std::string &t) const {
  for (int k : s.kernels) w.line("{}(ws, P, G, B, {} * B, ({} + 1) * B);", p_.kernels[k].name, t, t);
}

void CppScanPrinter::loadPointers(Writer &w, const ScanIR &scan, int direction, bool states) const {
  std::set<std::pair<int, int32_t>> loads;
  std::set<int> stateSet(scan.states.begin(), scan.states.end());
  for (const Instr &in : scan.step.body)
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Load && (states || !(stateSet.count(o.buffer) && o.delay == direction)))
        loads.insert({o.buffer, o.delay});
  if (states)
    for (int b : scan.states) loads.insert({b, direction});
  for (auto [buffer, delay] : loads) {
    const Buffer &b = p_.buffers[buffer];
    w.line("const {} *{} = ws.{} + {};", elementType(b), rowPointer(buffer, delay), b.name, rowOffset(b, delay, "q"));
  }
}

/// acc (A then b, coefficient-major over n elements) := (a, f) ∘ acc.
void CppScanPrinter::compose(Writer &w, const ScanIR &scan, const std::string &acc) const {
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  auto A = [&](size_t p, size_t q) { return fmt::format("{}[{} + i]", acc, (p * k + q) * n); };
  auto b = [&](size_t p) { return fmt::format("{}[{} + i]", acc, (k * k + p) * n); };
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) w.line("const real A_{}_{} = {};", p, q, A(p, q));
    w.line("const real b_{} = {};", p, b(p));
  }
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) {
      std::string sum;
      for (size_t m = 0; m < k; ++m) sum += fmt::format("{}a_{}_{} * A_{}_{}", m ? " + " : "", p, m, m, q);
      w.line("{} = {};", A(p, q), sum);
    }
    std::string sum;
    for (size_t m = 0; m < k; ++m) sum += fmt::format("a_{}_{} * b_{} + ", p, m, m);
    w.line("{} = {}f_{};", b(p), sum, p);
  }
}

/// `#pragma omp simd` and the loop over a row's n elements, opened.
void CppScanPrinter::openElements(Writer &w, int64_t n) const { w.raw(elementLoop(n, w.pad())).indent(); }

/// 2: the carries, from the state before the first step and the aggregates;
/// `intoState`: also written to the state buffers before each chunk.
void CppScanPrinter::carries(Writer &w, const StageIR &s, bool intoState, const std::string &label) const {
  const ScanIR &scan = s.scan;
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  const int64_t W = n * static_cast<int64_t>(k * k + k), nk = n * static_cast<int64_t>(k);
  const Buffer &agg = p_.buffers[scan.aggregates];
  const Buffer &car = p_.buffers[scan.carries];
  w.line("// {} The state before each chunk: the one before the first step, then each chunk's map in turn.", label);
  w.open("for (int64_t r = 0; r < B; ++r) {{");
  w.line("const int64_t q = {};", rowAt(s.direction, "0"));
  w.line("real *carry = ws.{} + r * {};", car.name, nk);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    w.line("std::copy_n(ws.{} + {}, {}, carry + {});", b.name, rowOffset(b, s.direction, "q"), n, p * n);
  }
  w.close();
  w.line("for (int64_t c = 1; c < chunks; ++c)").indent().open("for (int64_t r = 0; r < B; ++r) {{");
  w.line("const real *acc = ws.{} + ((c - 1) * B + r) * {};", agg.name, W);
  w.line("const real *from = ws.{} + ((c - 1) * B + r) * {};", car.name, nk);
  w.line("real *to = ws.{} + (c * B + r) * {};", car.name, nk);
  openElements(w, n);
  for (size_t p = 0; p < k; ++p) {
    std::string sum;
    for (size_t q = 0; q < k; ++q) sum += fmt::format("acc[{} + i] * from[{} + i] + ", (p * k + q) * n, q * n);
    w.line("to[{} + i] = {}acc[{} + i];", p * n, sum, (k * k + p) * n);
  }
  w.close().close().dedent();
  if (!intoState) return;
  w.line("for (int64_t c = 1; c < chunks; ++c)").indent().open("for (int64_t r = 0; r < B; ++r) {{");
  w.line("const int64_t q = {};", rowAt(s.direction, "first(c)"));
  w.line("const real *carry = ws.{} + (c * B + r) * {};", car.name, nk);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    w.line("std::copy_n(carry + {}, {}, ws.{} + {});", p * n, n, b.name, rowOffset(b, s.direction, "q"));
  }
  w.close().dedent();
}

/// The loop step by step: one thread team for all steps (when a step has
/// the work for one), a step's rows split across it.
void CppScanPrinter::sequentialLoop(Writer &w, const StageIR &s) const {
  int64_t work = 0;
  for (int k : s.kernels)
    for (const Sweep &sw : p_.kernels[k].sweeps) work += sw.width * static_cast<int64_t>(sw.body.size());
  w.line("// The loop, step by step; a step's rows across threads when it has the work.");
  w.open("if (B * {} < kParallelWork) {{", work);
  w.open("for (int64_t j = 0; j < T; ++j) {{").line("const int64_t t = {};", stepAt(s.direction, "j"));
  stepCalls(w, s, "t");
  w.close().close("}} else {{").indent();
  w.line("#pragma omp parallel");
  w.open("for (int64_t j = 0; j < T; ++j) {{").line("const int64_t t = {};", stepAt(s.direction, "j"));
  for (int k : s.kernels) {
    w.line("#pragma omp for");
    w.line("for (int64_t r = t * B; r < (t + 1) * B; ++r) {}(ws, P, G, B, r, r + 1);", p_.kernels[k].name);
  }
  w.close().close();
}

/// 3: each chunk's steps by the loop's kernels; all but the last step of each
/// chunk, then the last steps.
void CppScanPrinter::chunkSteps(Writer &w, const StageIR &s) const {
  w.line("#pragma omp parallel for").line("for (int64_t c = 0; c < chunks; ++c)").indent();
  w.open("for (int64_t j = first(c); j < first(c + 1) - 1; ++j) {{").line("const int64_t t = {};", stepAt(s.direction, "j"));
  stepCalls(w, s, "t");
  w.close().dedent();
}

/// Each chunk's last step, the chunks side by side.
void CppScanPrinter::lastSteps(Writer &w, const StageIR &s) const {
  w.line("#pragma omp parallel for");
  w.open("for (int64_t c = 0; c < chunks; ++c) {{").line("const int64_t t = {};", stepAt(s.direction, "first(c + 1) - 1"));
  stepCalls(w, s, "t");
  w.close();
}

/// Per chunk but the last, per row: its steps' maps composed into the
/// aggregates. `step` declares a_P_Q and f_P at element i of row q (inside the
/// element loop), after `setup` (before it: row pointers).
void CppScanPrinter::composeChunks(Writer &w, const StageIR &s, const std::function<void(Writer &)> &setup,
                                   const std::function<void(Writer &)> &step) const {
  const ScanIR &scan = s.scan;
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  const int64_t W = n * static_cast<int64_t>(k * k + k);
  w.line("#pragma omp parallel for collapse(2)").line("for (int64_t c = 0; c < chunks - 1; ++c)").indent();
  w.open("for (int64_t r = 0; r < B; ++r) {{");
  w.line("real *acc = ws.{} + (c * B + r) * {};", p_.buffers[scan.aggregates].name, W);
  openElements(w, n);
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) w.line("acc[{} + i] = real({});", (p * k + q) * n, p == q ? 1 : 0);
    w.line("acc[{} + i] = real(0);", (k * k + p) * n);
  }
  w.close();
  w.open("for (int64_t j = first(c); j < first(c + 1); ++j) {{").line("const int64_t q = {};", rowAt(s.direction, "j"));
  setup(w);
  openElements(w, n);
  step(w);
  compose(w, scan, "acc");
  w.close().close().close().dedent();
}

void CppScanPrinter::scanBody(Writer &w, const StageIR &s) {
  const ScanIR &scan = s.scan;
  w.line("// 1. Each chunk's steps but the last chunk's, composed: state after = A state before + b.");
  composeChunks(
      w, s, [&](Writer &in) { loadPointers(in, scan, s.direction, false); },
      [&](Writer &in) {
        for (size_t p = 0; p < scan.states.size(); ++p) in.line("const real s{} = real(0);", p);
        in.raw(tangentStep(scan, s.direction, in.pad()));
      });
  carries(w, s, true, "2.");
  w.line("// 3. Each chunk's steps from the state before it: all but each chunk's last step (the next chunk");
  w.line("//    starts by reading the state there), then the last steps.");
  chunkSteps(w, s);
  lastSteps(w, s);
}

void CppScanPrinter::newtonBody(Writer &w, const StageIR &s, int index) {
  const ScanIR &scan = s.scan;
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  const int64_t W = n * static_cast<int64_t>(k * k + k), nk = n * static_cast<int64_t>(k);
  const Buffer &car = p_.buffers[scan.carries];
  const Buffer &coef = p_.buffers[scan.coefficients];
  w.line("// The first guess: the state before the first step, at every step.");
  w.line("#pragma omp parallel for collapse(2)").line("for (int64_t t = 0; t < T; ++t)").indent();
  w.open("for (int64_t r = 0; r < B; ++r) {{").line("const int64_t q0 = {}, q = t * B + r;", rowAt(s.direction, "0"));
  for (int b : scan.states) {
    const Buffer &buf = p_.buffers[b];
    w.line("std::copy_n(ws.{} + {}, {}, ws.{} + {});", buf.name, rowOffset(buf, s.direction, "q0"), n, buf.name,
           rowOffset(buf, 0, "q"));
  }
  w.close().dedent();
  w.open("for (int iteration = 0; iteration < {}; ++iteration) {{", scan.iterations);
  // Linearize.
  w.line("// a. Each step linearized at the guess: state_t = A_t state_t-1 + b_t, b_t = f(guess) - A_t guess.");
  w.line("#pragma omp parallel for collapse(2)").line("for (int64_t t = 0; t < T; ++t)").indent();
  w.open("for (int64_t r = 0; r < B; ++r) {{").line("const int64_t q = t * B + r;");
  loadPointers(w, scan, s.direction, true);
  w.line("real *cf = ws.{} + q * {};", coef.name, W);
  openElements(w, n);
  for (size_t p = 0; p < k; ++p) w.line("const real s{} = {}[i];", p, rowPointer(scan.states[p], s.direction));
  w.raw(tangentStep(scan, s.direction, w.pad()));
  for (size_t p = 0; p < k; ++p) {
    std::string linear;
    for (size_t q = 0; q < k; ++q) {
      w.line("cf[{} + i] = a_{}_{};", (p * k + q) * n, p, q);
      linear += fmt::format(" - a_{}_{} * s{}", p, q, q);
    }
    w.line("cf[{} + i] = f_{}{};", (k * k + p) * n, p, linear);
  }
  w.close().close().dedent();
  w.line("// b. Each chunk's linear steps but the last chunk's, composed.");
  composeChunks(
      w, s, [&](Writer &in) { in.line("const real *cf = ws.{} + q * {};", coef.name, W); },
      [&](Writer &in) {
        for (size_t p = 0; p < k; ++p) {
          for (size_t q = 0; q < k; ++q) in.line("const real a_{}_{} = cf[{} + i];", p, q, (p * k + q) * n);
          in.line("const real f_{} = cf[{} + i];", p, (k * k + p) * n);
        }
      });
  carries(w, s, false, "c.");
  // The new guess.
  w.line("// d. The new guess: each chunk's linear steps from the state before it.");
  w.line("#pragma omp parallel for collapse(2)").line("for (int64_t c = 0; c < chunks; ++c)").indent();
  w.line("for (int64_t r = 0; r < B; ++r)").indent();
  w.open("for (int64_t j = first(c); j < first(c + 1); ++j) {{").line("const int64_t q = {};", rowAt(s.direction, "j"));
  w.line("const real *cf = ws.{} + q * {};", coef.name, W);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    w.line("real *x{} = ws.{} + {};", p, b.name, rowOffset(b, 0, "q"));
    w.line("const real *before{} = j == first(c) ? ws.{} + (c * B + r) * {} + {} : ws.{} + {};", p, car.name, nk, p * n,
           b.name, rowOffset(b, s.direction, "q"));
  }
  openElements(w, n);
  for (size_t p = 0; p < k; ++p) {
    std::string sum;
    for (size_t q = 0; q < k; ++q) sum += fmt::format("cf[{} + i] * before{}[i] + ", (p * k + q) * n, q);
    w.line("const real x{}_new = {}cf[{} + i];", p, sum, (k * k + p) * n);
  }
  for (size_t p = 0; p < k; ++p) w.line("x{}[i] = x{}_new;", p, p);
  w.close().close().dedent().dedent().close();
  // The exact steps and the residual check.
  w.line("// The exact steps from the guess before each chunk; then each chunk's exact end against the guess");
  w.line("// the next chunk started from.");
  chunkSteps(w, s);
  w.line("for (int64_t c = 0; c + 1 < chunks; ++c)").indent();
  w.open("for (int64_t r = 0; r < B; ++r) {{").line("const int64_t q = {};", rowAt(s.direction, "first(c + 1) - 1"));
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    w.line("std::copy_n(ws.{} + {}, {}, ws.{} + (c * B + r) * {} + {});", b.name, rowOffset(b, 0, "q"), n, car.name, nk,
           p * n);
  }
  w.close().dedent();
  lastSteps(w, s);
  w.line("double residual = 0;");
  w.line("for (int64_t c = 0; c + 1 < chunks; ++c)").indent();
  w.open("for (int64_t r = 0; r < B; ++r) {{").line("const int64_t q = {};", rowAt(s.direction, "first(c + 1) - 1"));
  w.line("const real *guess = ws.{} + (c * B + r) * {};", car.name, nk);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    w.line("residual = std::max(residual, relative_gap(ws.{} + {}, guess + {}, {}));", b.name, rowOffset(b, 0, "q"), p * n,
           n);
  }
  w.close().dedent();
  w.line("if (newton_kept(\"{} stage {}\", {}, residual, sizeof(real))) return;", s.backward ? "backward" : "forward",
         stageOrdinal(p_, index), scan.iterations);
  w.line("// Not converged: the loop again, step by step.");
  sequentialLoop(w, s);
}

std::string CppScanPrinter::stageFunction(const StageIR &s, int index) {
  const ScanIR &scan = s.scan;
  bool newton = scan.plan == LoopPlan::Newton;
  std::string names;
  for (int b : scan.states) names += (names.empty() ? "" : ", ") + p_.buffers[b].name;
  Writer w;
  w.line("// {}: the loop of {} stage {} (t = {}) {}.", functionName(s, index), s.backward ? "backward" : "forward",
         stageOrdinal(p_, index), s.direction > 0 ? "0 .. T-1" : "T-1 .. 0",
         newton ? "by Newton iterations, each a parallel scan over time" : "as a parallel scan over time, in chunks");
  w.raw(equationsComment(loopEquations(p_, s)));
  w.line("// Per element, the state ({}) after a step is A_t times the state before it plus b_t;", names);
  w.line("{}", newton ? "// A_t is the step's derivative at a guess (rnnc's tangent of the step)."
                      : "// A_t and b_t are the step's derivative and value at a zero state (rnnc's tangent of the step).");
  w.open("static void {}(const Workspace &ws, const {} *P, real *G, int64_t T, int64_t B) {{", functionName(s, index),
         portType(p_));
  w.line("const int64_t chunks = scan_chunks(T, B * {}, {}, {});", scan.width * static_cast<int64_t>(scan.states.size()),
         scan.iterations, scan.guarded);
  w.open("if (chunks < 2) {{");
  sequentialLoop(w, s);
  w.line("return;").close();
  w.line("// Chunk c holds the loop's steps first(c) .. first(c + 1) - 1, in the loop's order.");
  w.line("const int64_t len = T / chunks, extra = T % chunks;");
  w.line("auto first = [&](int64_t c) {{ return c * len + std::min(c, extra); }};");
  if (newton) newtonBody(w, s, index);
  else scanBody(w, s);
  return w.close().take();
}

} // namespace rnnc::codegen
