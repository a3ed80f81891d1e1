// 1. Index spaces: a fused kernel of one map sweep is flat, one thread per
//    (row, element), a grid-stride loop over (r1 - r0) · width; any other
//    kernel runs one row per block (a block-uniform grid-stride loop over
//    rows), threads striding over the row's elements, __syncthreads() between
//    sweeps and warp shuffles for sums and maxima.
// 2. Library kernels have no device code: the host calls cuBLAS for GEMMs
//    and column sums, and the prelude's grad_embed for embedding gradients.
// 3. The prelude is self-contained (no #include), so NVRTC compiles it with
//    no include path.
#include "codegen/CudaPrinter.h"

#include "codegen/CudaPersist.h"
#include "codegen/CudaScan.h"
#include "codegen/HostCode.h"
#include "codegen/ScalarText.h"
#include "support/Crash.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace rnnc::codegen {

namespace {

constexpr int kFlatThreads = 256;

// The prelude up to the scalar functions (rnnc/scalar.h, kScalarText).
const char *kPreludeHead = R"cuda(#if defined(__NVCC__) && !defined(__CUDACC_RTC__)
#pragma nv_diag_suppress 177 // the helpers below that this model does not use
#endif
#ifdef __CUDACC_RTC__
typedef long long int64_t;
typedef int int32_t;
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

// Kernels have C names for NVRTC to find; in a .cu they stay in the file.
#ifdef __CUDACC_RTC__
#define RNNC_KERNEL extern "C" __global__
#else
#define RNNC_KERNEL __global__
#endif

#ifdef RNNC_REAL_DOUBLE
typedef double real;
#else
typedef float real;
#endif

// The math of the ops, for float and double alike.
namespace math {
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float log1p(float x) { return ::log1pf(x); }
__device__ __forceinline__ double log1p(double x) { return ::log1p(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float fabs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double fabs(double x) { return ::fabs(x); }
__device__ __forceinline__ float min(float a, float b) { return ::fminf(a, b); }
__device__ __forceinline__ double min(double a, double b) { return ::fmin(a, b); }
__device__ __forceinline__ float max(float a, float b) { return ::fmaxf(a, b); }
__device__ __forceinline__ double max(double a, double b) { return ::fmax(a, b); }
__device__ __forceinline__ float fast_exp(float x) { return ::expf(x); }
__device__ __forceinline__ double fast_exp(double x) { return ::exp(x); }
} // namespace math

)cuda";

// The prelude after the scalar functions.
const char *kPreludeTail = R"cuda(// Four consecutive elements, loaded and stored as one 16-byte access in
// float, as two in double: 16 bytes is the alignment the entry points check.
struct alignas(16) real4 {
  real v[4];
};
__device__ __forceinline__ real4 load4(const real *p) { return *reinterpret_cast<const real4 *>(p); }
__device__ __forceinline__ void store4(real *p, const real4 &x) { *reinterpret_cast<real4 *>(p) = x; }

// The slot of `step` in a ring of `ring` steps (steps before the first wrap around).
__host__ __device__ __forceinline__ int64_t ring_slot(int64_t step, int64_t ring) { return ((step % ring) + ring) % ring; }
// The slot of `step` in a final state's seed of T steps that keeps its last
// k: 1 .. k for steps T - k .. T - 1, else 0, whose rows hold zeros.
__host__ __device__ __forceinline__ int64_t seed_slot(int64_t step, int64_t T, int64_t k) {
  return step >= T - k ? step - (T - k) + 1 : 0;
}

// Sums and maxima over a block (blockDim.x a multiple of 32, at most 1024):
// every thread gets the result, in an order that does not change between runs.
__device__ __forceinline__ real warp_sum(real v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ real warp_max(real v) {
  for (int o = 16; o > 0; o >>= 1) v = math::max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ real block_sum(real v) {
  __shared__ real part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads(); // the previous reduction has read part[]
  if (lane == 0) part[warp] = v;
  __syncthreads();
  return warp_sum(lane < int(blockDim.x >> 5) ? part[lane] : real(0));
}
__device__ real block_max(real v) {
  __shared__ real part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  return warp_max(lane < int(blockDim.x >> 5) ? part[lane] : -INFINITY);
}

// rnnc helper: a[0 .. n) = value.
RNNC_KERNEL __launch_bounds__(256) void fill(real *a, int64_t n, real value) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) a[e] = value;
}

// rnnc helper: out[0] = the mean of a[0 .. n), summed by one block (the loss forward returns).
RNNC_KERNEL __launch_bounds__(256) void mean(const real *__restrict__ a, int64_t n, real *__restrict__ out) {
  real s = 0;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) s += a[e];
  s = block_sum(s);
  if (threadIdx.x == 0) out[0] = s / real(n);
}

// rnnc helper: g[row[r]][i] += d[r][i] for r < rows: a thread owns column i
// of every table row, so the sums need no atomics and do not change between runs.
RNNC_KERNEL __launch_bounds__(256) void grad_embed(const real *__restrict__ d, const int32_t *__restrict__ row,
                                                   real *__restrict__ g, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < cols; i += int64_t(gridDim.x) * blockDim.x)
    for (int64_t r = 0; r < rows; ++r) g[row[r] * cols + i] += d[r * cols + i];
}
)cuda";


