// libFuzzer target for checkpoint loading: the input is written to a file and
// loaded as a checkpoint of a small model declared here (two params, one
// carried state), as `rnnc train --resume` loads one. Inputs that read as
// safetensors are loaded a second time with their checksum recomputed
// ("resealed"), so the checks behind the checksum are fuzzed too. With
// RNNC_FUZZ_WRITE_SEED=PATH set, writes a valid checkpoint there and exits
// (how corpus/checkpoint/ was seeded). See docs/reliability.md.
#include "FuzzFile.h"
#include "io/Safetensors.h"
#include "rnnc/checkpoint.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace {

rnnc_tensor tensor(const char *name, int64_t offset, std::initializer_list<int64_t> shape, int depth = 0) {
  rnnc_tensor t{};
  t.name = name;
  t.rank = static_cast<int32_t>(shape.size());
  int i = 0;
  for (int64_t d : shape) t.shape[i++] = d;
  t.offset = offset;
  t.depth = depth;
  return t;
}

const rnnc_tensor kParams[] = {tensor("cell.W", 0, {3, 2}), tensor("cell.b", 6, {3})};
const rnnc_tensor kStates[] = {tensor("h", 0, {3}, 1)};

rnnc_model fuzzModel() {
  rnnc_model m{};
  m.abi_version = RNNC_ABI_VERSION;
  m.name = "FuzzCell";
  m.source_hash = "00112233445566778899aabbccddeeff";
  m.real_bytes = 4;
  m.param_elements = 9;
  m.n_params = 2;
  m.params = kParams;
  m.n_states = 1;
  m.states = kStates;
  return m;
}

/// What a run of FuzzCell expects: text task, Adam, batch 2, one carried state.
rnnc::rt::Checkpoint expected() {
  rnnc::rt::Checkpoint c;
  c.task = "text:corpus.txt";
  c.optimizer = "adam";
  c.batch = 2;
  c.params.assign(9, 0.0f);
  c.slots = {{"m", std::vector<float>(9)}, {"v", std::vector<float>(9)}};
  c.carry = {std::vector<float>(1 * 2 * 3)};
  return c;
}

void load(const rnnc_model &m, const std::string &path) {
  rnnc::rt::Checkpoint c = expected();
  std::string error;
  if (rnnc::rt::loadCheckpoint(path, m, c, error)) {
    if (c.step < 0 || c.params.size() != 9) std::abort();
  } else if (error.rfind(path, 0) != 0) {
    std::abort();  // every refusal names the file first
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *seed = std::getenv("RNNC_FUZZ_WRITE_SEED");
  if (!seed) return 0;
  rnnc::rt::Checkpoint c = expected();
  c.step = 7;
  c.rng = "1 2 3";
  c.position = 5;
  for (size_t i = 0; i < c.params.size(); ++i) c.params[i] = 0.25f * static_cast<float>(i);
  std::string error;
  const rnnc_model m = fuzzModel();
  if (!rnnc::rt::saveCheckpoint(seed, m, c, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const rnnc::fuzz::ScratchFile file("checkpoint");
  static const rnnc::fuzz::ScratchFile sealed("checkpoint-sealed");
  static const rnnc_model m = fuzzModel();
  file.write(data, size);
  load(m, file.path());

  std::string error;
  std::map<std::string, std::string> meta;
  auto tensors = rnnc::io::readSafetensors(file.path(), error, &meta);
  if (!tensors) return 0;
  meta["checksum"] = fmt::format("{:016x}", rnnc::rt::checkpointChecksum(meta, *tensors));
  if (!rnnc::io::writeSafetensors(sealed.path(), *tensors, error, meta)) return 0;
  load(m, sealed.path());
  return 0;
}
