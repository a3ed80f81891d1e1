// A CUDA emulator for testing generated code on a machine with no GPU: a .cu
// bundle compiles as C++ against these headers (cuda_runtime.h, cublas_v2.h)
// with -DRNNC_CUDA_EMULATOR. Each block of a launch runs its threads as
// fibers with a real barrier for __syncthreads() and a real exchange for
// warp shuffles; the blocks of a grid run in a random order, those of a
// cooperative launch all live at once with a real grid barrier. Launches,
// copies and cuBLAS calls wait in their stream's queue and run when the host
// forces them, the streams in a random order (emulator_streams.h); cuBLAS is
// a plain reference in double. Memory is host memory, 256-byte aligned and
// filled with NaNs when allocated (cuda_runtime.h).
#pragma once

#include "emulator_streams.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <sys/mman.h>
#include <thread>
#include <ucontext.h>
#include <vector>

// AddressSanitizer (the emulator's own tests in the sanitized tier) is told of
// each switch between stacks, as its fiber interface asks.
#if defined(__SANITIZE_ADDRESS__)
#define RNNC_EMULATOR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RNNC_EMULATOR_ASAN 1
#endif
#endif
#ifdef RNNC_EMULATOR_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace rnnc_emulator {

// Per host thread: a cooperative launch runs each block on a thread of its own.
inline thread_local uint3 tIdx, bIdx; // threadIdx is the running fiber's
inline thread_local dim3 bDim, gDim;

#if defined(__x86_64__)
// Switches stacks without the kernel: pushes the callee-saved registers of the
// System V ABI and the SSE/x87 control words on the running stack, stores its
// pointer in *from, and pops the same from `to`. (ucontext's swapcontext also
// saves the signal mask, a system call each time: 85% of an emulated
// persistent kernel's time went there.) A new fiber's stack is laid out as if
// it had switched away at the start of rnnc_emulator_fiber_entry, which calls
// rbx(r12, r13). Weak and hidden: every translation unit that includes this
// header defines it, and the linker keeps one per library.
extern "C" void rnnc_emulator_switch(void **from, void *to);
extern "C" void rnnc_emulator_fiber_entry();
asm(R"(
  .section .text.rnnc_emulator_switch,"axG",@progbits,rnnc_emulator_switch,comdat
  .weak rnnc_emulator_switch
  .hidden rnnc_emulator_switch
  .type rnnc_emulator_switch, @function
  .p2align 4
rnnc_emulator_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size rnnc_emulator_switch, .-rnnc_emulator_switch
  .section .text.rnnc_emulator_fiber_entry,"axG",@progbits,rnnc_emulator_fiber_entry,comdat
  .weak rnnc_emulator_fiber_entry
  .hidden rnnc_emulator_fiber_entry
  .type rnnc_emulator_fiber_entry, @function
  .p2align 4
rnnc_emulator_fiber_entry:
  movq %r12, %rdi
  movq %r13, %rsi
  callq *%rbx
  ud2
  .size rnnc_emulator_fiber_entry, .-rnnc_emulator_fiber_entry
  .text
)");
#endif