// --dtype bf16|f16 (docs/precision.md): the 16-bit storage type and the
// helpers that read or write it. Bit arithmetic both ways, as rnnc/half.h's
// (the CPU's): round to nearest even from float, exact to float, so the CUDA
// and CPU targets store the same bits for the same float.
const char *kStoreBits = R"cuda(
#ifdef RNNC_REAL_DOUBLE
#error "a 16-bit bundle computes in float"
#endif
__host__ __device__ __forceinline__ unsigned float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  return u;
#endif
}
__host__ __device__ __forceinline__ float bits_float(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}
)cuda";

const char *kBf16Store = R"cuda(
// A bfloat16 value (float's sign and exponent, 7 bits of mantissa): loads
// convert it to float exactly, stores round a float to nearest even.
struct alignas(2) store {
  unsigned short bits;
  store() = default;
  __host__ __device__ __forceinline__ store(float f) {
    const unsigned u = float_bits(f);
    bits = (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u // a quiet NaN
                                                            : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16); // ties to even
  }
  __host__ __device__ __forceinline__ operator float() const { return bits_float(unsigned(bits) << 16); }
};
)cuda";

const char *kF16Store = R"cuda(
// An IEEE binary16 value (5 bits of exponent, 10 of mantissa): loads convert
// it to float exactly, stores round a float to nearest even (65520 and up to inf).
struct alignas(2) store {
  unsigned short bits;
  store() = default;
  __host__ __device__ __forceinline__ store(float f) {
    const unsigned all = float_bits(f), sign = (all >> 16) & 0x8000u, u = all & 0x7fffffffu;
    const unsigned normal = (u - (112u << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
    const unsigned subnormal = float_bits(bits_float(u) + 0.5f) - 0x3f000000u; // 2^-24 units, rounded by the addition
    unsigned r = u < 0x38800000u ? subnormal : normal;
    r = u >= 0x477ff000u ? 0x7c00u : r;
    r = u > 0x7f800000u ? 0x7e00u : r;
    bits = (unsigned short)(sign | r);
  }
  __host__ __device__ __forceinline__ operator float() const {
    const unsigned sign = unsigned(bits & 0x8000u) << 16, exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
    const unsigned normal = exponent == 31 ? 0x7f800000u | (mantissa << 13) : ((exponent + 112) << 23) | (mantissa << 13);
    return bits_float(sign | (exponent == 0 ? float_bits(float(mantissa) * 5.9604644775390625e-8f) : normal));
  }
};
)cuda";

// The helpers of a 16-bit model, after block_sum.
const char *kStoreHelpers = R"cuda(
// rnnc helper: out[0 .. n) = x[0 .. n) converted to float (a 16-bit port's rows into a float state).
RNNC_KERNEL __launch_bounds__(256) void to_real(const store *__restrict__ x, real *__restrict__ out, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) out[e] = x[e];
}

// rnnc helper: out[0 .. n) = x[0 .. n) rounded to 16 bits (the params' gradients, a block of a product's float operand).
RNNC_KERNEL __launch_bounds__(256) void to_store(const real *__restrict__ x, store *__restrict__ out, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) out[e] = x[e];
}

// rnnc helper: a[0 .. n) = value, rounded.
RNNC_KERNEL __launch_bounds__(256) void fill_store(store *a, int64_t n, real value) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) a[e] = value;
}

// rnnc helper: out[0] = the mean of a[0 .. n), summed in float by one block.
RNNC_KERNEL __launch_bounds__(256) void mean_store(const store *__restrict__ a, int64_t n, store *__restrict__ out) {
  real s = 0;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) s += real(a[e]);
  s = block_sum(s);
  if (threadIdx.x == 0) out[0] = s / real(n);
}

// rnnc helper: g[row[r]][i] += d[r][i], d in 16 bits, g in float (grad_embed's order).
RNNC_KERNEL __launch_bounds__(256) void grad_embed_store(const store *__restrict__ d, const int32_t *__restrict__ row,
                                                         real *__restrict__ g, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < cols; i += int64_t(gridDim.x) * blockDim.x)
    for (int64_t r = 0; r < rows; ++r) g[row[r] * cols + i] += real(d[r * cols + i]);
}

