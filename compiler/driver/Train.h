// `rnnc train` and `rnnc bench`: compile a cell or model for the CPU, build
// and load it (driver/Engine.h), then train it on a generated task
// (runtime/train) or time forward and backward against its -O0 build. A cell
// (no loss of its own) is wrapped in a model the task needs: an input layer,
// the cell, a readout and the task's loss, written as .rnn text and compiled
// like any other file.
#pragma once

#include "codegen/CudaPrinter.h"
#include "frontend/Frontend.h"
#include "rnnc/trainer.h"

#include <string>

namespace rnnc {

struct TrainCommand {
  std::string file;
  std::vector<DimOverride> dims;
  std::string entry;
  bool optimize = true;
  TimeParallelOptions timeParallel;
  bool color = false;
  rt::TrainOptions train;
  std::string params; // initial params (safetensors); empty: drawn with the seed
  std::string device = "cpu"; // cpu or cuda (resolved)
  codegen::CudaOptions cuda;  // --tf32, --cuda-graphs
};

int trainCommand(const TrainCommand &c);

struct BenchCommand {
  std::string file;
  std::vector<DimOverride> dims;
  std::string entry;
  bool color = false;
  int64_t batch = 1, seq = 100;
  int runs = 10, warmup = 2;
  bool json = false;
  bool onlyOptimized = false; // skip the -O0 column
  TimeParallelOptions timeParallel;
  std::string device = "cpu";  // cpu or cuda (resolved)
  codegen::CudaOptions cuda;   // --tf32, --cuda-graphs
  int64_t maxMemory = 0;       // --max-memory in bytes; 0: the machine's physical memory
};

int benchCommand(const BenchCommand &c);

} // namespace rnnc
