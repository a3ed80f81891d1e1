// A CUDA emulator for testing generated code on a machine with no GPU: a .cu
// bundle compiles as C++ against these headers (cuda_runtime.h, cublas_v2.h)
// with -DRNNC_CUDA_EMULATOR. Each block of a launch runs its threads as
// fibers with a real barrier for __syncthreads() and a real exchange for
// warp shuffles; the blocks of a grid run in a random order. Launches,
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
#include <functional>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace rnnc_emulator {

inline uint3 tIdx, bIdx; // threadIdx is the running fiber's
inline dim3 bDim, gDim;

/// The threads of one block as fibers on the calling thread (ucontext): a
/// thread runs until it waits at a barrier, then the next one runs. One host
/// thread per block thread would spend the run switching between 1024 of
/// them on a 2-core machine; fibers switch without the kernel. Blocks are
/// independent, so nothing is lost: within a block only __syncthreads and
/// the warp exchanges order the threads, and both are barriers here.
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
      fibers_.push_back(Fiber{{}, base + kGuard, true});
    }
    body_ = &body;
    for (unsigned t = 0; t < n; ++t) {
      Fiber &f = fibers_[t];
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = f.stack;
      f.context.uc_stack.ss_size = kStack;
      f.context.uc_link = &scheduler_;
      makecontext(&f.context, reinterpret_cast<void (*)()>(&Fibers::start), 1, t);
      f.done = false;
    }
    for (unsigned left = n; left > 0;)
      for (unsigned i = 0; i < n; ++i) {
        unsigned t = reversed ? n - 1 - i : i;
        if (fibers_[t].done) continue;
        current_ = t;
        tIdx = uint3{t, 0, 0};
        swapcontext(&scheduler_, &fibers_[t].context);
        if (fibers_[t].done) --left;
      }
  }
  /// Lets the other threads of the block run; returns when this one is next.
  void yield() { swapcontext(&fibers_[current_].context, &scheduler_); }
  /// Which thread of the block is running.
  unsigned current() const { return current_; }

private:
  // 256 KiB, reserved and touched as used: far more than a kernel's frame, and
  // small enough that AddressSanitizer's unpoisoning of the stack at each
  // switch stays a memset (a 1 MiB stack made the sanitized tier 12x slower).
  static constexpr size_t kStack = size_t(1) << 18;
  static constexpr size_t kGuard = 4096;
  struct Fiber {
    ucontext_t context;
    void *stack;
    bool done;
  };
  static void start(unsigned t);
  std::vector<Fiber> fibers_;
  ucontext_t scheduler_;
  const std::function<void(unsigned)> *body_ = nullptr;
  unsigned current_ = 0;
};

inline Fibers &fibers() {
  static Fibers f;
  return f;
}

inline void Fibers::start(unsigned t) {
  Fibers &self = fibers();
  (*self.body_)(t);
  self.fibers_[t].done = true; // uc_link returns to the scheduler
}

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

struct Block {
  Barrier barrier;
  std::vector<double> lanes; // what each thread offers a shuffle
  explicit Block(unsigned n) : barrier(n), lanes(n) {}
};
inline Block *block = nullptr;

template <class... Args>
inline void run(void (*fn)(Args...), unsigned grid, unsigned threads, Args... args) {
  // The blocks in a random order: none may depend on another having run.
  std::vector<unsigned> order(grid);
  for (unsigned b = 0; b < grid; ++b) order[b] = b;
  std::shuffle(order.begin(), order.end(), device().rng());
  for (unsigned b : order) {
    Block shared(threads);
    bIdx = uint3{b, 0, 0};
    bDim = dim3(threads);
    gDim = dim3(grid);
    block = &shared;
    // Odd blocks run their threads last to first: a missing barrier shows
    // whichever way the threads' data flows.
    fibers().run(threads, b % 2 == 1, [&](unsigned) { fn(args...); });
  }
}

/// Queues the launch on `stream`; false for a launch a GPU would refuse or
/// one the capture rules forbid.
template <class... Args>
inline bool launch(const void *kernel, unsigned grid, unsigned threads, EmuStream *stream, Args... args) {
  if (threads == 0 || threads > 1024 || threads % 32 || grid == 0) return false;
  auto fn = reinterpret_cast<void (*)(Args...)>(const_cast<void *>(kernel));
  return issue(stream, [=] { run(fn, grid, threads, args...); });
}

inline void syncthreads() { block->barrier.wait(); }

template <class T> inline T shfl_xor(T v, int offset) {
  block->lanes[tIdx.x] = static_cast<double>(v);
  block->barrier.wait();
  unsigned from = tIdx.x ^ static_cast<unsigned>(offset);
  T r = from < bDim.x ? static_cast<T>(block->lanes[from]) : v;
  block->barrier.wait();
  return r;
}

/// __shfl_up_sync over a whole warp: the value of the lane `delta` below,
/// or the caller's own where there is none (lanes of one warp only).
template <class T> inline T shfl_up(T v, int delta) {
  block->lanes[tIdx.x] = static_cast<double>(v);
  block->barrier.wait();
  const unsigned lane = tIdx.x & 31u;
  T r = lane >= static_cast<unsigned>(delta) ? static_cast<T>(block->lanes[tIdx.x - static_cast<unsigned>(delta)]) : v;
  block->barrier.wait();
  return r;
}

} // namespace rnnc_emulator

#define threadIdx (::rnnc_emulator::tIdx)
#define blockIdx (::rnnc_emulator::bIdx)
#define blockDim (::rnnc_emulator::bDim)
#define gridDim (::rnnc_emulator::gDim)
#define __syncthreads() ::rnnc_emulator::syncthreads()
#define __shfl_xor_sync(mask, v, o) ::rnnc_emulator::shfl_xor((v), (o))
#define __shfl_up_sync(mask, v, d) ::rnnc_emulator::shfl_up((v), (d))
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