/// The threads of one block as fibers on the calling thread: a thread runs
/// until it waits at a barrier, then the next one runs. One host thread per
/// block thread would spend the run switching between 1024 of them on a
/// 2-core machine; fibers switch without the kernel (rnnc_emulator_switch on
/// x86-64, ucontext elsewhere). Blocks are independent, so nothing is lost:
/// within a block only __syncthreads and the warp exchanges order the
/// threads, and both are barriers here.
class Fibers {
public:
  ~Fibers() {
    for (Fiber &f : fibers_) munmap(static_cast<char *>(f.stack) - kGuard, kGuard + kStack);
  }
  /// Runs body(t) for t < n, each on its own stack, switching in ascending
  /// order of t, or descending with `reversed`; returns when all are done.
  void run(unsigned n, bool reversed, const std::function<void(unsigned)> &body) {
    while (fibers_.size() < n) {
      // A stack and, below it, a guard page: an overflow faults, it does not corrupt.
      char *base = static_cast<char *>(
          mmap(nullptr, kGuard + kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
      if (base == MAP_FAILED || mprotect(base, kGuard, PROT_NONE) != 0) std::abort();
      fibers_.push_back(Fiber{});
      fibers_.back().stack = base + kGuard;
    }
    body_ = &body;
    for (unsigned t = 0; t < n; ++t) prepare(t);
    for (unsigned left = n; left > 0;)
      for (unsigned i = 0; i < n; ++i) {
        unsigned t = reversed ? n - 1 - i : i;
        if (fibers_[t].done) continue;
        current_ = t;
        tIdx = uint3{t, 0, 0};
        enter(t);
        if (fibers_[t].done) --left;
      }
  }
  /// Lets the other threads of the block run; returns when this one is next.
  void yield() {
#if defined(__x86_64__)
#ifdef RNNC_EMULATOR_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, schedulerBottom_, schedulerSize_);
#endif
    rnnc_emulator_switch(&fibers_[current_].sp, scheduler_);
#ifdef RNNC_EMULATOR_ASAN
    __sanitizer_finish_switch_fiber(fake, &schedulerBottom_, &schedulerSize_);
#endif
#else
    swapcontext(&fibers_[current_].context, &scheduler_);
#endif
  }
  /// Which thread of the block is running.
  unsigned current() const { return current_; }

private:
  // 256 KiB, reserved and touched as used: far more than a kernel's frame, and
  // small enough that AddressSanitizer's unpoisoning of the stack at each
  // switch stays a memset (where its swapcontext interceptor runs: a 1 MiB
  // stack made the sanitized tier 12x slower).
  static constexpr size_t kStack = size_t(1) << 18;
  static constexpr size_t kGuard = 4096;
  struct Fiber {
#if defined(__x86_64__)
    void *sp = nullptr; // where its registers were pushed when it last switched away
#else
    ucontext_t context;
#endif
    void *stack = nullptr;
    bool done = true;
  };
  /// Makes fiber t start body_(t) at its next switch.
  void prepare(unsigned t) {
    Fiber &f = fibers_[t];
    f.done = false;
#if defined(__x86_64__)
    // From the top: rnnc_emulator_fiber_entry as the return address (so that
    // after ret the stack is 16-byte aligned, as a call needs), then rbp, rbx
    // (what the entry calls), r12 and r13 (its arguments), r14, r15, and the
    // default MXCSR and x87 control word.
    auto *top = reinterpret_cast<uint64_t *>(static_cast<char *>(f.stack) + kStack);
    uint64_t *sp = top - 8;
    sp[7] = reinterpret_cast<uint64_t>(&rnnc_emulator_fiber_entry);
    sp[6] = 0;                                          // rbp
    sp[5] = reinterpret_cast<uint64_t>(&Fibers::start); // rbx
    sp[4] = reinterpret_cast<uint64_t>(this);           // r12
    sp[3] = t;                                          // r13
    sp[2] = sp[1] = 0;                                  // r14, r15
    sp[0] = 0x1f80u | (uint64_t{0x037fu} << 32);        // MXCSR, x87 control word
    f.sp = sp;
#else
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStack;
    f.context.uc_link = &scheduler_;
    makecontext(&f.context, reinterpret_cast<void (*)()>(&Fibers::start_here), 1, t);
#endif
  }
  /// Runs fiber t until it yields or ends.
  void enter(unsigned t) {
#if defined(__x86_64__)
#ifdef RNNC_EMULATOR_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, fibers_[t].stack, kStack);
#endif
    rnnc_emulator_switch(&scheduler_, fibers_[t].sp);
#ifdef RNNC_EMULATOR_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
#else
    swapcontext(&scheduler_, &fibers_[t].context);
#endif
  }
  /// Fiber t's whole life: body_(t), then back to the scheduler for good.
  static void start(Fibers *self, unsigned t) {
#if defined(__x86_64__) && defined(RNNC_EMULATOR_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &self->schedulerBottom_, &self->schedulerSize_);
#endif
    (*self->body_)(t);
    self->fibers_[t].done = true;
#if defined(__x86_64__)
#ifdef RNNC_EMULATOR_ASAN
    __sanitizer_start_switch_fiber(nullptr, self->schedulerBottom_, self->schedulerSize_);
#endif
    rnnc_emulator_switch(&self->fibers_[t].sp, self->scheduler_);
    std::abort(); // never resumed
#endif
  }
  static void start_here(unsigned t); // ucontext's entry: start(&fibers(), t); uc_link returns
  std::vector<Fiber> fibers_;
#if defined(__x86_64__)
  void *scheduler_ = nullptr;
#ifdef RNNC_EMULATOR_ASAN
  const void *schedulerBottom_ = nullptr; // the scheduler's stack, for AddressSanitizer
  size_t schedulerSize_ = 0;
#endif
#else
  ucontext_t scheduler_;
#endif
  const std::function<void(unsigned)> *body_ = nullptr;
  unsigned current_ = 0;
};

inline Fibers &fibers() {
  static thread_local Fibers f;
  return f;
}

inline void Fibers::start_here(unsigned t) { start(&fibers(), t); }

/// A barrier for the threads of one block: each waits, letting the others
/// run, until the last one arrives.
class Barrier {
public:
  explicit Barrier(unsigned n) : n_(n) {}
  void wait() {
    unsigned gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      return;
    }
    while (gen == gen_) fibers().yield();
  }

private:
  unsigned n_, arrived_ = 0, gen_ = 0;
};

class Grid;

struct Block {
  Barrier barrier;
  std::vector<Barrier> warps; // a shuffle's: the 32 lanes of one warp exchange (a full mask)
  std::vector<double> lanes;   // what each thread offers a shuffle
  std::vector<unsigned> fragments; // what each thread offers an mma.sync: 4 registers of A, 2 of B
  Grid *grid = nullptr;      // a cooperative launch's: the grid barrier
  unsigned gridArrived = 0, gridGeneration = 0;
  std::vector<double> dynamic; // the launch's dynamic shared memory (16-byte aligned), all bits set
  explicit Block(unsigned n, size_t dynamicBytes = 0)
      : barrier(n), lanes(n), fragments(6 * size_t(n)), dynamic((dynamicBytes + sizeof(double) - 1) / sizeof(double)) {
    for (unsigned w = 0; w < n; w += 32) warps.emplace_back(std::min(32u, n - w));
    if (!dynamic.empty()) std::memset(dynamic.data(), 0xff, dynamic.size() * sizeof(double));
  }
};
inline thread_local Block *block = nullptr;

/// The blocks of a cooperative launch, all live at once as a GPU keeps them:
/// each on a host thread of its own (its fibers keep their stacks while it
/// waits at the grid barrier), but one running at a time, passing a turn. A
/// block runs until all its threads wait at the grid barrier or have ended;
/// then the next block still to reach it runs; when all wait, the barrier
/// opens and they run again in an order drawn afresh. So a missing grid
/// barrier shows for sure: the first block runs its next phase before the
/// others have run this one.
class Grid {
public:
  Grid(unsigned n, std::mt19937_64 &rng) : state_(n, Ready), order_(n), rng_(rng) {
    for (unsigned b = 0; b < n; ++b) order_[b] = b;
    std::shuffle(order_.begin(), order_.end(), rng_);
    turn_ = order_[0];
  }
  /// Waits for block b's first turn.
  void begin(unsigned b) {
    std::unique_lock<std::mutex> lock(mutex_);
    waitTurn(lock, b);
  }
  /// Block b's threads all wait at the barrier: returns when it has opened
  /// and it is b's turn again.
  void arrive(unsigned b) {
    std::unique_lock<std::mutex> lock(mutex_);
    state_[b] = Waiting;
    pass();
    waitTurn(lock, b);
  }
  /// Block b's threads have all ended.
  void end(unsigned b) {
    std::unique_lock<std::mutex> lock(mutex_);
    state_[b] = Done;
    pass();
  }

private:
  enum State { Ready, Waiting, Done };
  void waitTurn(std::unique_lock<std::mutex> &lock, unsigned b) {
    // A GPU would hang; the emulator says so after a minute.
    if (!turned_.wait_for(lock, std::chrono::seconds(60), [&] { return turn_ == b; }))
      fault("a cooperative launch's block waited a minute for its turn (a grid barrier some block never reaches)");
  }
  /// The turn to the next block still to reach the barrier; when none is
  /// left, the barrier opens.
  void pass() {
    for (unsigned b : order_)
      if (state_[b] == Ready) {
        turn_ = b;
        turned_.notify_all();
        return;
      }
    const auto waiting = std::count(state_.begin(), state_.end(), Waiting);
    if (waiting == 0) return; // all ended
    if (waiting < static_cast<long>(state_.size()))
      fault("a cooperative launch's block ended while others wait at a grid barrier it never reached (a GPU hangs)");
    std::fill(state_.begin(), state_.end(), Ready);
    std::shuffle(order_.begin(), order_.end(), rng_);
    turn_ = order_[0];
    turned_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable turned_;
  std::vector<State> state_;
  std::vector<unsigned> order_;
  std::mt19937_64 &rng_;
  unsigned turn_ = 0;
};

/// A launch: its blocks one after another in a random order, each with
/// `dynamicBytes` of dynamic shared memory (all bits set, as Block makes it).
template <class... Args>
inline void run_blocks(void (*fn)(Args...), unsigned grid, unsigned threads, size_t dynamicBytes, Args... args) {
  // The blocks in a random order: none may depend on another having run.
  std::vector<unsigned> order(grid);
  for (unsigned b = 0; b < grid; ++b) order[b] = b;
  std::shuffle(order.begin(), order.end(), device().rng());
  for (unsigned b : order) {
    Block shared(threads, dynamicBytes);
    bIdx = uint3{b, 0, 0};
    bDim = dim3(threads);
    gDim = dim3(grid);
    block = &shared;
    // Odd blocks run their threads last to first: a missing barrier shows
    // whichever way the threads' data flows.
    fibers().run(threads, b % 2 == 1, [&](unsigned) { fn(args...); });
  }
}

template <class... Args>
inline void run(void (*fn)(Args...), unsigned grid, unsigned threads, Args... args) {
  run_blocks(fn, grid, threads, 0, args...);
}

/// A cooperative launch: every block on a host thread of its own, one
/// running at a time (Grid), with `dynamicBytes` of dynamic shared memory each.
template <class... Args>
inline void run_cooperative(void (*fn)(Args...), unsigned grid, unsigned threads, size_t dynamicBytes, Args... args) {
  Grid g(grid, device().rng());
  std::vector<std::thread> blocks;
  for (unsigned b = 0; b < grid; ++b)
    blocks.emplace_back([&, b] {
      g.begin(b);
      Block shared(threads, dynamicBytes);
      shared.grid = &g;
      bIdx = uint3{b, 0, 0};
      bDim = dim3(threads);
      gDim = dim3(grid);
      block = &shared;
      fibers().run(threads, b % 2 == 1, [&](unsigned) { fn(args...); });
      block = nullptr;
      g.end(b);
    });
  for (std::thread &t : blocks) t.join();
}

/// Queues the launch on `stream`; false for a launch a GPU would refuse or
/// one the capture rules forbid.
template <class... Args>
inline bool launch(const void *kernel, unsigned grid, unsigned threads, EmuStream *stream, Args... args) {
  if (threads == 0 || threads > 1024 || threads % 32 || grid == 0) return false;
  auto fn = reinterpret_cast<void (*)(Args...)>(const_cast<void *>(kernel));
  return issue(stream, [=] { run(fn, grid, threads, args...); });
}

/// The emulated GPU's limits: an H100's shared memory, and RNNC_EMULATOR_SMS
/// multiprocessors (default 5: few blocks, and an odd count, so work splits
/// unevenly), one block of up to 2048 threads each at a time per 228 KiB.
struct Limits {
  int sms = 5;
  size_t sharedPerBlock = 48 << 10;         // without opting in
  size_t sharedPerBlockOptin = 227 << 10;   // cudaFuncAttributeMaxDynamicSharedMemorySize's ceiling
  size_t sharedPerSm = 228 << 10;
  int threadsPerSm = 2048;
  Limits() {
    if (const char *n = std::getenv("RNNC_EMULATOR_SMS")) sms = std::max(1, std::atoi(n));
  }
};
inline const Limits &limits() {
  static const Limits l;
  return l;
}

/// What cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, n) allowed each kernel.
inline std::vector<std::pair<const void *, size_t>> &dynamicAllowed() {
  static std::vector<std::pair<const void *, size_t>> allowed;
  return allowed;
}
inline size_t dynamicLimit(const void *kernel) {
  for (const auto &[k, n] : dynamicAllowed())
    if (k == kernel) return n;
  return limits().sharedPerBlock;
}

/// Blocks of `threads` with `dynamicBytes` each that one multiprocessor holds at once.
inline int blocksPerSm(unsigned threads, size_t dynamicBytes) {
  const Limits &l = limits();
  const int byThreads = l.threadsPerSm / static_cast<int>(threads);
  const int byShared = dynamicBytes ? static_cast<int>(l.sharedPerSm / dynamicBytes) : byThreads;
  return std::min(byThreads, byShared);
}

/// Queues a launch with `dynamicBytes` of dynamic shared memory per block;
/// false where a GPU would refuse it (more than the kernel was allowed).
template <class... Args>
inline bool launch_shared(const void *kernel, unsigned grid, unsigned threads, size_t dynamicBytes, EmuStream *stream,
                          Args... args) {
  if (threads == 0 || threads > 1024 || threads % 32 || grid == 0) return false;
  if (dynamicBytes > dynamicLimit(kernel)) return false;
  auto fn = reinterpret_cast<void (*)(Args...)>(const_cast<void *>(kernel));
  return issue(stream, [=] { run_blocks(fn, grid, threads, dynamicBytes, args...); });
}

/// Queues a cooperative launch; false where a GPU would refuse it: more
/// dynamic shared memory than the kernel was allowed, or more blocks than
/// the device holds at once.
template <class... Args>
inline bool launch_cooperative(const void *kernel, unsigned grid, unsigned threads, size_t dynamicBytes,
                               EmuStream *stream, Args... args) {
  if (threads == 0 || threads > 1024 || threads % 32 || grid == 0) return false;
  if (dynamicBytes > dynamicLimit(kernel)) return false;
  if (grid > static_cast<unsigned>(limits().sms * blocksPerSm(threads, dynamicBytes))) return false;
  auto fn = reinterpret_cast<void (*)(Args...)>(const_cast<void *>(kernel));
  return issue(stream, [=] { run_cooperative(fn, grid, threads, dynamicBytes, args...); });
}

inline void syncthreads() { block->barrier.wait(); }

/// The grid barrier of a cooperative launch: the block's threads all arrive,
/// the last of them waits for the other blocks' (Grid::arrive).
inline void grid_sync() {
  Block &b = *block;
  if (!b.grid) fault("a grid barrier in a launch that is not cooperative");
  const unsigned generation = b.gridGeneration;
  if (++b.gridArrived == bDim.x) {
    b.gridArrived = 0;
    b.grid->arrive(bIdx.x);
    ++b.gridGeneration;
    return;
  }
  while (generation == b.gridGeneration) fibers().yield();
}

/// The block's dynamic shared memory (extern __shared__ on a GPU).
inline void *dynamic_shared() { return block->dynamic.data(); }

template <class T> inline T shfl_xor(T v, int offset) {
  Barrier &warp = block->warps[tIdx.x / 32];
  block->lanes[tIdx.x] = static_cast<double>(v);
  warp.wait();
  unsigned from = tIdx.x ^ static_cast<unsigned>(offset);
  T r = from < bDim.x ? static_cast<T>(block->lanes[from]) : v;
  warp.wait();
  return r;
}

/// __shfl_sync over a whole warp: the value of lane `src` (of 32) of the caller's warp.
template <class T> inline T shfl(T v, int src) {
  Barrier &warp = block->warps[tIdx.x / 32];
  block->lanes[tIdx.x] = static_cast<double>(v);
  warp.wait();
  const unsigned from = (tIdx.x & ~31u) + (static_cast<unsigned>(src) & 31u);
  T r = from < bDim.x ? static_cast<T>(block->lanes[from]) : v;
  warp.wait();
  return r;
}

/// __shfl_up_sync over a whole warp: the value of the lane `delta` below,
/// or the caller's own where there is none (lanes of one warp only).
template <class T> inline T shfl_up(T v, int delta) {
  Barrier &warp = block->warps[tIdx.x / 32];
  block->lanes[tIdx.x] = static_cast<double>(v);
  warp.wait();
  const unsigned lane = tIdx.x & 31u;
  T r = lane >= static_cast<unsigned>(delta) ? static_cast<T>(block->lanes[tIdx.x - static_cast<unsigned>(delta)]) : v;
  warp.wait();
  return r;
}

/// One mma.sync of a warp with d as c: the 32 lanes offer their registers of A
/// (16 x `depth`) and B (`depth` x 8), and each gets its four elements of
/// d += A B, summed exactly in double and rounded once to float: d[i] of lane l
/// is row l/4 + 8 (i/2), column 2 (l%4) + i%2. `a(f, row, k)` and `b(f, k,
/// col)` read an element from the warp's registers f (6 a lane: A's 4, B's 2).
template <class ElementA, class ElementB>
inline void mma_sync(float d[4], const unsigned a[4], const unsigned b[2], unsigned depth, ElementA elementA,
                     ElementB elementB) {
  Block &blk = *block;
  if (bDim.x % 32) fault("an mma.sync in a block of a partial warp");
  unsigned *mine = &blk.fragments[6 * size_t(tIdx.x)];
  std::copy(a, a + 4, mine);
  std::copy(b, b + 2, mine + 4);
  Barrier &warp = blk.warps[tIdx.x / 32];
  warp.wait();
  const unsigned *f = &blk.fragments[6 * size_t(tIdx.x & ~31u)];
  const unsigned lane = tIdx.x & 31u;
  float out[4];
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = lane / 4 + 8 * (i / 2), col = 2 * (lane % 4) + i % 2;
    double sum = d[i];
    for (unsigned k = 0; k < depth; ++k) sum += elementA(f, row, k) * elementB(f, k, col);
    out[i] = static_cast<float>(sum);
  }
  warp.wait(); // every lane has read the fragments before any offers the next ones
  std::copy(out, out + 4, d);
}

/// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, `decode`
/// reading a 16-bit value. The PTX ISA's layout ("Matrix Fragments for
/// mma.m16n8k16 with floating point type"): of lane l, g = l / 4, c = 2 (l % 4);
/// A's register q holds row g + 8 (q % 2), columns c + 8 (q / 2) + {0, 1} (low
/// half first); B's register q column g, rows c + 8 q + {0, 1}.
template <class Decode> inline void mma_m16n8k16(float d[4], const unsigned a[4], const unsigned b[2], Decode decode) {
  auto half = [&](unsigned word, unsigned high) { return double(decode(static_cast<unsigned short>(high ? word >> 16 : word))); };
  mma_sync(d, a, b, 16,
           [&](const unsigned *f, unsigned row, unsigned k) {
             return half(f[6 * ((row % 8) * 4 + (k % 8) / 2) + row / 8 + 2 * (k / 8)], k % 2);
           },
           [&](const unsigned *f, unsigned k, unsigned col) { return half(f[6 * (col * 4 + (k % 8) / 2) + 4 + k / 8], k % 2); });
}

/// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: a register a value, read as
/// a tensor core reads TF32 (the low 13 bits of its mantissa ignored). Of lane l,
/// g = l / 4, t = l % 4: A's register q holds row g + 8 (q % 2), column t + 4 (q / 2);
/// B's register q row t + 4 q, column g.
inline void mma_m16n8k8_tf32(float d[4], const unsigned a[4], const unsigned b[2]) {
  auto tf32 = [](unsigned bits) {
    bits &= 0xffffe000u;
    float x;
    std::memcpy(&x, &bits, 4);
    return double(x);
  };
  mma_sync(d, a, b, 8,
           [&](const unsigned *f, unsigned row, unsigned k) { return tf32(f[6 * ((row % 8) * 4 + k % 4) + row / 8 + 2 * (k / 4)]); },
           [&](const unsigned *f, unsigned k, unsigned col) { return tf32(f[6 * (col * 4 + k % 4) + 4 + k / 4]); });
}

} // namespace rnnc_emulator

#define threadIdx (::rnnc_emulator::tIdx)
#define blockIdx (::rnnc_emulator::bIdx)
#define blockDim (::rnnc_emulator::bDim)
#define gridDim (::rnnc_emulator::gDim)
#define __syncthreads() ::rnnc_emulator::syncthreads()
#define __shfl_xor_sync(mask, v, o) ::rnnc_emulator::shfl_xor((v), (o))
#define __shfl_up_sync(mask, v, d) ::rnnc_emulator::shfl_up((v), (d))
#define __shfl_sync(mask, v, src) ::rnnc_emulator::shfl((v), (src))
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
// Per host thread, as blocks are: a cooperative launch's live at once.
#define __shared__ static thread_local
