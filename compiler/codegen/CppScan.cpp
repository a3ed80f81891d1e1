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

#include <fmt/format.h>
#include <set>

namespace rnnc::codegen {

namespace {

/// The step at loop position `j` ("j", or "T - 1 - j" for a backward loop).
std::string stepAt(int direction, const std::string &j) {
  if (direction > 0) return j;
  if (j == "0") return "T - 1";
  return fmt::format(j.find(' ') == std::string::npos ? "T - 1 - {}" : "T - 1 - ({})", j);
}

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

std::string CppScanPrinter::functionName(const StageIR &s, int index) {
  return fmt::format("{}_{}", s.scan.plan == LoopPlan::Newton ? "newton" : "scan", index);
}

std::string CppScanPrinter::stepCalls(const StageIR &s, const std::string &t, const std::string &indent) const {
  std::string out;
  for (int k : s.kernels) out += fmt::format("{}{}(ws, P, G, B, {} * B, ({} + 1) * B);\n", indent, p_.kernels[k].name, t, t);
  return out;
}

std::string CppScanPrinter::loadPointers(const ScanIR &scan, int direction, bool states, const std::string &indent) const {
  std::set<std::pair<int, int32_t>> loads;
  std::set<int> stateSet(scan.states.begin(), scan.states.end());
  for (const Instr &in : scan.step.body)
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Load && (states || !(stateSet.count(o.buffer) && o.delay == direction)))
        loads.insert({o.buffer, o.delay});
  if (states)
    for (int b : scan.states) loads.insert({b, direction});
  std::string out;
  for (auto [buffer, delay] : loads) {
    const Buffer &b = p_.buffers[buffer];
    out += fmt::format("{}const {} *{} = ws.{} + {};\n", indent, elementType(b), rowPointer(buffer, delay), b.name,
                       rowOffset(b, delay, "q"));
  }
  return out;
}

/// acc (A then b, coefficient-major over n elements) := (a, f) ∘ acc.
std::string CppScanPrinter::compose(const ScanIR &scan, const std::string &acc, const std::string &indent) const {
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  auto A = [&](size_t p, size_t q) { return fmt::format("{}[{} + i]", acc, (p * k + q) * n); };
  auto b = [&](size_t p) { return fmt::format("{}[{} + i]", acc, (k * k + p) * n); };
  std::string out;
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) out += fmt::format("{}const real A_{}_{} = {};\n", indent, p, q, A(p, q));
    out += fmt::format("{}const real b_{} = {};\n", indent, p, b(p));
  }
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) {
      std::string sum;
      for (size_t m = 0; m < k; ++m) sum += fmt::format("{}a_{}_{} * A_{}_{}", m ? " + " : "", p, m, m, q);
      out += fmt::format("{}{} = {};\n", indent, A(p, q), sum);
    }
    std::string sum;
    for (size_t m = 0; m < k; ++m) sum += fmt::format("a_{}_{} * b_{} + ", p, m, m);
    out += fmt::format("{}{} = {}f_{};\n", indent, b(p), sum, p);
  }
  return out;
}

