// --max-memory's sizes and the plan check (rnnc/memory.h).
#include "rnnc/memory.h"

#include <catch2/catch.hpp>

using namespace rnnc::rt;

TEST_CASE("parseBytes reads bytes and binary suffixes", "[memory]") {
  CHECK(parseBytes("4096") == 4096);
  CHECK(parseBytes("1K") == 1024);
  CHECK(parseBytes("512M") == 512ll << 20);
  CHECK(parseBytes("1.5G") == 3ll << 29);
  CHECK(parseBytes("2GiB") == 2ll << 30);
  CHECK(parseBytes("2gb") == 2ll << 30);
  CHECK(parseBytes("1T") == 1ll << 40);
  CHECK(parseBytes("10B") == 10);
}

TEST_CASE("parseBytes refuses what is not a positive size", "[memory]") {
  for (const char *bad : {"", "0", "-1G", "G", "1X", "1KX", "1e400", "nan", "inf", " 1G", "0.1", "9e18G"})
    CHECK(parseBytes(bad) == 0);
}

TEST_CASE("memoryShortfall names both figures", "[memory]") {
  CHECK(memoryShortfall(1000, "the run", 1024).empty());
  CHECK(memoryShortfall(2048, "the run", 1024) == "the run needs 2.0 KiB, more than --max-memory 1.0 KiB");
  CHECK(bytesText(512) == "512 bytes");
  CHECK(bytesText(1.5 * (1 << 30)) == "1.5 GiB");
  if (physicalMemory() > 0) {
    CHECK(memoryShortfall(1, "the run").empty());
    CHECK(memoryShortfall(1e30, "the run").find("the machine has") != std::string::npos);
  }
}