// rnnc helper: g[i] += Σ_r d[r][i] for r < rows, d in 16 bits: a thread owns a
// column and sums its rows in order, in float (a bias's gradient).
RNNC_KERNEL __launch_bounds__(256) void column_sums_store(const store *__restrict__ d, int64_t rows, int64_t cols,
                                                          real *__restrict__ g) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < cols; i += int64_t(gridDim.x) * blockDim.x) {
    real s = 0;
    for (int64_t r = 0; r < rows; ++r) s += real(d[r * cols + i]);
    g[i] += s;
  }
}
)cuda";

} // namespace

/// Whether a map op reads at offsets computed per element, or from an index
/// (slice, pad, concat, embed, broadcast): its elements cannot be loaded four at a time.
static bool readsAtComputedOffsets(Op op) {
  switch (opKind(op)) {
  case OpKind::Layout: return true;
  case OpKind::Leaf:
  case OpKind::Pointwise:
  case OpKind::Reduce:
  case OpKind::Gemm:
  case OpKind::Accumulate: return false;
  }
  return true;
}

bool CudaPrinter::isFlat(const KernelIR &k) { return k.sweeps.size() == 1 && k.sweeps[0].kind == Sweep::Kind::Map; }

/// The operands a map op's element reads as printed: a slice's is its source's at the slice's offset.
static std::vector<Operand> printedOperands(const Instr &in) {
  if (in.op == Op::Slice) return {CPrinter::sliceOperand(in)};
  return in.args;
}

int CudaPrinter::sweepElementsPerThread(const Sweep &s, const Program &p, bool flat) {
  // 16-bit models load and store an element at a time (real4 is 16 bytes of float).
  if (s.kind != Sweep::Kind::Map || s.width % 4 || isHalf(p.dtype)) return 1;
  if (flat) { // the rows are offset by the thread's elements: a row read both ways keeps one element a thread
    std::set<std::pair<int, int32_t>> scalarRows, vectorRows;
    for (const Instr &in : s.body)
      for (const Operand &o : in.args)
        if (o.kind == Operand::Kind::Load) (o.scalar ? scalarRows : vectorRows).insert({o.buffer, o.delay});
    for (const auto &row : scalarRows)
      if (vectorRows.count(row)) return 1;
  }
  for (const Instr &in : s.body) {
    // A flat kernel reads no slice; in a row's sweep a slice of a row read from memory is that row at its offset.
    const bool slice = !flat && in.op == Op::Slice && in.args[0].kind == Operand::Kind::Load && !in.args[0].scalar;
    if (readsAtComputedOffsets(in.op) && !slice) return 1;
    // A flat kernel stores at the thread's elements; a row's sweep also at a concatenation's piece in place.
    const bool storeShifts = flat ? in.storeShift != 0 : in.storeShift % 4 != 0 || in.storeShift < 0;
    if (in.store >= 0 && (p.buffers[in.store].width % 4 || p.buffers[in.store].index || storeShifts)) return 1;
    for (const Operand &o : printedOperands(in)) {
      if (o.scalar || o.kind == Operand::Kind::Local || o.kind == Operand::Kind::Const || o.kind == Operand::Kind::LossSeed ||
          o.kind == Operand::Kind::Mask || o.kind == Operand::Kind::Active)
        continue;
      if (o.kind == Operand::Kind::Param && o.paramOffset % 4 == 0) continue;
      if (o.kind == Operand::Kind::Load && o.shift % 4 == 0 && o.shift >= 0 && p.buffers[o.buffer].width % 4 == 0 &&
          !p.buffers[o.buffer].index)
        continue;
      return 1;
    }
  }
  return 4;
}

int CudaPrinter::elementsPerThread(const KernelIR &k, const Program &p) {
  return isFlat(k) ? sweepElementsPerThread(k.sweeps[0], p, true) : 1;
}

/// Elements per thread of map sweep `s` of a one-row-per-block kernel `k`: its own where every
/// sweep of `k` is a map (a step's gates and states). A kernel with sums (layer norm's backward:
/// a dozen sweeps and sums over rows of many buffers) keeps one element a thread: with four,
/// ptxas spilled its registers (sm_90).
static int rowSweepElementsPerThread(const KernelIR &k, const Sweep &s, const Program &p) {
  for (const std::vector<Sweep> *list : {&k.sweeps, &k.stopped})
    for (const Sweep &other : *list)
      if (other.kind != Sweep::Kind::Map) return 1;
  return CudaPrinter::sweepElementsPerThread(s, p, false);
}

/// Rows narrower than this index their elements in 32 bits.
constexpr int64_t kInt32Row = int64_t(1) << 30;