/// 2: the carries, from the state before the first step and the aggregates;
/// `intoState`: also written to the state buffers before each chunk.
std::string CppScanPrinter::carries(const StageIR &s, const std::string &indent, bool intoState,
                                    const std::string &label) const {
  const ScanIR &scan = s.scan;
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  const int64_t W = n * static_cast<int64_t>(k * k + k), nk = n * static_cast<int64_t>(k);
  const Buffer &agg = p_.buffers[scan.aggregates];
  const Buffer &car = p_.buffers[scan.carries];
  const std::string in2 = indent + "  ", in3 = indent + "    ", in4 = indent + "      ";
  std::string out = indent + "// " + label + " The state before each chunk: the one before the first step, then each chunk's map in turn.\n";
  out += fmt::format("{}for (int64_t r = 0; r < B; ++r) {{\n", indent);
  out += fmt::format("{}const int64_t q = {};\n", in2, rowAt(s.direction, "0"));
  out += fmt::format("{}real *carry = ws.{} + r * {};\n", in2, car.name, nk);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    out += fmt::format("{}std::copy_n(ws.{} + {}, {}, carry + {});\n", in2, b.name, rowOffset(b, s.direction, "q"), n, p * n);
  }
  out += indent + "}\n";
  out += fmt::format("{}for (int64_t c = 1; c < chunks; ++c)\n{}for (int64_t r = 0; r < B; ++r) {{\n", indent, in2);
  out += fmt::format("{}const real *acc = ws.{} + ((c - 1) * B + r) * {};\n", in3, agg.name, W);
  out += fmt::format("{}const real *from = ws.{} + ((c - 1) * B + r) * {};\n", in3, car.name, nk);
  out += fmt::format("{}real *to = ws.{} + (c * B + r) * {};\n", in3, car.name, nk);
  out += elementLoop(n, in3);
  for (size_t p = 0; p < k; ++p) {
    std::string sum;
    for (size_t q = 0; q < k; ++q) sum += fmt::format("acc[{} + i] * from[{} + i] + ", (p * k + q) * n, q * n);
    out += fmt::format("{}to[{} + i] = {}acc[{} + i];\n", in4, p * n, sum, (k * k + p) * n);
  }
  out += in3 + "}\n" + in2 + "}\n";
  if (!intoState) return out;
  out += fmt::format("{}for (int64_t c = 1; c < chunks; ++c)\n{}for (int64_t r = 0; r < B; ++r) {{\n", indent, in2);
  out += fmt::format("{}const int64_t q = {};\n", in3, rowAt(s.direction, "first(c)"));
  out += fmt::format("{}const real *carry = ws.{} + (c * B + r) * {};\n", in3, car.name, nk);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    out += fmt::format("{}std::copy_n(carry + {}, {}, ws.{} + {});\n", in3, p * n, n, b.name, rowOffset(b, s.direction, "q"));
  }
  return out + in2 + "}\n";
}

/// The loop step by step: one thread team for all steps (when a step has
/// the work for one), a step's rows split across it.
std::string CppScanPrinter::sequentialLoop(const StageIR &s, const std::string &indent) const {
  int64_t work = 0;
  for (int k : s.kernels)
    for (const Sweep &sw : p_.kernels[k].sweeps) work += sw.width * static_cast<int64_t>(sw.body.size());
  std::string out = fmt::format("{}// The loop, step by step; a step's rows across threads when it has the work.\n", indent);
  out += fmt::format("{}if (B * {} < kParallelWork) {{\n", indent, work);
  out += fmt::format("{}  for (int64_t j = 0; j < T; ++j) {{\n", indent);
  out += fmt::format("{}    const int64_t t = {};\n", indent, stepAt(s.direction, "j"));
  out += stepCalls(s, "t", indent + "    ");
  out += fmt::format("{}  }}\n{}}} else {{\n", indent, indent);
  out += fmt::format("{}  #pragma omp parallel\n", indent);
  out += fmt::format("{}  for (int64_t j = 0; j < T; ++j) {{\n", indent);
  out += fmt::format("{}    const int64_t t = {};\n", indent, stepAt(s.direction, "j"));
  for (int k : s.kernels) {
    out += fmt::format("{}    #pragma omp for\n", indent);
    out += fmt::format("{}    for (int64_t r = t * B; r < (t + 1) * B; ++r) {}(ws, P, G, B, r, r + 1);\n", indent,
                       p_.kernels[k].name);
  }
  return out + indent + "  }\n" + indent + "}\n";
}

/// 3: each chunk's steps by the loop's kernels; all but the last step of each
/// chunk, then the last steps.
std::string CppScanPrinter::chunkSteps(const StageIR &s) const {
  std::string out = "  #pragma omp parallel for\n  for (int64_t c = 0; c < chunks; ++c)\n";
  out += "    for (int64_t j = first(c); j < first(c + 1) - 1; ++j) {\n";
  out += fmt::format("      const int64_t t = {};\n", stepAt(s.direction, "j"));
  out += stepCalls(s, "t", "      ") + "    }\n";
  return out;
}

