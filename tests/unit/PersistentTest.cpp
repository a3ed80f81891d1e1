// rnnc/persistent.h: the run-time choice between a loop's persistent kernel,
// its fused variant (a kernel a step per product) and its launches step by
// step. The rows a block owns and the shared memory they take, the modes,
// where the persistent kernel's 32-bit indices would not reach (indicesFit):
// it must then run step by step, even forced; and the three-way cost model.
#include "rnnc/persistent.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

using namespace rnnc;

namespace {

/// An LSTM's loop, forward: one product W_hh [4H x H], two launches a step,
/// one grid barrier, blocks owning units of H, its cell sweeping 4H.
/// Its fused variant: one launch a step.
persist::Loop lstm(const persist::Product &product, int64_t H) { return {&product, 1, 2, 4, 1, H, 4 * H, 1}; }

/// Every block fits on a multiprocessor.
int roomy(int64_t) { return 1; }

} // namespace

TEST_CASE("a block owns its units' rows of every piece, and their weights in shared memory", "[persistent]") {
  const persist::Product w{4 * 768, 768};
  const persist::Loop l = lstm(w, 768);
  CHECK(persist::rowsPerBlock(l, w, 132) == 4 * 6); // ceil(768 / 132) units, four pieces
  CHECK(persist::sharedBytes(l, 132, 16) == 4 * 6 * 768 * 4);
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
  CHECK(forced.shared == persist::sharedBytes(l, 132, 16));
  persist::Gpu small = gpu;
  small.sharedPerBlock = 1024;
  CHECK(persist::choose(l, small, 16, persist::Mode::Persistent, roomy).grid == 0);
  persist::Gpu old = gpu;
  old.cooperative = false;
  CHECK(persist::choose(l, old, 16, persist::Mode::Persistent, roomy).grid == 0);
}