int CudaPrinter::threadsOf(const KernelIR &k, const Program &p) {
  if (isFlat(k)) return kFlatThreads;
  int64_t widest = 1; // the threads a sweep keeps busy: its elements, four a thread where it loads four
  for (const Sweep &s : k.sweeps)
    widest = std::max(widest, s.kind == Sweep::Kind::Map ? s.width / rowSweepElementsPerThread(k, s, p)
                                                          : std::max(s.width, s.body.empty() ? 1 : s.body.front().inWidth));
  return static_cast<int>(std::min<int64_t>(256, (widest + 31) / 32 * 32));
}

std::string CudaPrinter::elementLoop(int64_t n, const std::string &indent, const std::string &) const {
  if (vector_ > 1) // the thread's elements, from i0
    return fmt::format("{}#pragma unroll\n{}for (int i = 0; i < {}; ++i) {{\n", indent, indent, vector_);
  if (flat_) return indent + "{\n"; // i is the thread's element
  if (unit_) { // every row's elements of the block's units, in each piece of the unit width
    const int64_t pieces = n / unit_;
    // 32-bit indices: the step's rows of the widest sweep fit (rnnc/persistent.h's indicesFit).
    if (pieces == 1)
      return fmt::format("{0}for (int e = threadIdx.x; e < int(r1 - r0) * units.count; e += blockDim.x) {{\n"
                         "{0}  const int64_t r = r0 + e / units.count;\n"
                         "{0}  const int i = units.first + e % units.count;\n",
                         indent) +
             unitRows_;
    return fmt::format("{0}for (int e = threadIdx.x; e < int(r1 - r0) * {1} * units.count; e += blockDim.x) {{\n"
                       "{0}  const int64_t r = r0 + e / ({1} * units.count);\n"
                       "{0}  const int o = e % ({1} * units.count), i = o / units.count * {2} + units.first + o % units.count;\n",
                       indent, pieces, unit_) +
           unitRows_;
  }
  // A row's elements in 32 bits where its width (plus a slice's shift, smaller) leaves room.
  return fmt::format("{}for ({} i = threadIdx.x; i < {}; i += blockDim.x) {{\n", indent, n < kInt32Row ? "int" : "int64_t", n);
}

std::string CudaPrinter::combine(const std::string &var, char op, const std::string &indent) const {
  return fmt::format("{}{} = block_{}({});\n", indent, var, op == '+' ? "sum" : "max", var);
}

/// The register copy of a vector-loaded operand: "x_0_4", "add_8_128_4", "P_98304_4".
/// The four registers of a row's elements from `shift`: "h_22_4", "add_8_128_4".
static std::string fourRegisters(const std::string &row, int64_t shift) {
  return row + (shift ? fmt::format("_{}", shift) : "") + "_4";
}

std::string CudaPrinter::vectorName(const Operand &o) const {
  if (o.kind == Operand::Kind::Param) return fmt::format("P_{}_4", o.paramOffset);
  return fourRegisters(rowPointer(o.buffer, o.delay), o.shift);
}

/// The registers of a result stored four elements at a time: "h_22_4", "concat_33_128_4".
std::string CudaPrinter::storeName(int buffer, int64_t shift) const { return fourRegisters(rowPointer(buffer, 0), shift); }

/// The values on chip kernel `k` reads or writes.
static std::set<int> chipTouched(const KernelIR &k, const OnChip &chip) {
  std::set<int> touched;
  forEachSweep(k, [&](const Sweep &s) {
    for (const Instr &in : s.body) {
      if (in.store >= 0 && chip.count(in.store)) touched.insert(in.store);
      for (const Operand &o : in.args)
        if (o.kind == Operand::Kind::Load && chip.count(o.buffer)) touched.insert(o.buffer);
    }
  });
  return touched;
}

bool touchesChip(const KernelIR &k, const OnChip &chip) { return !chipTouched(k, chip).empty(); }

/// Element `at` of a row kept on chip: piece at / U, unit at % U of the block's.
static std::string chipElement(int64_t unit, const std::string &at) {
  return fmt::format("chip_element(units, {}, {})", unit, at);
}

std::string CudaPrinter::operand(const Operand &o, const std::string &index) const {
  bool vectorLoaded = (o.kind == Operand::Kind::Load || o.kind == Operand::Kind::Param) && !o.scalar;
  if (vector_ > 1 && vectorLoaded) return vectorName(o) + ".v[" + index + "]";
  if (o.kind == Operand::Kind::Load && chip_ && chip_->count(o.buffer)) {
    RNNC_ASSERT(!o.scalar && o.delay == 0, "a value on chip is read at its step's elements");
    return fmt::format("{}[{}]", rowPointer(o.buffer, 0), chipElement(unit_, shifted(index, o.shift)));
  }
  // Loss scaling: the seed times the scale forward kept in device memory (the CPU multiplies it on the host).
  if (o.kind == Operand::Kind::LossSeed) return "(ws.loss_seed * ws.loss_scale[0])";
  return CPrinter::operand(o, index);
}

