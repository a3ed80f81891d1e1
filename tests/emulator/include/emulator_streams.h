// Streams, events and graph capture with the CUDA runtime's rules, run as
// unkindly as a GPU may: work waits in its stream's queue until the host
// forces it (a stream or device synchronize, a blocking copy, cudaFree), and
// then only what is forced runs, the streams free to run taking turns in an
// order the seed picks (RNNC_EMULATOR_SEED, default 1; see Device::drain), so
// only an event wait or the legacy stream's implicit synchronization orders
// two streams. Captures follow
// cudaStreamCaptureModeThreadLocal: an allocation or a synchronize while one
// is on, or the legacy stream used while a blocking stream captures, fails
// and invalidates it. Compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (as
// nvcc --default-stream per-thread), stream 0 is a stream of its own that
// synchronizes with no other. One host thread drives it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <vector>

namespace rnnc_emulator {

/// The work a capture recorded, replayed by a graph launch.
struct Graph {
  std::vector<std::function<void()>> work;
};

/// One entry of a stream's queue: work, an event's record, or a wait for one.
struct Item {
  enum Kind { Work, Record, Wait } kind;
  std::function<void()> run; // Work
  uint64_t ticket = 0;       // Record, Wait: the record this is or waits for
};

[[noreturn]] inline void fault(const char *what) {
  std::fprintf(stderr, "emulated CUDA: %s\n", what);
  std::abort();
}

} // namespace rnnc_emulator

struct EmuStream {
  bool blocking = true; // created without cudaStreamNonBlocking: synchronizes with the legacy stream
  std::deque<rnnc_emulator::Item> queue;
  rnnc_emulator::Graph *capture = nullptr; // while captured: where its work goes
  bool invalidated = false;                // the capture broke a rule; EndCapture fails
};
struct EmuEvent {
  uint64_t ticket = 0; // of its last record; 0: never recorded
};

namespace rnnc_emulator {

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
constexpr bool kPerThreadDefaultStream = true;
#else
constexpr bool kPerThreadDefaultStream = false;
#endif

class Device {
public:
  Device() {
    const char *seed = std::getenv("RNNC_EMULATOR_SEED");
    const unsigned long long n = seed ? std::strtoull(seed, nullptr, 10) : 1;
    rng_.seed(n);
    policy_ = static_cast<int>(n % 3);
    all_ = {&legacy_, &perThread_};
  }

  EmuStream *create(bool blocking) {
    owned_.push_back(std::make_unique<EmuStream>());
    owned_.back()->blocking = blocking;
    all_.push_back(owned_.back().get());
    return owned_.back().get();
  }
  /// The stream `s` names: stream 0 is the legacy stream, or the thread's own.
  EmuStream *resolve(EmuStream *s) { return s ? s : kPerThreadDefaultStream ? &perThread_ : &legacy_; }
  bool isLegacy(const EmuStream *s) const { return s == &legacy_; }

  /// The stream being captured, or null.
  EmuStream *capturing() const {
    for (EmuStream *s : all_)
      if (s->capture) return s;
    return nullptr;
  }
  /// A call not allowed while a capture is on (an allocation, a
  /// synchronize, a blocking copy): true after invalidating it.
  bool captureForbids() {
    EmuStream *c = capturing();
    if (c) c->invalidated = true;
    return c != nullptr;
  }

  /// Queues `item` on `s`, with the legacy stream's implicit ordering: work
  /// on it waits for all earlier work of the blocking streams, and their
  /// later work waits for it. False when the legacy stream is used while a
  /// blocking stream captures (cudaErrorStreamCaptureImplicit).
  bool push(EmuStream *s, Item item) {
    if (s->capture) {
      if (item.kind != Item::Work) return s->invalidated = true, false;
      s->capture->work.push_back(std::move(item.run));
      return true;
    }
    if (!isLegacy(s)) {
      s->queue.push_back(std::move(item));
      return true;
    }
    for (EmuStream *t : all_)
      if (t->capture && t->blocking) return t->invalidated = true, false;
    for (EmuStream *t : all_)
      if (t != s && t->blocking && !t->queue.empty()) s->queue.push_back(Item{Item::Wait, {}, record(t)});
    s->queue.push_back(std::move(item));
    const uint64_t after = record(s);
    for (EmuStream *t : all_)
      if (t != s && t->blocking) t->queue.push_back(Item{Item::Wait, {}, after});
    return true;
  }
  /// Queues a record on `s`; returns its ticket.
  uint64_t record(EmuStream *s) {
    done_.push_back(false);
    const uint64_t ticket = done_.size() - 1;
    s->queue.push_back(Item{Item::Record, {}, ticket});
    return ticket;
  }
  bool reached(uint64_t ticket) const { return ticket == 0 || done_[ticket]; }