/// Per chunk but the last, per row: its steps' maps composed into the
/// aggregates. `step` declares a_P_Q and f_P at element i of row q (inside the
/// element loop), after `setup` (before it: row pointers).
std::string CppScanPrinter::composeChunks(const StageIR &s, const std::string &setup, const std::string &step,
                                          const std::string &indent) const {
  const ScanIR &scan = s.scan;
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  const int64_t W = n * static_cast<int64_t>(k * k + k);
  const std::string in2 = indent + "  ", in3 = indent + "    ", in4 = indent + "      ";
  std::string out = fmt::format("{}#pragma omp parallel for collapse(2)\n{}for (int64_t c = 0; c < chunks - 1; ++c)\n", indent,
                                indent);
  out += fmt::format("{}for (int64_t r = 0; r < B; ++r) {{\n", in2);
  out += fmt::format("{}real *acc = ws.{} + (c * B + r) * {};\n", in3, p_.buffers[scan.aggregates].name, W);
  out += elementLoop(n, in3);
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q) out += fmt::format("{}acc[{} + i] = real({});\n", in4, (p * k + q) * n, p == q ? 1 : 0);
    out += fmt::format("{}acc[{} + i] = real(0);\n", in4, (k * k + p) * n);
  }
  out += in3 + "}\n";
  out += fmt::format("{}for (int64_t j = first(c); j < first(c + 1); ++j) {{\n", in3);
  out += fmt::format("{}  const int64_t q = {};\n", in3, rowAt(s.direction, "j"));
  out += setup;
  out += elementLoop(n, in4);
  out += step;
  out += compose(scan, "acc", in4 + "  ");
  return out + in4 + "}\n" + in3 + "}\n" + in2 + "}\n";
}

std::string CppScanPrinter::scanBody(const StageIR &s) {
  const ScanIR &scan = s.scan;
  std::string out = "  // 1. Each chunk's steps but the last chunk's, composed: state after = A state before + b.\n";
  std::string step;
  for (size_t p = 0; p < scan.states.size(); ++p) step += fmt::format("          const real s{} = real(0);\n", p);
  step += tangentStep(scan, s.direction, "          ");
  out += composeChunks(s, loadPointers(scan, s.direction, false, "        "), step, "  ");
  out += carries(s, "  ", true, "2.");
  out += "  // 3. Each chunk's steps from the state before it: all but each chunk's last step (the next chunk\n"
         "  //    starts by reading the state there), then the last steps.\n";
  out += chunkSteps(s);
  out += "  #pragma omp parallel for\n  for (int64_t c = 0; c < chunks; ++c) {\n";
  out += fmt::format("    const int64_t t = {};\n", stepAt(s.direction, "first(c + 1) - 1"));
  out += stepCalls(s, "t", "    ") + "  }\n";
  return out;
}