std::string CudaPrinter::storeTarget(int buffer, int64_t shift) const {
  if (vector_ > 1) return storeName(buffer, shift) + ".v[i]";
  if (chip_ && chip_->count(buffer))
    return fmt::format("{}[{}]", rowPointer(buffer, 0), chipElement(unit_, shifted("i", shift)));
  return CPrinter::storeTarget(buffer, shift);
}

std::string CudaPrinter::rowDeclaration(int buffer, int32_t delay, bool store, const std::string &plus) const {
  const Buffer &b = p_.buffers[buffer];
  if (chip_ && chip_->count(buffer)) { // the step's rows of the block's units, in shared memory
    const ChipRegion &at = chip_->at(buffer);
    return fmt::format("    {}real *__restrict__ {} = chip + {};\n", store ? "" : "const ", rowPointer(buffer, delay),
                       at.offset ? fmt::format("(B * {} + (r - r0) * {}) * units.count", at.offset, at.pieces)
                                 : fmt::format("(r - r0) * {} * units.count", at.pieces));
  }
  return fmt::format("    {}{} *__restrict__ {} = ws.{} + {}{};\n", store ? "" : "const ", elementType(b), rowPointer(buffer, delay),
                     b.name, rowOffset(b, delay, "r"), plus);
}

std::string CudaPrinter::math(const char *name) const { return std::string("math::") + name; }

std::string CudaPrinter::fourElements(const Sweep &s, const std::string &indent, const std::string &from) {
  auto at = [&](const std::string &base, int64_t offset) {
    std::string sum = base;
    if (!from.empty()) sum += " + " + from;
    return offset ? fmt::format("{} + {}", sum, offset) : sum;
  };
  std::set<std::string> loads;
  std::set<std::pair<int, int64_t>> stores; // (buffer, shift)
  for (const Instr &in : s.body) {
    if (in.store >= 0) stores.insert({in.store, in.storeShift});
    for (const Operand &o : printedOperands(in)) {
      if (o.kind == Operand::Kind::Load && !o.scalar)
        loads.insert(fmt::format("{} = load4({})", vectorName(o), at(rowPointer(o.buffer, o.delay), o.shift)));
      if (o.kind == Operand::Kind::Param && !o.scalar) loads.insert(fmt::format("{} = load4({})", vectorName(o), at("P", o.paramOffset)));
    }
  }
  std::string out;
  for (const std::string &l : loads) out += indent + "const real4 " + l + ";\n";
  for (auto [b, shift] : stores) out += fmt::format("{}real4 {};\n", indent, storeName(b, shift));
  out += sweep(s, indent);
  for (auto [b, shift] : stores) out += fmt::format("{}store4({}, {});\n", indent, at(rowPointer(b, 0), shift), storeName(b, shift));
  return out;
}

