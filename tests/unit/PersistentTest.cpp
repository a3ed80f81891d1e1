// rnnc/persistent.h: the run-time choice between a loop's persistent kernel
// and its launches step by step. The rows a block owns and the shared memory
// they take, the modes, and where the persistent kernel's 32-bit indices
// would not reach (indicesFit): it must then run step by step, even forced.
#include "rnnc/persistent.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace rnnc;

namespace {

/// An LSTM's loop, forward: one product W_hh [4H x H], two launches a step,
/// one grid barrier, blocks owning units of H, its cell sweeping 4H.
persist::Loop lstm(const persist::Product &product, int64_t H) { return {&product, 1, 2, 4, 1, H, 4 * H}; }

/// Every block fits on a multiprocessor.
int roomy(int64_t) { return 1; }

} // namespace

TEST_CASE("a block owns its units' rows of every piece, and their weights in shared memory", "[persistent]") {
  const persist::Product w{4 * 768, 768};
  const persist::Loop l = lstm(w, 768);
  CHECK(persist::rowsPerBlock(l, w, 132) == 4 * 6); // ceil(768 / 132) units, four pieces
  CHECK(persist::sharedBytes(l, 132) == 4 * 6 * 768 * 4);
  persist::Loop slices = l;
  slices.units = 0; // a slice of the outputs instead
  CHECK(persist::rowsPerBlock(slices, w, 132) == (4 * 768 + 131) / 132);
}

TEST_CASE("the modes: stepwise never persistent, persistent whenever the weights fit", "[persistent]") {
  const persist::Product w{4 * 256, 256};
  const persist::Loop l = lstm(w, 256);
  const persist::Gpu gpu = persist::h100();
  CHECK(persist::choose(l, gpu, 16, persist::Mode::Stepwise, roomy).grid == 0);
  const persist::Choice forced = persist::choose(l, gpu, 16, persist::Mode::Persistent, roomy);
  CHECK(forced.grid == 132);
  CHECK(forced.shared == persist::sharedBytes(l, 132));
  persist::Gpu small = gpu;
  small.sharedPerBlock = 1024;
  CHECK(persist::choose(l, small, 16, persist::Mode::Persistent, roomy).grid == 0);
  persist::Gpu old = gpu;
  old.cooperative = false;
  CHECK(persist::choose(l, old, 16, persist::Mode::Persistent, roomy).grid == 0);
}

TEST_CASE("the persistent kernel runs only where its 32-bit indices reach", "[persistent]") {
  const persist::Product w{4 * 1024, 1024};
  const persist::Loop l = lstm(w, 1024);
  const int64_t limit = int64_t(1) << 31;
  // B rows of the cell's 4H: the last B that fits, and the first that does not.
  const int64_t lastB = (limit - 1) / (4 * 1024);
  CHECK(persist::indicesFit(l, lastB));
  CHECK_FALSE(persist::indicesFit(l, lastB + 1));
  const persist::Choice refused = persist::choose(l, persist::h100(), lastB + 1, persist::Mode::Persistent, roomy);
  CHECK(refused.grid == 0);
  CHECK(std::strstr(refused.why, "32-bit") != nullptr);
  CHECK(persist::choose(l, persist::h100(), 256, persist::Mode::Persistent, roomy).grid > 0);
  // A product whose weights alone pass 2^31 elements, and its rows at B = 1.
  const persist::Product huge{int64_t(1) << 16, int64_t(1) << 15};
  persist::Loop wide = lstm(huge, 0);
  wide.widest = 0;
  CHECK_FALSE(persist::indicesFit(wide, 1));
  // A cell sweeping 8H: the step's rows of it are what passes 2^31 first; a loop
  // without the widest row (bundles before it was recorded) is checked on its products alone.
  persist::Loop eight = l;
  eight.widest = 8 * 1024;
  CHECK_FALSE(persist::indicesFit(eight, lastB));
  eight.widest = 0;
  CHECK(persist::indicesFit(eight, lastB));
}