TEST_CASE("a step's values on chip: B rows of the block's units beside the weights, at most 48 KiB fused", "[persistent]") {
  const persist::Product w{4 * 768, 768};
  persist::Loop l = lstm(w, 768);
  l.onChip = 8; // the product's four pieces and the gates' sum
  // ceil(768 / 132) = 6 units a block: B rows of 8 pieces of 6 floats.
  CHECK(persist::onChipBytes(l, 132, 16) == 16 * 8 * 6 * 4);
  CHECK(persist::sharedBytes(l, 132, 16) == 4 * 6 * 768 * 4 + 16 * 8 * 6 * 4);
  const persist::Gpu gpu = persist::h100();
  const persist::Choice forced = persist::choose(l, gpu, 16, persist::Mode::Persistent, roomy);
  REQUIRE(forced.variant == persist::Variant::Persistent);
  CHECK(forced.shared == persist::sharedBytes(l, 132, 16));
  // The weights alone fit (72 KiB a block); with B = 1024 rows of values they do not.
  const persist::Choice full = persist::choose(l, gpu, 1024, persist::Mode::Persistent, roomy);
  CHECK(full.variant == persist::Variant::Stepwise);
  CHECK(std::strstr(full.why, "shared memory") != nullptr);
  // Fused: 264 blocks of 3 units; B rows of 8 x 3 floats, 96 B a row: B = 512 fits in 48 KiB, 513 does not.
  const persist::Choice fused = persist::choose(l, gpu, 512, persist::Mode::Fused, roomy);
  REQUIRE(fused.variant == persist::Variant::Fused);
  CHECK(fused.shared == 512 * 8 * 3 * 4);
  const persist::Choice over = persist::choose(l, gpu, 513, persist::Mode::Fused, roomy);
  CHECK(over.variant == persist::Variant::Stepwise);
  CHECK(std::strstr(over.why, "48 KiB") != nullptr);
  // No units (blocks own slices of each product): nothing on chip.
  l.units = 0;
  CHECK(persist::onChipBytes(l, 132, 16) == 0);
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

TEST_CASE("the fused variant: forced where the loop has it, its grid, step by step where it has none", "[persistent]") {
  const persist::Product w{4 * 1024, 1024};
  const persist::Loop l = lstm(w, 1024);
  const persist::Gpu gpu = persist::h100();
  const persist::Choice fused = persist::choose(l, gpu, 16, persist::Mode::Fused, roomy);
  CHECK(fused.variant == persist::Variant::Fused);
  CHECK(fused.grid == 2 * 132); // blocks owning units: two a multiprocessor, 1024 units
  const persist::Product w64{4 * 64, 64};
  const persist::Loop narrow = lstm(w64, 64);
  CHECK(persist::choose(narrow, gpu, 16, persist::Mode::Fused, roomy).grid == 64); // no more blocks than units
  persist::Loop slices = l;
  slices.units = 0, slices.fused = 0; // a layer norm in the step: blocks own slices, no fused variant
  const persist::Choice none = persist::choose(slices, gpu, 16, persist::Mode::Fused, roomy);
  CHECK(none.variant == persist::Variant::Stepwise);
  CHECK(std::strstr(none.why, "not local to units") != nullptr);
  // Its 32-bit indices as the persistent kernel's.
  const int64_t lastB = ((int64_t(1) << 31) - 1) / (4 * 1024);
  CHECK(persist::choose(l, gpu, lastB + 1, persist::Mode::Fused, roomy).variant == persist::Variant::Stepwise);
  CHECK(persist::choose(l, gpu, lastB, persist::Mode::Fused, roomy).variant == persist::Variant::Fused);
}

TEST_CASE("the cost model picks the fastest of the three ways", "[persistent]") {
  const persist::Gpu gpu = persist::h100();
  // H = 768 in float: W_hh fits on chip; persistent at small B, cuBLAS step by step at large B.
  const persist::Product w768{4 * 768, 768};
  const persist::Loop l768 = lstm(w768, 768);
  const persist::Choice small = persist::choose(l768, gpu, 1, persist::Mode::Auto, roomy);
  CHECK(small.variant == persist::Variant::Persistent);
  CHECK(persist::persistentMicroseconds(l768, small.grid, 1) < persist::fusedMicroseconds(l768, gpu, 1));
  CHECK(persist::choose(l768, gpu, 256, persist::Mode::Auto, roomy).variant == persist::Variant::Stepwise);
  // H = 2048 in double: 128 MiB of W_hh fits on no chip. At B = 1 a fused kernel a step saves a
  // launch; from B = 4 cuBLAS's products win. Both say why not persistent.
  const persist::Product w2048{4 * 2048, 2048};
  persist::Loop big = lstm(w2048, 2048);
  big.realBytes = 8;
  const persist::Choice one = persist::choose(big, gpu, 1, persist::Mode::Auto, roomy);
  CHECK(one.variant == persist::Variant::Fused);
  CHECK(one.grid == 2 * 132);
  REQUIRE(one.notPersistent != nullptr);
  CHECK(std::strstr(one.notPersistent, "do not fit") != nullptr);
  CHECK(persist::fusedMicroseconds(big, gpu, 1) < persist::stepwiseMicroseconds(big, gpu, 1));
  const persist::Choice four = persist::choose(big, gpu, 4, persist::Mode::Auto, roomy);
  CHECK(four.variant == persist::Variant::Stepwise);
  CHECK(four.notPersistent != nullptr);
  // Neither other way: step by step, and the reason is why not persistent.
  persist::Loop neither = big;
  neither.fused = 0;
  const persist::Choice stepwise = persist::choose(neither, gpu, 1, persist::Mode::Auto, roomy);
  CHECK(stepwise.variant == persist::Variant::Stepwise);
  CHECK(std::strstr(stepwise.why, "do not fit") != nullptr);
  // A loop without the fused count (bundles before it) never runs fused.
  persist::Loop older = big;
  older.fused = 0;
  CHECK(persist::choose(older, gpu, 1, persist::Mode::Fused, roomy).variant == persist::Variant::Stepwise);
}

TEST_CASE("RNNC_CUDA_LOOPS names the three ways", "[persistent]") {
  setenv("RNNC_CUDA_LOOPS", "fused", 1);
  CHECK(persist::modeFromEnvironment() == persist::Mode::Fused);
  setenv("RNNC_CUDA_LOOPS", "persistent", 1);
  CHECK(persist::modeFromEnvironment() == persist::Mode::Persistent);
  setenv("RNNC_CUDA_LOOPS", "stepwise", 1);
  CHECK(persist::modeFromEnvironment() == persist::Mode::Stepwise);
  unsetenv("RNNC_CUDA_LOOPS");
  CHECK(persist::modeFromEnvironment() == persist::Mode::Auto);
  CHECK(std::string(persist::variantName(persist::Variant::Fused)) == "fused");
}

TEST_CASE("a 16-bit loop: weights in whole tiles of 16 bits, values on chip in float, products on tensor cores",
          "[persistent]") {
  const persist::Product w{4 * 768, 768};
  persist::Loop l = lstm(w, 768);
  l.realBytes = 2;
  l.chipBytes = 4;
  l.tensorCores = true;
  l.onChip = 8;
  // 24 rows a block rounded up to two tiles of 16, 768 already whole; the chip's 16 rows
  // of 8 x 6 floats; the warps' partial tiles.
  CHECK(persist::onChipBytes(l, 132, 16) == 16 * 8 * 6 * 4);
  CHECK(persist::sharedBytes(l, 132, 16) == 32 * 768 * 2 + 16 * 8 * 6 * 4 + persist::kSplitScratchBytes);
  // A reduction of 20 pads to 32.
  const persist::Product odd{4 * 20, 20};
  persist::Loop small = lstm(odd, 20);
  small.realBytes = 2;
  small.tensorCores = true;
  CHECK(persist::sharedBytes(small, 20, 1) == 16 * 32 * 2 + persist::kSplitScratchBytes);
  // Tensor cores make the persistent product cheaper than FMA would, so B = 64 stays persistent at H = 768.
  const persist::Choice c = persist::choose(l, persist::h100(), 64, persist::Mode::Auto, roomy);
  CHECK(c.variant == persist::Variant::Persistent);
  persist::Loop fma = l;
  fma.tensorCores = false;
  CHECK(persist::persistentMicroseconds(l, 132, 64) < persist::persistentMicroseconds(fma, 132, 64));
}