std::string CudaPrinter::fusedKernel(const KernelIR &k) {
  std::set<int> written;
  auto pointers = rowPointers(k, written);
  flat_ = isFlat(k);
  vector_ = flat_ ? elementsPerThread(k, p_) : 1;
  int threads = threadsOf(k, p_);
  bool vector = vector_ > 1;
  std::string out = step_ ? fmt::format("__device__ void {}_step(const Workspace &ws, const {} *__restrict__ {}, int64_t B,\n"
                                        "    int64_t r0, int64_t r1) {{\n",
                                        k.name, portType(p_), vector ? "params" : "P")
                         : fmt::format("RNNC_KERNEL __launch_bounds__({}) void {}(const Workspace ws, const {} *__restrict__ {},\n"
                                       "    int64_t B, int64_t r0, int64_t r1) {{\n",
                                       threads, k.name, portType(p_), vector ? "params" : "P");
  // A row read as a broadcast element is not offset by the thread's elements
  // (elementsPerThread keeps a row from being read both ways).
  std::set<std::pair<int, int>> scalarRows;
  for (const Instr &in : flat_ ? k.sweeps[0].body : std::vector<Instr>())
    for (const Operand &o : in.args)
      if (o.kind == Operand::Kind::Load && o.scalar) scalarRows.insert({o.buffer, o.delay});
  std::string rows;
  for (auto [buffer, delay] : pointers) {
    bool store = delay == 0 && written.count(buffer);
    const bool scalarRow = scalarRows.count({buffer, delay}) > 0;
    rows += rowDeclaration(buffer, delay, store, vector && !scalarRow ? " + i0" : "");
  }
  if (flat_) {
    int64_t w = k.sweeps[0].width / vector_;
    bool usesP = false;
    for (const Instr &in : k.sweeps[0].body)
      for (const Operand &o : in.args) usesP |= o.kind == Operand::Kind::Param && !o.scalar;
    if (vector && !usesP) out += "  (void)params; // no param is read\n";
    out += fmt::format("  const int64_t n = (r1 - r0) * {};{}\n", w, vector ? fmt::format(" // groups of {} elements", vector_) : "");
    out += "  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {\n";
    if (vector) {
      out += fmt::format("    const int64_t r = r0 + e / {}, i0 = e % {} * {};\n", w, w, vector_);
      if (usesP) out += "    const real *__restrict__ P = params + i0;\n";
    } else {
      out += fmt::format("    const int64_t r = r0 + e / {}, i = e % {};\n", w, w);
    }
    out += rows;
    if (!vector) {
      if (k.foldsStopped)
        out += stoppedRowBranch(k.stopped.empty() ? "" : sweep(k.stopped[0], "      "), "continue;");
      out += sweep(k.sweeps[0], "    ");
      flat_ = false;
      return out + "  }\n}\n";
    }
    out += fourElements(k.sweeps[0], "    ", "");
    flat_ = false;
    vector_ = 1;
    return out + "  }\n}\n";
  }
  out += "  for (int64_t r = r0 + blockIdx.x; r < r1; r += gridDim.x) { // one row per block\n" + rows;
  auto sweeps = [&](const std::vector<Sweep> &list, const std::string &indent) {
    std::string text;
    for (size_t s = 0; s < list.size(); ++s) {
      if (s) text += indent + "__syncthreads(); // the sweep before wrote what this one reads\n";
      if (rowSweepElementsPerThread(k, list[s], p_) == 4) {
        const int64_t w = list[s].width;
        text += fmt::format("{0}// Four elements a thread: a 16-byte load of each operand, a 16-byte store of each result.\n"
                            "{0}for ({1} i0 = 4 * threadIdx.x; i0 < {2}; i0 += 4 * blockDim.x) {{\n",
                            indent, w < kInt32Row ? "int" : "int64_t", w);
        vector_ = 4;
        text += fourElements(list[s], indent + "  ", "i0");
        vector_ = 1;
        text += indent + "}\n";
        continue;
      }
      bool scoped = list[s].kind != Sweep::Kind::Map;
      text += (scoped ? indent + "{\n" : "") + sweep(list[s], scoped ? indent + "  " : indent) + (scoped ? indent + "}\n" : "");
    }
    return text;
  };
  if (k.foldsStopped) // the block's row: one branch for all its threads
    out += stoppedRowBranch(sweeps(k.stopped, "      "), "continue;");
  out += sweeps(k.sweeps, "    ");
  return out + "  }\n}\n";
}

std::string CudaPrinter::stepKernel(const KernelIR &k) {
  step_ = true;
  std::string out = kernel(k);
  step_ = false;
  return out + fmt::format("\n// {}: one step of B sequences, a launch of its own (the loop step by step)\n", k.name) +
         equationsComment(k) +
         fmt::format("RNNC_KERNEL __launch_bounds__({0}) void {1}(const Workspace ws, const {2} *__restrict__ P, int64_t B,\n"
                     "    int64_t r0, int64_t r1) {{\n"
                     "  {1}_step(ws, P, B, r0, r1);\n"
                     "}}\n",
                     threadsOf(k, p_), k.name, portType(p_));
}

std::string CudaPrinter::unitsKernel(const KernelIR &k, int64_t unit, const OnChip &chip) {
  const std::set<int> touched = chipTouched(k, chip);
  const bool onChip = !touched.empty();
  std::string kept;
  for (int buffer : touched) kept += (kept.empty() ? "" : ", ") + p_.buffers[buffer].name;
  std::string out = fmt::format("// {0}_units: {0}'s step for the units of a persistent loop's block (docs/cuda.md#persistent-loops):\n"
                                "// every row, the elements of its units in each piece of {1}{2}.\n",
                                k.name, unit, onChip ? fmt::format("; {} in the block's shared memory (chip)", kept) : "") +
                    equationsComment(k) +
                    fmt::format("__device__ void {}_units(const Workspace &ws, const {} *__restrict__ P, int64_t B, int64_t r0,\n"
                                "    int64_t r1, Slice units{}) {{\n",
                                k.name, portType(p_), onChip ? ", real *__restrict__ chip" : "");
  chip_ = &chip;
  // The sweeps of every row, then (--lengths) those of the rows past their end, a
  // block barrier between two sweeps: each reads only what its block's threads wrote.
  bool first = true;
  auto pass = [&](const std::vector<Sweep> &list, const char *skip) {
    for (const Sweep &s : list) {
      std::set<std::pair<int, int32_t>> pointers;
      std::set<int> written;
      for (const Instr &in : s.body) {
        for (const Operand &o : in.args)
          if (o.kind == Operand::Kind::Load) pointers.insert({o.buffer, o.delay});
        if (in.store >= 0) pointers.insert({in.store, 0}), written.insert(in.store);
      }
      unitRows_ = skip;
      for (auto [buffer, delay] : pointers) unitRows_ += rowDeclaration(buffer, delay, delay == 0 && written.count(buffer), "");
      if (!first) out += "  __syncthreads(); // the sweep before wrote what this one reads\n";
      first = false;
      out += sweep(s, "  ");
    }
  };
  unit_ = unit;
  pass(k.sweeps, k.foldsStopped ? "    if (r / B >= ws.lengths[r % B]) continue; // past its end: below\n" : "");
  if (k.foldsStopped)
    pass(k.stopped, "    if (r / B < ws.lengths[r % B]) continue; // running: above\n");
  unit_ = 0;
  unitRows_.clear();
  chip_ = nullptr;
  return out + "}\n";
}