std::string CppScanPrinter::newtonBody(const StageIR &s, int index) {
  const ScanIR &scan = s.scan;
  const size_t k = scan.states.size();
  const int64_t n = scan.width;
  const int64_t W = n * static_cast<int64_t>(k * k + k), nk = n * static_cast<int64_t>(k);
  const Buffer &car = p_.buffers[scan.carries];
  const Buffer &coef = p_.buffers[scan.coefficients];
  std::string out = "  // The first guess: the state before the first step, at every step.\n";
  out += "  #pragma omp parallel for collapse(2)\n  for (int64_t t = 0; t < T; ++t)\n    for (int64_t r = 0; r < B; ++r) {\n";
  out += fmt::format("      const int64_t q0 = {}, q = t * B + r;\n", rowAt(s.direction, "0"));
  for (int b : scan.states) {
    const Buffer &buf = p_.buffers[b];
    out += fmt::format("      std::copy_n(ws.{} + {}, {}, ws.{} + {});\n", buf.name, rowOffset(buf, s.direction, "q0"), n,
                       buf.name, rowOffset(buf, 0, "q"));
  }
  out += "    }\n";
  out += fmt::format("  for (int iteration = 0; iteration < {}; ++iteration) {{\n", scan.iterations);
  // Linearize.
  out += "    // a. Each step linearized at the guess: state_t = A_t state_t-1 + b_t, b_t = f(guess) - A_t guess.\n";
  out += "    #pragma omp parallel for collapse(2)\n    for (int64_t t = 0; t < T; ++t)\n      for (int64_t r = 0; r < B; ++r) {\n";
  out += "        const int64_t q = t * B + r;\n";
  out += loadPointers(scan, s.direction, true, "        ");
  out += fmt::format("        real *cf = ws.{} + q * {};\n", coef.name, W);
  out += elementLoop(n, "        ");
  for (size_t p = 0; p < k; ++p)
    out += fmt::format("          const real s{} = {}[i];\n", p, rowPointer(scan.states[p], s.direction));
  out += tangentStep(scan, s.direction, "          ");
  for (size_t p = 0; p < k; ++p) {
    std::string linear;
    for (size_t q = 0; q < k; ++q) {
      out += fmt::format("          cf[{} + i] = a_{}_{};\n", (p * k + q) * n, p, q);
      linear += fmt::format(" - a_{}_{} * s{}", p, q, q);
    }
    out += fmt::format("          cf[{} + i] = f_{}{};\n", (k * k + p) * n, p, linear);
  }
  out += "        }\n      }\n";
  out += "    // b. Each chunk's linear steps but the last chunk's, composed.\n";
  std::string step;
  for (size_t p = 0; p < k; ++p) {
    for (size_t q = 0; q < k; ++q)
      step += fmt::format("            const real a_{}_{} = cf[{} + i];\n", p, q, (p * k + q) * n);
    step += fmt::format("            const real f_{} = cf[{} + i];\n", p, (k * k + p) * n);
  }
  out += composeChunks(s, fmt::format("          const real *cf = ws.{} + q * {};\n", coef.name, W), step, "    ");
  out += carries(s, "    ", false, "c.");
  // The new guess.
  out += "    // d. The new guess: each chunk's linear steps from the state before it.\n";
  out += "    #pragma omp parallel for collapse(2)\n    for (int64_t c = 0; c < chunks; ++c)\n";
  out += "      for (int64_t r = 0; r < B; ++r)\n";
  out += "        for (int64_t j = first(c); j < first(c + 1); ++j) {\n";
  out += fmt::format("          const int64_t q = {};\n", rowAt(s.direction, "j"));
  out += fmt::format("          const real *cf = ws.{} + q * {};\n", coef.name, W);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    out += fmt::format("          real *x{} = ws.{} + {};\n", p, b.name, rowOffset(b, 0, "q"));
    out += fmt::format("          const real *before{} = j == first(c) ? ws.{} + (c * B + r) * {} + {} : ws.{} + {};\n", p,
                       car.name, nk, p * n, b.name, rowOffset(b, s.direction, "q"));
  }
  out += elementLoop(n, "          ");
  for (size_t p = 0; p < k; ++p) {
    std::string sum;
    for (size_t q = 0; q < k; ++q) sum += fmt::format("cf[{} + i] * before{}[i] + ", (p * k + q) * n, q);
    out += fmt::format("            const real x{}_new = {}cf[{} + i];\n", p, sum, (k * k + p) * n);
  }
  for (size_t p = 0; p < k; ++p) out += fmt::format("            x{}[i] = x{}_new;\n", p, p);
  out += "          }\n        }\n  }\n";
  // The exact steps and the residual check.
  out += "  // The exact steps from the guess before each chunk; then each chunk's exact end against the guess\n"
         "  // the next chunk started from.\n";
  out += chunkSteps(s);
  out += "  for (int64_t c = 0; c + 1 < chunks; ++c)\n    for (int64_t r = 0; r < B; ++r) {\n";
  out += fmt::format("      const int64_t q = {};\n", rowAt(s.direction, "first(c + 1) - 1"));
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    out += fmt::format("      std::copy_n(ws.{} + {}, {}, ws.{} + (c * B + r) * {} + {});\n", b.name, rowOffset(b, 0, "q"), n,
                       car.name, nk, p * n);
  }
  out += "    }\n";
  out += "  #pragma omp parallel for\n  for (int64_t c = 0; c < chunks; ++c) {\n";
  out += fmt::format("    const int64_t t = {};\n", stepAt(s.direction, "first(c + 1) - 1"));
  out += stepCalls(s, "t", "    ") + "  }\n";
  out += "  double residual = 0;\n";
  out += "  for (int64_t c = 0; c + 1 < chunks; ++c)\n    for (int64_t r = 0; r < B; ++r) {\n";
  out += fmt::format("      const int64_t q = {};\n", rowAt(s.direction, "first(c + 1) - 1"));
  out += fmt::format("      const real *guess = ws.{} + (c * B + r) * {};\n", car.name, nk);
  for (size_t p = 0; p < k; ++p) {
    const Buffer &b = p_.buffers[scan.states[p]];
    out += fmt::format("      residual = std::max(residual, relative_gap(ws.{} + {}, guess + {}, {}));\n", b.name,
                       rowOffset(b, 0, "q"), p * n, n);
  }
  out += "    }\n";
  int ordinal = 0;
  for (int at = 0; at <= index; ++at) ordinal += p_.stages[static_cast<size_t>(at)].backward == s.backward;
  out += fmt::format("  if (newton_kept(\"{} stage {}\", {}, residual, sizeof(real))) return;\n",
                     s.backward ? "backward" : "forward", ordinal, scan.iterations);
  out += "  // Not converged: the loop again, step by step.\n" + sequentialLoop(s, "  ");
  return out;
}

