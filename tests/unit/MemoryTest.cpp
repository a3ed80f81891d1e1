// --max-memory's sizes and the plan check (rnnc/memory.h, checkTrainingPlan in rnnc/trainer.h).
#include "rnnc/memory.h"
#include "rnnc/trainer.h"

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

namespace {

rnnc_tensor port(const char *name, int64_t width, bool index = false, int32_t depth = 0) {
  rnnc_tensor t{};
  t.name = name;
  t.rank = 1;
  t.shape[0] = width;
  t.is_index = index;
  t.depth = depth;
  return t;
}

/// 1000 bytes of workspace for any T and B; 0 (too large) from T = 1000 on.
int64_t workspace(int64_t T, int64_t) { return T < 1000 ? 1000 : 0; }

/// 100 params; inputs x [3] and tok (an index of 50); outputs y [2] and z [4],
/// y seeded; a state h [6] of depth 2.
rnnc_model fakeModel() {
  static const rnnc_tensor inputs[] = {port("x", 3), port("tok", 50, true)}, outputs[] = {port("y", 2), port("z", 4)},
                           seeds[] = {port("y", 2)}, states[] = {port("h", 6, false, 2)};
  rnnc_model m{};
  m.name = "Fake";
  m.param_elements = 100;
  m.n_inputs = 2, m.inputs = inputs;
  m.n_outputs = 2, m.outputs = outputs;
  m.n_seeds = 1, m.seeds = seeds;
  m.n_states = 1, m.states = states;
  m.workspace_bytes = workspace;
  return m;
}

} // namespace

TEST_CASE("tensorElements multiplies the dims of the rank", "[memory]") {
  rnnc_tensor matrix = port("W", 3);
  matrix.rank = 2;
  matrix.shape[1] = 5;
  CHECK(tensorElements(matrix) == 15);
  CHECK(tensorElements(port("x", 7)) == 7);
}

TEST_CASE("planBytes counts the workspace and the parts asked for", "[memory]") {
  rnnc_model m = fakeModel();
  const int64_t T = 10, B = 4;
  PlanParts parts;  // params once, inputs once (an index is one value), no outputs
  CHECK(planBytes(m, T, B, parts) == 1000 + 4 * (100 + T * B * (3 + 1)));
  parts.outputs = 1;
  CHECK(planBytes(m, T, B, parts) == 1000 + 4 * (100 + T * B * (3 + 1) + T * B * (2 + 4)));
  parts.firstOutputOnly = true;
  parts.states = true;
  parts.params = 4;  // the training loop with adam
  CHECK(planBytes(m, T, B, parts) == 1000 + 4 * (400 + T * B * (3 + 1) + T * B * 2 + 2 * B * 6));
  PlanParts grad;  // `rnnc run --grad` of a double model
  grad.realBytes = 8;
  grad.params = grad.inputs = grad.outputs = 2;
  CHECK(planBytes(m, T, B, grad) == 1000 + 16 * (100 + T * B * (3 + 1) + T * B * (2 + 4)));
  PlanParts bench;
  bench.params = 2;
  bench.seeds = true;
  CHECK(planBytes(m, T, B, bench) == 1000 + 4 * (200 + T * B * (3 + 1) + T * B * 2));
  CHECK(planBytes(m, 1000, B, bench) == -1);

  CHECK(planShortfall(m, 2048, "the run", 1024) == memoryShortfall(2048, "the run", 1024));
  m.device = RNNC_DEVICE_CUDA;  // without a limit cudaMalloc says; with one the plan is refused
  CHECK(planShortfall(m, 1e30, "the run", 0).empty());
  CHECK(planShortfall(m, 2048, "the run", 1024) == "the run needs 2.0 KiB, more than --max-memory 1.0 KiB");
}

TEST_CASE("checkTrainingPlan words the refusal the driver and the trainer print", "[memory]") {
  const rnnc_model m = fakeModel();
  TrainOptions o;
  o.batch = 4;
  o.bptt = 10;
  o.max_memory = 1 << 20;
  std::string error;
  CHECK(checkTrainingPlan(m, o, error));
  CHECK(error.empty());
  // adam: params, gradients and two slots; a segment of inputs and the
  // evaluation's, output 0, the carried state.
  CHECK(trainingPlanBytes(m, o) == 1000 + 4 * (4 * 100 + 2 * 40 * (3 + 1) + 40 * 2 + 2 * 4 * 6));
  o.max_memory = 1024;
  CHECK_FALSE(checkTrainingPlan(m, o, error));
  CHECK(error == "model 'Fake': training with --batch 4 --bptt 10 needs 4.3 KiB, more than --max-memory 1.0 KiB");
  o.eval_batches = 0;  // no evaluation: one segment of inputs
  CHECK(trainingPlanBytes(m, o) == 1000 + 4 * (4 * 100 + 40 * (3 + 1) + 40 * 2 + 2 * 4 * 6));
  CHECK_FALSE(checkTrainingPlan(m, o, error));
  CHECK(error == "model 'Fake': training with --batch 4 --bptt 10 needs 3.7 KiB, more than --max-memory 1.0 KiB");
  o.bptt = 1000;
  CHECK_FALSE(checkTrainingPlan(m, o, error));
  CHECK(error == "model 'Fake': the workspace for 1000 steps x 4 sequences is too large "
                 "(over 64 TiB, or T x B over 2^31 - 1 rows)");
}
