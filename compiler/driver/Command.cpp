#include "driver/Command.h"

#include "rnnc/memory.h"

#include <cstdlib>
#include <fmt/format.h>
#include <unistd.h>

namespace rnnc {

void addCommon(CLI::App &cmd, CommonOptions &o) {
  cmd.add_option("FILE", o.file, "the .rnn file")->required();
  cmd.add_option("-D", o.defines, "override a dim: -D NAME=VALUE (repeatable)")
      ->allow_extra_args(false)
      ->type_name("NAME=VALUE");
  // CLI11 takes one-letter short options only; main() spells -O0 as --O0 for it.
  cmd.add_flag("--O0", o.o0, "-O0: no analysis: one launch per op per step, in time order (the baseline)");
  cmd.add_option("--entry", o.entry, "the cell or model to compile when the file has several")->type_name("NAME");
  cmd.add_option("--time-parallel", o.timeParallel,
                 "loops in parallel over time: off, scan (affine loops), newton (and nonlinear ones), "
                 "auto (both, each when the cost model expects it to be faster; the default)")
      ->check(CLI::IsMember({"off", "scan", "newton", "auto"}));
  cmd.add_option("--newton-iterations", o.newtonIterations, "Newton iterations of a nonlinear loop run in parallel (default 3)")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--dtype", o.dtype,
                 "what params, inputs, outputs and saved values are stored in: f32 (the default), f64, or bf16 and f16 "
                 "(16 bits, computed in f32, on tensor cores on CUDA: docs/precision.md)")
      ->check(CLI::IsMember({"f32", "f64", "bf16", "f16"}));
}

bool compileOptionsOf(const CommonOptions &c, CompileOptions &o) {
  for (const auto &d : c.defines) {
    std::string error;
    auto parsed = parseDimOverride(d, error);
    if (!parsed) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return false;
    }
    o.dims.push_back(*parsed);
  }
  o.entry = c.entry;
  o.color = colorDiagnostics();
  o.optimize = !c.o0;
  o.timeParallel.mode = timeParallelMode(c.timeParallel);
  o.timeParallel.newtonIterations = c.newtonIterations;
  o.dtype = *parseDType(c.dtype);
  return true;
}

void addMaxMemory(CLI::App &cmd, int64_t &bytes) {
  cmd.add_option_function<std::string>(
         "--max-memory",
         [&bytes](const std::string &text) {
           bytes = rt::parseBytes(text);
           if (bytes <= 0)
             throw CLI::ValidationError("--max-memory", "'" + text + "' is not a size (bytes, or a number with K, M, G "
                                                                 "or T: 512M, 1.5G)");
         },
         "refuse a run whose plan needs more memory than this, before allocating (default: the machine's memory)")
      ->type_name("SIZE");
}

bool colorDiagnostics() { return ::isatty(STDERR_FILENO) && !std::getenv("NO_COLOR"); }

bool namedFiles(const std::vector<std::string> &args, const char *flag, std::map<std::string, std::string> &out) {
  for (const auto &a : args) {
    if (a.empty()) continue; // `--grad` alone
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size()) {
      fmt::print(stderr, "rnnc: error: {} {}: expected NAME=FILE\n", flag, a);
      return false;
    }
    if (!out.emplace(a.substr(0, eq), a.substr(eq + 1)).second) {
      fmt::print(stderr, "rnnc: error: {} {}: '{}' given twice\n", flag, a, a.substr(0, eq));
      return false;
    }
  }
  return true;
}

} // namespace rnnc