std::string CppScanPrinter::stageFunction(const StageIR &s, int index) {
  const ScanIR &scan = s.scan;
  bool newton = scan.plan == LoopPlan::Newton;
  std::string names;
  for (int b : scan.states) names += (names.empty() ? "" : ", ") + p_.buffers[b].name;
  int ordinal = 0; // the stage's number in forward's or backward's "// Stage N" comments
  for (int at = 0; at <= index; ++at) ordinal += p_.stages[static_cast<size_t>(at)].backward == s.backward;
  std::string out = fmt::format("// {}: the loop of {} stage {} (t = {}) {}.\n", functionName(s, index),
                                s.backward ? "backward" : "forward", ordinal, s.direction > 0 ? "0 .. T-1" : "T-1 .. 0",
                                newton ? "by Newton iterations, each a parallel scan over time"
                                       : "as a parallel scan over time, in chunks");
  KernelIR all; // the equations of the loop's kernels
  for (int k : s.kernels)
    for (const SourceRange &r : p_.kernels[k].equations) all.equations.push_back(r);
  out += equationsComment(all);
  out += fmt::format("// Per element, the state ({}) after a step is A_t times the state before it plus b_t;\n", names);
  out += newton ? "// A_t is the step's derivative at a guess (rnnc's tangent of the step).\n"
                : "// A_t and b_t are the step's derivative and value at a zero state (rnnc's tangent of the step).\n";
  out += fmt::format("static void {}(const Workspace &ws, const real *P, real *G, int64_t T, int64_t B) {{\n",
                     functionName(s, index));
  out += fmt::format("  const int64_t chunks = scan_chunks(T, B * {}, {}, {});\n", scan.width * static_cast<int64_t>(scan.states.size()),
                     scan.iterations, scan.guarded ? "true" : "false");
  out += "  if (chunks < 2) {\n" + sequentialLoop(s, "    ") + "    return;\n  }\n";
  out += "  // Chunk c holds the loop's steps first(c) .. first(c + 1) - 1, in the loop's order.\n";
  out += "  const int64_t len = T / chunks, extra = T % chunks;\n";
  out += "  auto first = [&](int64_t c) { return c * len + std::min(c, extra); };\n";
  out += newton ? newtonBody(s, index) : scanBody(s);
  return out + "}\n";
}

} // namespace rnnc::codegen