std::string CudaPrinter::libraryKernel(const KernelIR &) { RNNC_UNREACHABLE("library kernels are host calls on CUDA"); }

std::vector<std::string> cudaKernelNames(const Program &p) {
  std::vector<std::string> names = {"fill", "grad_embed", "mean"};
  if (p.hasMasks) names.push_back("set_rng");
  if (!p.dropped.empty()) names.insert(names.end(), {"drop_param", "fold_dropped_grad"});
  if (isHalf(p.dtype))
    names.insert(names.end(), {"to_real", "to_store", "fill_store", "mean_store", "grad_embed_store", "column_sums_store"});
  if (foldsBiases(p)) names.push_back("bias_rows");
  for (const KernelIR &k : p.kernels)
    if (k.kind == KernelIR::Kind::Fused) names.push_back(k.name);
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (CudaScanPrinter::runsInParallel(p, static_cast<int>(s)))
      for (const std::string &n : CudaScanPrinter::kernelNames(p, static_cast<int>(s))) names.push_back(n);
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (CudaPersistPrinter::persistent(p, static_cast<int>(s))) {
      names.push_back(CudaPersistPrinter::kernelName(static_cast<int>(s)));
      for (const std::string &n : CudaPersistPrinter::fusedKernelNames(p, static_cast<int>(s))) names.push_back(n);
    }
  return names;
}

bool foldsBiases(const Program &p) {
  return std::any_of(p.kernels.begin(), p.kernels.end(), [](const KernelIR &k) { return !k.biases.empty(); });
}

std::string cudaWorkspaceStruct(const Program &p) {
  std::vector<std::string> members = {"real *ones; // [T][B][n] ones: what the bias gradients' column sums multiply"};

  if (p.hasLengths)
    members.push_back("const int32_t *host_lengths; // [B] in host memory: the rows each step's library calls cut to");
  if (p.lossSeeded)
    members.push_back("real *loss_scale; // [1]: forward's options->loss_scale, what the kernels multiply the loss seed by");
  if (p.gridBarrierWords)
    members.push_back("unsigned *grid_barrier; // [2 per stage]: a persistent loop's grid barrier (arrivals, generation)");
  if (isHalf(p.dtype)) {
    if (p.hasBackward)
      members.push_back(fmt::format("real *grads; // [{}]: the params' gradients, summed in float (rounded into param_grads)",
                                    p.paramElements));
    members.push_back("store *rounded; // [rounded_elements]: a product's float operand rounded to 16 bits, by blocks");
    members.push_back("int64_t rounded_elements;");
  }
  return workspaceStruct(p, members);
}