  /// Runs the first `count` items of `s`'s queue (all: SIZE_MAX) and only
  /// the work they wait for, nothing else: what no synchronize, copy or
  /// event wait forces stays queued. Among the streams with needed work, a
  /// random runnable one runs until it must wait or runs out of needed work,
  /// then another random one, with one of three policies (the seed modulo 3):
  /// run ahead (1: a stream never yields, so it runs as far ahead of the
  /// others as it can), eager (2: as run ahead, but a record that ends
  /// another stream's wait hands over to that stream at once), interleave
  /// (0: yields after each item half the time). A wait that can never end
  /// aborts.
  void drain(EmuStream *s, size_t count) {
    std::vector<std::pair<EmuStream *, size_t>> need; // streams and how many of their first items must run
    auto needs = [&](EmuStream *t, size_t n) { // true when that needs more than before
      n = std::min(n, t->queue.size());
      for (auto &[u, m] : need)
        if (u == t) {
          if (n <= m) return false;
          m = n;
          return true;
        }
      need.push_back({t, n});
      return true;
    };
    needs(s, count);
    // The records the needed waits wait for are needed too, and what comes
    // before them: until no needed prefix grows.
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t k = 0; k < need.size(); ++k)
        for (size_t i = 0; i < need[k].second; ++i) {
          const Item &item = need[k].first->queue[i];
          if (item.kind != Item::Wait || reached(item.ticket)) continue;
          for (EmuStream *t : all_)
            for (size_t j = 0; j < t->queue.size(); ++j)
              if (t->queue[j].kind == Item::Record && t->queue[j].ticket == item.ticket) grew = needs(t, j + 1) || grew;
        }
    }
    auto left = [&](EmuStream *t) -> size_t & {
      for (auto &[u, m] : need)
        if (u == t) return m;
      static size_t none;
      return none = 0;
    };
    auto runnable = [&](EmuStream *t) {
      return t && left(t) > 0 && (t->queue.front().kind != Item::Wait || reached(t->queue.front().ticket));
    };
    EmuStream *running = nullptr;
    for (;;) {
      bool more = false;
      for (auto &[u, m] : need) more = more || m > 0;
      if (!more) return;
      if (!runnable(running) || (policy_ == 0 && rng_() % 2 == 0)) {
        std::vector<EmuStream *> ready;
        for (auto &[u, m] : need)
          if (runnable(u)) ready.push_back(u);
        if (ready.empty()) fault("deadlock: every stream with work waits for an event that is never reached");
        running = ready[rng_() % ready.size()];
      }
      Item item = std::move(running->queue.front());
      running->queue.pop_front();
      --left(running);
      if (item.kind == Item::Work) item.run();
      if (item.kind != Item::Record) continue;
      done_[item.ticket] = true;
      if (policy_ == 2)
        for (auto &[u, m] : need)
          if (m > 0 && u->queue.front().kind == Item::Wait && u->queue.front().ticket == item.ticket) running = u;
    }
  }
  void drainStream(EmuStream *s) { drain(s, SIZE_MAX); }
  void drainAll() {
    for (EmuStream *s : all_) drain(s, SIZE_MAX);
  }

  std::mt19937_64 &rng() { return rng_; }

private:
  EmuStream legacy_, perThread_;
  std::vector<std::unique_ptr<EmuStream>> owned_;
  std::vector<EmuStream *> all_;
  std::vector<bool> done_{true}; // by ticket; ticket 0 is "never recorded"
  std::mt19937_64 rng_;
  int policy_ = 1; // how streams take turns (drain)
};

inline Device &device() {
  static Device d;
  return d;
}

/// Queues `f` on stream `s` (0: the default stream); false where the
/// capture rules forbid it.
inline bool issue(EmuStream *s, std::function<void()> f) {
  Device &d = device();
  return d.push(d.resolve(s), Item{Item::Work, std::move(f), 0});
}

} // namespace rnnc_emulator
