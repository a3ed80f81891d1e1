// The generator behind dropout's and zoneout's masks (rnnc/scalar.h): Philox-
// 4x32-10 against the known answers Random123 publishes (kat_vectors), and the
// mask built on it: its threshold, its key, its two modes.
#include "ir/Scalar.h"

#include <catch2/catch.hpp>
#include <set>

using namespace rnnc;

TEST_CASE("philox4x32_10 gives Random123's known answers (first word)", "[masks]") {
  CHECK(scalar::philox4x32_10(0, 0, 0, 0, 0, 0) == 0x6627e8d5u);
  CHECK(scalar::philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u) == 0x408f276du);
  CHECK(scalar::philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u) ==
        0xd16cfe09u);
}

TEST_CASE("keep_threshold is the probability in units of 2^-16, exactly", "[masks]") {
  CHECK(scalar::keep_threshold(1.0) == 1u << 16); // every draw keeps
  CHECK(scalar::keep_threshold(0.5) == 1u << 15);
  CHECK(scalar::keep_threshold(0.75) == 49152u);
  CHECK(scalar::keep_threshold(0.8) == 52429u); // round(0.8 * 2^16)
  CHECK(scalar::keep_threshold(1e-6) == 0u);    // rounds to never
}

TEST_CASE("keep_draws8 gives eight elements' keep_draw from one Philox call", "[masks]") {
  const unsigned long long key = scalar::mask_key(11, 2);
  const unsigned rng[3] = {static_cast<unsigned>(key), static_cast<unsigned>(key >> 32), 1};
  unsigned words[4] = {5, 3, 9, 2};
  scalar::philox4x32_10_rounds(words[0], words[1], words[2], words[3], rng[0], rng[1]);
  for (unsigned q : {0u, 5u, 1000u}) {
    unsigned row[8];
    scalar::keep_draws8(rng, 2, 9, 3, q, row);
    for (unsigned k = 0; k < 8; ++k) {
      CHECK(row[k] < 1u << 16);
      CHECK(scalar::keep_draw(rng, 2, 9, 3, 8 * q + k) == row[k]);
    }
  }
  // Element 8q + k is half k % 2 (low first) of word k / 2 at counter (q, b, step, site).
  unsigned row[8];
  scalar::keep_draws8(rng, 2, 9, 3, 5, row);
  for (unsigned k = 0; k < 8; ++k) CHECK(row[k] == ((k & 1) ? words[k / 2] >> 16 : words[k / 2] & 0xFFFFu));
}

TEST_CASE("keep_mask: training draws 0 or kept, evaluation is the expectation", "[masks]") {
  const unsigned long long key = scalar::mask_key(7, 3);
  unsigned train[3] = {static_cast<unsigned>(key), static_cast<unsigned>(key >> 32), 1};
  unsigned eval[3] = {train[0], train[1], 0};
  const unsigned threshold = scalar::keep_threshold(0.6);
  int kept = 0, n = 100000;
  for (int i = 0; i < n; ++i) {
    double v = scalar::keep_mask(train, 4, 2, 1, static_cast<unsigned>(i), threshold, 2.5, 1.0);
    REQUIRE((v == 0.0 || v == 2.5));
    kept += v != 0;
    REQUIRE(scalar::keep_mask(eval, 4, 2, 1, static_cast<unsigned>(i), threshold, 2.5, 1.0) == 1.0);
  }
  CHECK(std::abs(kept / double(n) - 0.6) < 7 * std::sqrt(0.24 / n)); // binomial: 7 sd
  // The key separates seeds and calls; the site, step and sequence separate masks.
  std::set<unsigned long long> keys{scalar::mask_key(0, 0), scalar::mask_key(0, 1), scalar::mask_key(1, 0),
                                    scalar::mask_key(1, 1)};
  CHECK(keys.size() == 4);
  std::set<unsigned> draws;
  for (unsigned site : {1u, 2u})
    for (unsigned step : {0u, 1u, ~0u})
      for (unsigned b : {0u, 1u}) draws.insert(scalar::philox4x32_10(5, b, step, site, train[0], train[1]));
  CHECK(draws.size() == 12);
}