std::string printCudaKernels(const Program &p, const SourceManager &sm) {
  std::string out = std::string(kPreludeHead) + "#define RNNC_SCALAR __device__ __forceinline__\n" + kScalarText +
                    "#undef RNNC_SCALAR\n\n" + kPreludeTail;
  if (isHalf(p.dtype))
    out += fmt::format("\n// --dtype {}: params, ports and the values kept for every step are stored in {} (store),\n"
                       "// computed in float (real); docs/precision.md says which stay float.",
                       dtypeName(p.dtype), dtypeName(p.dtype)) +
           kStoreBits + (p.dtype == DType::BF16 ? kBf16Store : kF16Store) + kStoreHelpers;
  if (foldsBiases(p))
    out += "\n// rnnc helper: a[r][j] = b0[j] + b1[j] (b1 null: b0[j]) for r < rows, j < n: the bias sum a product's\n"
           "// epilogue adds, or its rows before a GEMM that adds to them (rnnc/cuda.h's gemm_bias).\n"
           "RNNC_KERNEL __launch_bounds__(256) void bias_rows(real *__restrict__ a, int64_t rows, int64_t n,\n"
           "                                                  const real *__restrict__ b0, const real *__restrict__ b1) {\n"
           "  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < rows * n; e += int64_t(gridDim.x) * blockDim.x)\n"
           "    a[e] = b1 ? b0[e % n] + b1[e % n] : b0[e % n];\n"
           "}\n";
  if (p.hasMasks)
    out += "\n// rnnc helper: the masks' key and mode, kept for backward (rnnc/workspace.h's mask_words).\n"
           "RNNC_KERNEL __launch_bounds__(32) void set_rng(unsigned *rng, unsigned key_low, unsigned key_high, unsigned train) {\n"
           "  if (threadIdx.x != 0) return;\n  rng[0] = key_low;\n  rng[1] = key_high;\n  rng[2] = train;\n}\n";
  if (!p.dropped.empty())
    out += "\n// rnnc helper: DropConnect. out[j] = w[j] times element j's mask at `site`, one mask per call\n"
           "// (counter (j / 8, ~0, ~0, site)): scale (1 / keep) or 0 in training, 1 in evaluation. One thread\n"
           "// draws eight elements (one Philox call).\n"
           "RNNC_KERNEL __launch_bounds__(256) void drop_param(const unsigned *rng, unsigned site, unsigned threshold, real scale,\n"
           "                                                   const " + std::string(isHalf(p.dtype) ? "store" : "real") +
               " *__restrict__ w, " + (isHalf(p.dtype) ? "store" : "real") + " *__restrict__ out, int64_t n) {\n"
           "  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; 8 * q < n; q += gridDim.x * int64_t(blockDim.x)) {\n"
           "    unsigned draw[8];\n"
           "    keep_draws8(rng, site, ~0u, ~0u, unsigned(q), draw);\n"
           "    for (int64_t j = 8 * q; j < n && j < 8 * q + 8; ++j) out[j] = w[j] * keep_value(rng, draw[j - 8 * q], threshold, scale, real(1));\n"
           "  }\n"
           "}\n"
           "\n// rnnc helper: a dropped param's gradient reaches its param through the same mask: g[j] += d[j] mask[j].\n"
           "RNNC_KERNEL __launch_bounds__(256) void fold_dropped_grad(const unsigned *rng, unsigned site, unsigned threshold,\n"
           "                                                          real scale, const real *__restrict__ d, real *__restrict__ g,\n"
           "                                                          int64_t n) {\n"
           "  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; 8 * q < n; q += gridDim.x * int64_t(blockDim.x)) {\n"
           "    unsigned draw[8];\n"
           "    keep_draws8(rng, site, ~0u, ~0u, unsigned(q), draw);\n"
           "    for (int64_t j = 8 * q; j < n && j < 8 * q + 8; ++j) g[j] += d[j] * keep_value(rng, draw[j - 8 * q], threshold, scale, real(1));\n"
           "  }\n"
           "}\n";
  if (CudaScanPrinter::anyRunsInParallel(p)) out += CudaScanPrinter::devicePrelude();
  if (CudaPersistPrinter::anyPersistent(p)) out += CudaPersistPrinter::devicePrelude(p);
  out += "\n" + cudaWorkspaceStruct(p) + "\n";
  CudaPrinter printer(p, sm);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (p.kernels[k].kind == KernelIR::Kind::Fused)
      out += (CudaPersistPrinter::inPersistentStage(p, static_cast<int>(k)) ? printer.stepKernel(p.kernels[k])
                                                                             : printer.kernel(p.kernels[k])) + "\n";
  // Loops that may run persistent: one cooperative kernel each, calling the step functions above
  // or, where blocks own units, these (which the fused variant's kernels a step call too).
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (const CudaPersistPrinter::Shape sh = CudaPersistPrinter::shape(p, static_cast<int>(s)); sh.unit)
      for (int k : p.stages[s].kernels)
        if (p.kernels[k].kind == KernelIR::Kind::Fused) out += printer.unitsKernel(p.kernels[k], sh.unit, sh.chip) + "\n";
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (CudaPersistPrinter::persistent(p, static_cast<int>(s))) {
      const CudaPersistPrinter persist(p, sm, static_cast<int>(s));
      out += persist.kernel() + "\n" + persist.fusedKernels();
    }
  // Loops run in parallel over time: their own kernels (above) step by step, or these.
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (CudaScanPrinter::runsInParallel(p, static_cast<int>(s))) out += CudaScanPrinter(p, sm, static_cast<int>(s)).kernels();
  return out;
}

} // namespace rnnc::codegen
