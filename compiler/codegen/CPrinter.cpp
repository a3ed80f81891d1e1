#include "codegen/CPrinter.h"

#include "codegen/Tangent.h"
#include "ir/Pointwise.h"
#include "ir/Scalar.h"
#include "support/Crash.h"

#include <cmath>
#include <fmt/format.h>

namespace rnnc::codegen {

std::string CPrinter::literal(double v) {
  if (std::isinf(v)) return v > 0 ? "real(INFINITY)" : "real(-INFINITY)";
  if (std::isnan(v)) return "real(NAN)";
  return fmt::format("real({})", v);
}

std::string CPrinter::equationsComment(const KernelIR &k, const std::string &indent) const {
  std::string out;
  std::set<std::pair<uint32_t, uint32_t>> lines; // one per source line
  for (const SourceRange &r : k.equations) {
    LineCol lc = sm_.lineCol(r.begin);
    if (!lines.insert({r.begin.file, lc.line}).second) continue;
    std::string_view line = sm_.lineText(r.begin);
    size_t start = line.find_first_not_of(" \t");
    line = start == std::string_view::npos ? std::string_view() : line.substr(start);
    std::string file = sm_.name(r.begin.file);
    size_t slash = file.find_last_of('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    std::string text(line.substr(0, 100));
    for (char &ch : text)
      if (ch == '\r' || static_cast<unsigned char>(ch) < 0x20) ch = ' ';
    out += fmt::format("{}//   {}:{}  {}\n", indent, file, lc.line, text);
  }
  return out;
}

/// `(r + 2 * B) * 256`-style offset of row r of buffer b read with `delay`.
std::string CPrinter::rowOffset(const Buffer &b, int32_t delay, const std::string &row) {
  if (b.stepLocal) { // one step's rows: row r of the launch is r - r0
    if (row == "r0") return "0";
    return b.width == 1 ? fmt::format("({} - r0)", row) : fmt::format("({} - r0) * {}", row, b.width);
  }
  if (b.ring || b.lastSteps || b.block) { // t = r0 / B in a loop's launch (a block's first step)
    std::string step = delay == 0 ? "r0 / B" : fmt::format("r0 / B {} {}", delay > 0 ? '-' : '+', std::abs(delay));
    std::string slot = b.ring    ? fmt::format("ring_slot({}, {}) * B", step, b.ring) // step t - delay: slot (t - delay) mod ring
                       : b.block ? fmt::format("ring_slot({}, ws.block) * B", step) // blocks start at multiples of ws.block
                                 : fmt::format("seed_slot({}, ws.T, {}) * B", step, b.lastSteps); // zeros but at the last steps
    if (row != "r0") slot = fmt::format("({} + ({} - r0))", slot, row);
    return b.width == 1 ? slot : fmt::format("{} * {}", slot, b.width);
  }
  int64_t shift = b.padBefore - delay;
  std::string r = shift == 0 ? row : shift == 1 ? fmt::format("({} + B)", row) : fmt::format("({} + {} * B)", row, shift);
  if (shift < 0) r = fmt::format("({} - {} * B)", row, -shift);
  return b.width == 1 ? r : fmt::format("{} * {}", r, b.width);
}

const char *CPrinter::elementType(const Buffer &b) { return b.index ? "int32_t" : b.half ? "store" : "real"; }


std::string CPrinter::rowPointer(int buffer, int32_t delay) const {
  const std::string &name = p_.buffers[buffer].name;
  if (delay == 0) return name;
  if (delay == 1) return name + "_prev";
  if (delay == -1) return name + "_next";
  return fmt::format("{}_{}{}", name, delay > 0 ? "prev" : "next", std::abs(delay));
}

std::string CPrinter::operand(const Operand &o, const std::string &index) const {
  switch (o.kind) {
  case Operand::Kind::Local: return fmt::format("v{}", o.local);
  case Operand::Kind::Const: return literal(o.value);
  case Operand::Kind::LossSeed: return "ws.loss_seed";
  case Operand::Kind::Mask: { // the row is step row / B of sequence row % B
    const double kept = o.inverted ? 1 / o.value : 1, expected = o.inverted ? 1 : o.value;
    const unsigned threshold = scalar::keep_threshold(o.value);
    auto drawn = maskDraws_.find({o.site, o.delay});
    if (!o.scalar && drawn != maskDraws_.end())
      return fmt::format("keep_value(ws.rng, {}[{}], {}u, {}, {})", drawn->second, index, threshold, literal(kept),
                         literal(expected));
    return fmt::format("keep_mask(ws.rng, {}u, {}, unsigned({} % B), unsigned({}), {}u, {}, {})", o.site, maskStep(o),
                       row_, o.scalar ? "0" : elementIndex(), threshold, literal(kept), literal(expected));
  }
  case Operand::Kind::Active: { // the row is step row / B of sequence row % B
    std::string step = o.delay == 0 ? row_ + " / B"
                                    : fmt::format("{} / B {} {}", row_, o.delay > 0 ? '-' : '+', std::abs(o.delay));
    return fmt::format("({} < ws.lengths[{} % B] ? {} : real(0))", step, row_,
                       o.weighted ? "ws.loss_weight[0]" : "real(1)");
  }
  case Operand::Kind::Param: { // a 16-bit param converts to real where it is read
    std::string at = o.scalar ? fmt::format("P[{}]", o.paramOffset) : fmt::format("P[{} + {}]", o.paramOffset, index);
    return isHalf(p_.dtype) ? "real(" + at + ")" : at;
  }
  case Operand::Kind::Load: {
    auto substitute = substitutes_.find({o.buffer, o.delay});
    if (substitute != substitutes_.end()) return substitute->second;
    // A slice read in place: its source at the slice's offset.
    std::string at = o.scalar || index == "0" ? std::to_string(o.shift) : shifted(index, o.shift);
    if (p_.buffers[o.buffer].half) return fmt::format("real({}[{}])", rowPointer(o.buffer, o.delay), at);
    return fmt::format("{}[{}]", rowPointer(o.buffer, o.delay), at);
  }
  }
  RNNC_UNREACHABLE("operand kind");
}

std::string CPrinter::maskStep(const Operand &o) const {
  if (o.perSequence) return "~0u";
  if (o.delay == 0) return fmt::format("unsigned({} / B)", row_);
  return fmt::format("unsigned({} / B {} {})", row_, o.delay > 0 ? '-' : '+', std::abs(o.delay));
}

std::string CPrinter::shifted(const std::string &index, int64_t shift) {
  if (shift == 0) return index;
  return fmt::format("{} {} {}", index, shift > 0 ? '+' : '-', shift > 0 ? shift : -shift);
}

std::string CPrinter::storeTarget(int buffer, int64_t shift) const {
  return fmt::format("{}[{}]", rowPointer(buffer, 0), shifted("i", shift));
}

Operand CPrinter::sliceOperand(const Instr &in) {
  Operand o = in.args[0];
  if (o.scalar) return o; // element 0 whatever the index
  if (o.kind == Operand::Kind::Load) o.shift += in.offset;
  if (o.kind == Operand::Kind::Param) o.paramOffset += in.offset;
  return o;
}

std::string CPrinter::mapExpr(const Instr &in) const {
  auto a = [&](size_t k) { return operand(in.args[k], "i"); };
  auto join = [&](const char *sep) {
    std::string s;
    for (size_t k = 0; k < in.args.size(); ++k) s += (k ? sep : "") + a(k);
    return s;
  };
  switch (in.op) {
  case Op::Add: return join(" + ");
  case Op::Mul: return join(" * ");
  case Op::Sub: return a(0) + " - " + a(1);
  case Op::Div: return a(0) + " / " + a(1);
  case Op::Neg: return "-" + a(0);
#include "ir/TableOpCases.def"
  {
    std::vector<std::string> args;
    for (size_t k = 0; k < in.args.size(); ++k) args.push_back(a(k));
    return pointwiseRule(in.op)->spell(args, [&](const char *name) { return math(name); });
  }
  case Op::Slice: return operand(sliceOperand(in), "i");
  case Op::Broadcast: return operand(in.args[0], "0");
  case Op::Pad:
    return fmt::format("(i >= {} && i < {} ? {} : real(0))", in.offset, in.offset + in.inWidth,
                       operand(in.args[0], shifted("i", -in.offset)));
  case Op::Concat: {
    std::string s;
    int64_t start = 0;
    for (size_t k = 0; k < in.args.size(); ++k) {
      std::string piece = operand(in.args[k], shifted("i", -start));
      start += in.pieces[k];
      s += k + 1 < in.args.size() ? fmt::format("i < {} ? {} : ", start, piece) : piece;
    }
    return "(" + s + ")";
  }
  case Op::Embed:
    // The row's offset in 64 bits: V x E may pass 2^31.
    return fmt::format("P[{} + int64_t({}) * {} + i]", in.paramOffset, operand(in.args[0], "0"), in.width);
  case Op::Input:
  case Op::Param:
  case Op::Const:
  case Op::Keep:
  case Op::Active:
  case Op::Sum:
  case Op::Mean:
  case Op::CrossEntropy:
  case Op::Mse:
  case Op::MatMul:
  case Op::SoftmaxMinusOneHot:
  case Op::MatMulT:
  case Op::GradMatrix:
  case Op::GradVector:
  case Op::GradEmbed: break;
  }
  RNNC_UNREACHABLE(std::string("not a map op: ") + opMnemonic(in.op));
}

std::string CPrinter::sweep(const Sweep &s, const std::string &indent) {
  std::string out;
  const std::string in2 = indent + "  ";
  if (s.kind == Sweep::Kind::Map) {
    // The row's draws of each mask first, one Philox call per eight elements
    // (a row of at most 16384: its draws stay on the stack).
    const int64_t octets = (s.width + 7) / 8;
    if (drawsMasksByRow() && octets <= 2048)
      for (const Instr &in : s.body)
        for (const Operand &o : in.args) {
          if (o.kind != Operand::Kind::Mask || o.scalar || maskDraws_.count({o.site, o.delay})) continue;
          std::string name = fmt::format("draws_{}{}", o.site,
                                         o.delay ? fmt::format("_{}{}", o.delay < 0 ? "next" : "prev", std::abs(o.delay)) : "");
          maskDraws_[{o.site, o.delay}] = name;
          out += fmt::format("{}unsigned {}[{}]; // mask {}: its draws for this row, eight per Philox call\n", indent, name,
                             octets * 8, o.site);
          out += fmt::format("{}#pragma omp simd\n{}for (int64_t q = 0; q < {}; ++q)\n", indent, indent, octets);
          out += fmt::format("{}  keep_draws8(ws.rng, {}u, {}, unsigned(r % B), unsigned(q), {} + 8 * q);\n", indent, o.site,
                             maskStep(o), name);
        }
    out += elementLoop(s.width, indent);
    for (size_t k = 0; k < s.body.size(); ++k) {
      const Instr &in = s.body[k];
      out += fmt::format("{}const real v{} = {};\n", in2, k, mapExpr(in));
      if (in.store >= 0) out += fmt::format("{}{} = v{};\n", in2, storeTarget(in.store, in.storeShift), k);
    }
    maskDraws_.clear();
    return out + indent + "}\n";
  }
  const Instr &in = s.body.front();
  auto x = [&](size_t k, const std::string &i) { return operand(in.args[k], i); };
  std::string dst = rowPointer(in.store, 0);
  int64_t w = in.inWidth;
  if (in.op == Op::Sum || in.op == Op::Mean || in.op == Op::Mse) {
    out += indent + "real acc = 0;\n" + elementLoop(w, indent, "+ : acc");
    if (in.op == Op::Mse) out += fmt::format("{}const real d = {} - {};\n{}acc += d * d;\n", in2, x(0, "i"), x(1, "i"), in2);
    else out += fmt::format("{}acc += {};\n", in2, x(0, "i"));
    out += indent + "}\n" + combine("acc", '+', indent);
    out += fmt::format("{}{}[0] = {};\n", indent, dst, in.op == Op::Sum ? "acc" : fmt::format("acc / real({})", w));
    return out;
  }
  // cross_entropy and softmax_minus_onehot: log-sum-exp over the logits.
  out += indent + "real top = -INFINITY;\n" + elementLoop(w, indent, "max : top");
  out += fmt::format("{}top = {}(top, {});\n{}}}\n", in2, math("max"), x(0, "i"), indent) + combine("top", 'M', indent);
  out += indent + "real z = 0;\n" + elementLoop(w, indent, "+ : z");
  out += fmt::format("{}z += {}({} - top);\n{}}}\n", in2, math("exp"), x(0, "i"), indent) + combine("z", '+', indent);
  out += fmt::format("{}const int32_t target = {};\n", indent, x(1, "0"));
  if (in.op == Op::CrossEntropy) {
    out += fmt::format("{}{}[0] = top + {}(z) - {};\n", indent, dst, math("log"), x(0, "target"));
  } else {
    out += elementLoop(w, indent);
    out += fmt::format("{}{}[i] = {}({} - top) / z - (i == target ? real(1) : real(0));\n{}}}\n", in2, dst, math("exp"),
                       x(0, "i"), indent);
  }
  return out;
}

std::string CPrinter::tangentStep(const ScanIR &scan, int direction, const std::string &indent) {
  const size_t k = scan.states.size();
  row_ = "q"; // a scan's step: q = t * B + r, r the sequence
  substitutes_.clear();
  for (size_t s = 0; s < k; ++s) substitutes_[{scan.states[s], direction}] = fmt::format("s{}", s);
  // tangent[local][s]: the name of its nonzero tangent, or "".
  std::vector<std::vector<std::string>> tangent(scan.step.body.size(), std::vector<std::string>(k));
  auto argTangent = [&](const Operand &o, size_t s) -> std::string {
    if (o.kind == Operand::Kind::Local) return tangent[static_cast<size_t>(o.local)][s];
    if (o.kind == Operand::Kind::Load && o.delay == direction && o.buffer == scan.states[s]) return "real(1)";
    return "";
  };
  std::string out;
  for (size_t j = 0; j < scan.step.body.size(); ++j) {
    const Instr &in = scan.step.body[j];
    std::string value = fmt::format("v{}", j);
    out += fmt::format("{}const real {} = {};\n", indent, value, mapExpr(in));
    std::vector<std::string> args;
    for (const Operand &o : in.args) args.push_back(operand(o, "i"));
    for (size_t s = 0; s < k; ++s) {
      std::vector<std::string> dargs;
      for (const Operand &o : in.args) dargs.push_back(argTangent(o, s));
      std::string d = tangentExpr(in.op, args, dargs, value, [&](const char *f) { return math(f); });
      if (d.empty()) continue;
      tangent[j][s] = fmt::format("{}_d{}", value, s);
      out += fmt::format("{}const real {} = {};\n", indent, tangent[j][s], d);
    }
  }
  for (size_t p = 0; p < k; ++p) {
    size_t local = static_cast<size_t>(scan.stateLocals[p]);
    for (size_t q = 0; q < k; ++q) {
      std::string d = tangent[local][q].empty() ? "real(0)" : tangent[local][q];
      out += fmt::format("{}const real a_{}_{} = {};\n", indent, p, q, d);
    }
    out += fmt::format("{}const real f_{} = v{};\n", indent, p, local);
  }
  substitutes_.clear();
  row_ = "r";
  return out;
}

std::set<std::pair<int, int32_t>> CPrinter::rowPointers(const KernelIR &k, std::set<int> &written) const {
  std::set<std::pair<int, int32_t>> used;
  for (const Sweep &s : k.sweeps)
    for (const Instr &in : s.body) {
      for (const Operand &o : in.args)
        if (o.kind == Operand::Kind::Load) used.insert({o.buffer, o.delay});
      if (in.store >= 0) {
        used.insert({in.store, 0});
        written.insert(in.store);
      }
    }
  return used;
}

std::string CPrinter::kernel(const KernelIR &k) {
  std::string out = fmt::format("// {}: {}\n", k.name,
                                k.kind == KernelIR::Kind::Fused
                                    ? (k.perStep ? "one step of B sequences" : k.epilogue ? "the steps before the first" : "every step at once")
                                    : k.kind == KernelIR::Kind::Gemm || k.kind == KernelIR::Kind::GemmT ? "a GEMM"
                                                                                                          : "a weight gradient");
  out += equationsComment(k);
  out += k.kind == KernelIR::Kind::Fused ? fusedKernel(k) : libraryKernel(k);
  return out;
}

std::string CPrinter::stoppedRowBranch(const std::string &body, const char *leave) {
  return "    if (r / B >= ws.lengths[r % B]) { // past the sequence's end: the carries and zeros (docs/lengths.md)\n" + body +
         "      " + leave + "\n    }\n";
}

} // namespace rnnc::codegen
