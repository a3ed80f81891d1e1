// A CUDA emulator for testing generated code on a machine with no GPU: a .cu
// bundle compiles as C++ against these headers (cuda_runtime.h, cublas_v2.h)
// with -DRNNC_CUDA_EMULATOR. Each block of a launch runs its threads as host
// threads with a real barrier for __syncthreads() and a real exchange for
// warp shuffles, blocks one after another; cuBLAS is a plain reference in
// double. Streams run in issue order; a stream being captured records its
// work and a graph launch replays it. Memory is host memory.
#pragma once

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace rnnc_emulator {

/// A barrier for the threads of one block (C++17 has none).
class Barrier {
public:
  explicit Barrier(unsigned n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    unsigned gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen != gen_; });
  }

private:
  std::mutex m_;
  std::condition_variable cv_;
  unsigned n_, arrived_ = 0, gen_ = 0;
};

struct Block {
  Barrier barrier;
  std::vector<double> lanes; // what each thread offers a shuffle
  explicit Block(unsigned n) : barrier(n), lanes(n) {}
};

inline thread_local uint3 tIdx, bIdx;
inline thread_local dim3 bDim, gDim;
inline thread_local Block *block = nullptr;

/// Work recorded while a stream is captured, replayed by a graph launch.
struct Graph {
  std::vector<std::function<void()>> work;
};
inline Graph *&capturing() {
  static Graph *g = nullptr;
  return g;
}
/// Runs `f` now, or records it when a capture is on.
inline void issue(std::function<void()> f) {
  if (capturing()) capturing()->work.push_back(std::move(f));
  else f();
}

/// Host threads that stand for the threads of a block, kept between
/// launches: starting a thousand threads per block would cost more than the
/// kernels.
class Pool {
public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      ++job_;
    }
    start_.notify_all();
    for (std::thread &t : threads_) t.join();
  }
  /// Runs body(t) for t < n on n threads at once; returns when all are done.
  void run(unsigned n, const std::function<void(unsigned)> &body) {
    std::unique_lock<std::mutex> lock(m_);
    while (threads_.size() < n) {
      unsigned id = static_cast<unsigned>(threads_.size());
      threads_.emplace_back([this, id] { work(id); });
    }
    body_ = &body;
    count_ = n;
    running_ = n;
    ++job_;
    start_.notify_all();
    done_.wait(lock, [&] { return running_ == 0; });
  }

private:
  void work(unsigned id) {
    unsigned seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(m_);
      start_.wait(lock, [&] { return job_ != seen; });
      seen = job_;
      if (stop_) return;
      if (id >= count_) continue;
      const std::function<void(unsigned)> *body = body_;
      lock.unlock();
      (*body)(id);
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }
  std::mutex m_;
  std::condition_variable start_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(unsigned)> *body_ = nullptr;
  unsigned count_ = 0, running_ = 0, job_ = 0;
  bool stop_ = false;
};

inline Pool &pool() {
  static Pool p;
  return p;
}

template <class... Args>
inline void run(void (*fn)(Args...), unsigned grid, unsigned threads, Args... args) {
  for (unsigned b = 0; b < grid; ++b) {
    Block shared(threads);
    pool().run(threads, [&](unsigned t) {
      tIdx = uint3{t, 0, 0};
      bIdx = uint3{b, 0, 0};
      bDim = dim3(threads);
      gDim = dim3(grid);
      block = &shared;
      fn(args...);
    });
  }
}

template <class... Args>
inline bool launch(const void *kernel, unsigned grid, unsigned threads, void * /*stream*/, Args... args) {
  if (threads == 0 || threads > 1024 || threads % 32 || grid == 0) return false;
  auto fn = reinterpret_cast<void (*)(Args...)>(const_cast<void *>(kernel));
  issue([=] { run(fn, grid, threads, args...); });
  return true;
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
