// rnnc: the command line. Each subcommand reads a .rnn file through the
// frontend and reports diagnostics clang style; exit 0 when clean, 1 for a user
// error (bad input or bad command line), kExitInternal for a bug in rnnc.
#include "codegen/Bundle.h"
#include "codegen/Format.h"
#include "codegen/CudaPrinter.h"
#include "driver/Device.h"
#include "driver/Engine.h"
#include "driver/Entity.h"
#include "driver/Run.h"
#include "driver/Train.h"
#include "driver/Graphviz.h"
#include "driver/Report.h"
#include "driver/Show.h"
#include "frontend/ASTDump.h"
#include "frontend/Frontend.h"
#include "frontend/Lower.h"
#include "io/Array.h"
#include "ir/Printer.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"
#include "passes/Stats.h"
#include "rnnc/memory.h"
#include "support/Crash.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <new>
#include <unistd.h>

namespace rnnc {
namespace {

struct CommonOptions {
  std::string file;
  std::vector<std::string> defines;
  bool o0 = false;
  std::string entry;
  std::string timeParallel = "auto";
  int newtonIterations = 3;
};

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
}

TimeParallelOptions timeParallelOf(const CommonOptions &o) {
  TimeParallelOptions t;
  t.mode = o.timeParallel == "off"    ? TimeParallelMode::Off
           : o.timeParallel == "scan" ? TimeParallelMode::Scan
           : o.timeParallel == "newton" ? TimeParallelMode::Newton
                                        : TimeParallelMode::Auto;
  t.newtonIterations = o.newtonIterations;
  return t;
}

/// Lowers and runs the pipeline. Diagnostics are printed; null on an error.
std::unique_ptr<Compilation> compile(FrontendResult &r, const Elaboration &e, const CommonOptions &o,
                                     const PassObserver &observe = {}, bool backward = false) {
  auto graph = lowerToGraph(e, *r.diags);
  if (!graph) return nullptr;
  if (backward) {
    Objective objective = defaultObjective(*graph);
    if ((objective.loss || !objective.outputs.empty()) && !differentiate(*graph, objective, *r.diags)) return nullptr;
  }
  auto c = std::make_unique<Compilation>();
  c->graph = std::move(*graph);
  c->optimize = !o.o0;
  c->timeParallel = timeParallelOf(o);
  if (observe) observe("lower", *c, true);
  if (!runPipeline(*c, *r.diags, observe)) return nullptr;
  return c;
}

/// The kernel IR of a compilation with backward, described for a bundle (what
/// `rnnc compile` prints). False after printing the reason.
bool bundleProgram(const FrontendResult &r, const Elaboration &e, const Compilation &c, codegen::Program &program) {
  std::string error;
  if (!codegen::buildProgram(c, program, error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return false;
  }
  describeForBundle(r.sema.dims, e, program);
  return true;
}

/// `rnnc show --html`: the report page of `full` (compiled with backward),
/// with `drawn`'s graph, written to `path` through a temporary file.
int writeReport(const FrontendResult &r, const Elaboration &e, const Compilation &drawn, const Compilation &full,
                const std::string &target, const std::string &path) {
  codegen::Program program;
  if (!bundleProgram(r, e, full, program)) return kExitUserError;
  codegen::Bundle bundle = codegen::printBundle(program, r.sm, target);
  std::string error, skipped;
  // Formatted as `rnnc compile` writes it; a page is still worth having if formatting fails.
  if (!codegen::formatBundle(bundle, error, skipped))
    fmt::print(stderr, "rnnc: warning: the page shows the code unformatted: {}\n", error);
  error.clear();
  ReportInput in;
  in.sm = &r.sm;
  in.mainFile = r.program.root().module.file;
  in.drawn = &drawn;
  in.program = &program;
  in.bundle = &bundle;
  in.stats = statsJson(computeStats(full));
  in.title = full.graph.name;
  auto nodeLink = [&](const Node &n) {
    if (n.locs.empty() || !n.locs.front().valid()) return std::string();
    SourceLoc loc = n.locs.front().begin;
    return "#" + sourceLineId(loc.file, r.sm.lineCol(loc).line, in.mainFile);
  };
  if (!graphSvg(graphDot(drawn, r.sm, nodeLink), in.svg, error) ||
      !io::writeFileAtomically(path, reportHtml(in), error)) {
    fmt::print(stderr, "rnnc: error: {}\n", error);
    return kExitUserError;
  }
  return kExitOk;
}

/// Runs the frontend (diagnostics are printed as they come). Null on a -D error.
std::unique_ptr<FrontendResult> readFile(const CommonOptions &o) {
  FrontendOptions fo;
  fo.color = ::isatty(STDERR_FILENO) && !std::getenv("NO_COLOR");
  for (const auto &d : o.defines) {
    std::string error;
    auto parsed = parseDimOverride(d, error);
    if (!parsed) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return nullptr;
    }
    fo.dims.push_back(*parsed);
  }
  return runFrontend(o.file, fo);
}

/// --max-memory SIZE on a command that allocates arrays: bytes in `bytes`.
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

std::string widthText(const std::optional<int64_t> &w) { return w ? std::to_string(*w) : "?"; }

std::string paramsText(const FrontendResult &r) {
  std::string out;
  for (const auto &e : r.sema.entities) {
    out += fmt::format("{} {}{}\n", e.decl->keyword(), e.decl->name.name,
               e.complete ? "" : " (generic: some dims have no value)");
    for (const auto &p : e.inputs)
      out += fmt::format("  input {}: {}[{}]\n", p.name, p.type.isIndex ? "index" : "", widthText(p.type.width));
    for (const auto &p : e.outputs)
      out += fmt::format("  output {}: [{}]\n", p.name, widthText(p.type.width));
    for (const auto &p : e.params) {
      std::string shape;
      for (const auto &s : p.shape) shape += (shape.empty() ? "" : ", ") + widthText(s);
      out += fmt::format("  param {}: [{}]\n", p.name, shape);
    }
  }
  return out;
}

int run(int argc, char **argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (auto &a : args)
    if (a == "-O0") a = "--O0";
  std::vector<char *> argp;
  for (auto &a : args) argp.push_back(a.data());
  argv = argp.data();
  CLI::App app{"rnnc: an ahead-of-time compiler for recurrent neural network cells"};
  app.set_version_flag("--version", std::string("rnnc ") + RNNC_VERSION);
  app.require_subcommand(1);
  app.footer("rnnc --print-cflags prints the flags that compile a bundle against the runtime headers.");

  CommonOptions checkOpts;
  CLI::App *check = app.add_subcommand("check", "check a .rnn file: diagnostics only");
  addCommon(*check, checkOpts);

  CommonOptions showOpts;
  bool ast = false, params = false, all = false, dot = false, sched = false, stats = false, json = false;
  bool backward = false, html = false;
  std::string after, htmlOut, htmlTarget = "cpu";
  CLI::App *show = app.add_subcommand("show", "show what rnnc made of a .rnn file");
  addCommon(*show, showOpts);
  show->add_flag("--ast", ast, "print the syntax tree");
  show->add_flag("--params", params, "print every param with its full name and shape, instances inlined");
  show->add_option("--after", after, "print the graph after this pass (lower, canonicalize, ...)")->type_name("PASS");
  show->add_flag("--all", all, "print the graph after every pass that changed it");
  show->add_flag("--dot", dot, "print the graph for Graphviz (recurrent nodes and delayed edges marked)");
  show->add_flag("--schedule", sched, "print stages, loops, streams and each launch with its equations");
  show->add_flag("--stats", stats, "print loops, launches, GEMMs, flops and memory per step");
  show->add_flag("--json", json, "with --stats: as JSON");
  show->add_flag("--backward", backward,
                 "include the backward graph (BPTT of the loss, or of every output) in what is shown; --stats always does");
  show->add_flag("--html", html, "write one self-contained HTML page (equations, graph, schedule, stats, code) to -o FILE");
  show->add_option("-o", htmlOut, "with --html: the page to write")->type_name("FILE");
  show->add_option("--target", htmlTarget, "with --html: whose emitted code the page shows, cpu (default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));

  CommonOptions runOpts;
  std::string runParams, runOut, runDtype = "f32", runDevice = "auto", runEngine = "compiled";
  std::vector<std::string> runInputs, runStates, runGrads;
  CLI::App *run = app.add_subcommand("run", "run a cell or model on arrays from .npy files (and its gradients)");
  addCommon(*run, runOpts);
  run->add_option("--params", runParams, "the params (safetensors)")->required()->type_name("P.safetensors");
  run->add_option("--input", runInputs, "an input: time-major [T, B, n], or [T, B] for an index")
      ->allow_extra_args(false)->type_name("NAME=X.npy");
  run->add_option("--state", runStates, "an initial state: [B, n] (or [k, B, n] for k steps)")
      ->allow_extra_args(false)->type_name("NAME=S.npy");
  CLI::Option *gradOpt = run->add_option("--grad", runGrads, "gradients of L = sum <y, dy> (alone: of the loss)")
                             ->expected(0, -1)->type_name("NAME=DY.npy");
  bool runParamGradsOnly = false;
  codegen::CudaOptions runCuda;
  run->add_flag("--tf32", runCuda.tf32, "cuda: float GEMMs may use TF32 tensor cores");
  run->add_flag("--cuda-graphs", runCuda.cudaGraphs, "cuda: replay each loop as a CUDA graph");
  run->add_flag("--param-grads-only", runParamGradsOnly,
                "with --grad: only the params' gradients (what training computes), no grad/<input> or grad/initial");
  run->add_option("--out", runOut, "where the results go")->required()->type_name("DIR");
  run->add_option("--dtype", runDtype, "f32 or f64")->check(CLI::IsMember({"f32", "f64"}));
  run->add_option("--device", runDevice, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  int64_t runMaxMemory = 0;
  addMaxMemory(*run, runMaxMemory);
  run->add_option("--engine", runEngine, "compiled (default: the generated code) or interp (the reference interpreter)")
      ->check(CLI::IsMember({"compiled", "interp"}));

  CommonOptions initOpts;
  uint64_t initSeed = 0;
  std::string initOut;
  CLI::App *init = app.add_subcommand("init", "write initial params (safetensors)");
  addCommon(*init, initOpts);
  init->add_option("--seed", initSeed, "the random seed")->required();
  init->add_option("-o", initOut, "the safetensors file to write")->required()->type_name("P.safetensors");
  int64_t initMaxMemory = 0;
  addMaxMemory(*init, initMaxMemory);

  CommonOptions compileOpts;
  std::string compileTarget, compileOut;
  bool compileJit = false, compileTf32 = false, compileGraphs = false, compileNoFormat = false;
  CLI::App *compileCmd = app.add_subcommand("compile", "write the bundle: <model>.cpp (or .cu), <model>.h, <model>.json");
  addCommon(*compileCmd, compileOpts);
  compileCmd->add_option("--target", compileTarget, "cpu or cuda")->required()->check(CLI::IsMember({"cpu", "cuda"}));
  compileCmd->add_option("-o", compileOut, "the directory to write the bundle to")->required()->type_name("DIR");
  compileCmd->add_flag("--jit", compileJit, "cuda: kernels as a string for NVRTC, host code as plain C++");
  compileCmd->add_flag("--tf32", compileTf32, "cuda: float GEMMs may use TF32 tensor cores (about 1e-3 relative error)");
  compileCmd->add_flag("--cuda-graphs", compileGraphs, "cuda: capture each loop's steps once as a CUDA graph and replay it");
  compileCmd->add_flag("--no-format", compileNoFormat, "write the code as printed, not formatted with clang-format (and no .clang-format)");

  CommonOptions trainOpts;
  TrainCommand tc;
  std::string trainDevice = "auto";
  CLI::App *trainCmd = app.add_subcommand("train", "train a cell or model on a generated task (truncated BPTT)");
  addCommon(*trainCmd, trainOpts);
  trainCmd->add_option("--task", tc.train.task, "adding, copy or text:PATH")->required();
  trainCmd->add_option("--device", trainDevice, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  trainCmd->add_option("--batch", tc.train.batch, "B: sequences trained in parallel")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  trainCmd->add_option("--bptt", tc.train.bptt, "T: steps per segment (truncated BPTT)")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  trainCmd->add_option("--steps", tc.train.steps, "optimizer steps in all (a resumed run counts the steps before it)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  trainCmd->add_option("--optimizer", tc.train.optimizer, "adam or sgd (with momentum)")->check(CLI::IsMember({"adam", "sgd"}));
  // A plain message for a bad rate (CLI11's range check prints DBL_MAX in full).
  CLI::Validator positiveRate(
      [](std::string &text) -> std::string {
        char *end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end || !std::isfinite(v) || v <= 0) return "expected a positive number, got '" + text + "'";
        return "";
      },
      "X > 0");
  trainCmd->add_option("--lr", tc.train.lr, "learning rate (default: adam 1e-3, sgd 0.1)")->check(positiveRate);
  trainCmd->add_option("--momentum", tc.train.momentum, "sgd momentum")->check(CLI::Range(0.0, 1.0));
  trainCmd->add_option("--clip", tc.train.clip, "clip the gradient's global L2 norm (0: off)")->check(CLI::NonNegativeNumber);
  trainCmd->add_option("--seed", tc.train.seed, "seeds the initial params and the task's data");
  trainCmd->add_option("--params", tc.params, "initial params (safetensors) instead of drawing them")->type_name("P.safetensors");
  trainCmd->add_option("--save", tc.train.save, "write a checkpoint here (at the end, and every --save-every steps)")->type_name("CKPT");
  trainCmd->add_option("--save-every", tc.train.save_every, "steps between checkpoints")->check(CLI::NonNegativeNumber);
  trainCmd->add_option("--resume", tc.train.resume, "continue from this checkpoint")->type_name("CKPT");
  trainCmd->add_option("--log", tc.train.log, "a CSV log: step, loss, metric, grad norm, lr, seconds")->type_name("FILE.csv");
  trainCmd->add_flag("--quiet", tc.train.quiet, "no progress, only errors");
  trainCmd->add_flag("--skip-nonfinite", tc.train.skip_nonfinite,
                     "skip a step whose loss or gradient is not finite, and count it (default: stop there)");
  addMaxMemory(*trainCmd, tc.train.max_memory);
  trainCmd->add_flag("--tf32", tc.cuda.tf32, "cuda: float GEMMs may use TF32 tensor cores");
  trainCmd->add_flag("--cuda-graphs", tc.cuda.cudaGraphs, "cuda: replay each loop as a CUDA graph");

  CommonOptions benchOpts;
  BenchCommand bc;
  std::string benchDevice = "auto";
  CLI::App *benchCmd = app.add_subcommand("bench", "time forward + backward, optimized and -O0 side by side");
  addCommon(*benchCmd, benchOpts);
  benchCmd->add_option("--batch", bc.batch, "B")->required()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  benchCmd->add_option("--seq", bc.seq, "T")->required()->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  benchCmd->add_option("--runs", bc.runs, "timed runs (the median is reported)")->check(CLI::Range(1, 100000));
  benchCmd->add_option("--warmup", bc.warmup, "untimed runs first")->check(CLI::Range(0, 100000));
  benchCmd->add_option("--device", benchDevice, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  benchCmd->add_flag("--json", bc.json, "print JSON");
  benchCmd->add_flag("--tf32", bc.cuda.tf32, "cuda: float GEMMs may use TF32 tensor cores");
  benchCmd->add_flag("--cuda-graphs", bc.cuda.cudaGraphs, "cuda: replay each loop as a CUDA graph");
  benchCmd->add_flag("--no-baseline", bc.onlyOptimized, "skip the -O0 build");
  addMaxMemory(*benchCmd, bc.maxMemory);

  auto isCommand = [&](const std::string &name) {
    for (const CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; }))
      if (sub->get_name() == name) return true;
    return false;
  };
  if (argc == 2 && std::string(argv[1]) == "--print-cflags") {
    fmt::print("{}\n", runtimeCflags());
    return kExitOk;
  }
  if (argc > 1 && argv[1][0] != '-' && !isCommand(argv[1])) {
    fmt::print(stderr, "rnnc: error: unknown command '{}' (the commands are: check, show, compile, init, run, train, bench)\n", argv[1]);
    return kExitUserError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    fmt::print(stderr, "rnnc: error: {}\n", e.what());
    fmt::print(stderr, "run 'rnnc --help' for usage\n");
    return kExitUserError;
  }

  if (check->parsed()) {
    // Every root whose dims are all known is also lowered and analysed, so the
    // graph-level errors (algebraic loops, mixed directions) are found too.
    auto r = readFile(checkOpts);
    if (!r) return kExitUserError;
    try {
      if (r->ok())
        for (const auto &e : r->sema.entities)
          if (e.complete) compile(*r, e, checkOpts);
    } catch (TooManyErrors &) {
    }
    printSummary(*r->diags);
    return r->ok() ? kExitOk : kExitUserError;
  }
  auto pairs = [](const std::vector<std::string> &args, const char *flag, std::map<std::string, std::string> &out) {
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
  };
  if (run->parsed()) {
    RunOptions ro;
    ro.params = runParams;
    ro.out = runOut;
    ro.f64 = runDtype == "f64";
    ro.grad = gradOpt->count() > 0;
    ro.paramGradsOnly = runParamGradsOnly;
    if (ro.paramGradsOnly && !ro.grad) {
      fmt::print(stderr, "rnnc: error: --param-grads-only goes with --grad\n");
      return kExitUserError;
    }
    if (!pairs(runInputs, "--input", ro.inputs) || !pairs(runStates, "--state", ro.states) ||
        !pairs(runGrads, "--grad", ro.seeds))
      return kExitUserError;
    ro.compiled = runEngine == "compiled";
    ro.cuda = runCuda;
    if (ro.compiled) {
      ro.device = resolveDevice(runDevice);
      if (ro.device.empty()) return kExitUserError;
    } else if (runDevice == "cuda") {
      fmt::print(stderr, "rnnc: error: --engine interp runs on the CPU; --device cuda goes with the compiled engine\n");
      return kExitUserError;
    }
    ro.optimize = !runOpts.o0;
    ro.timeParallel = timeParallelOf(runOpts);
    ro.maxMemory = runMaxMemory;
    auto r = readFile(runOpts);
    if (!r || !r->ok()) {
      if (r) printSummary(*r->diags);
      return kExitUserError;
    }
    const Elaboration *e = selectEntity(*r, runOpts.file, runOpts.entry);
    if (!e) return kExitUserError;
    std::optional<Graph> g;
    try {
      g = lowerToGraph(*e, *r->diags);
    } catch (TooManyErrors &) {
    }
    printSummary(*r->diags);
    if (!g) return kExitUserError;
    ro.sm = &r->sm;
    return runGraph(std::move(*g), ro);
  }
  if (compileCmd->parsed()) {
    if (compileJit && compileTarget == "cpu") {
      fmt::print(stderr, "rnnc: error: --jit goes with --target cuda (it puts the CUDA kernels in a string for NVRTC)\n");
      return kExitUserError;
    }
    if ((compileTf32 || compileGraphs) && compileTarget != "cuda") {
      fmt::print(stderr, "rnnc: error: {} goes with --target cuda\n", compileTf32 ? "--tf32" : "--cuda-graphs");
      return kExitUserError;
    }
    auto r = readFile(compileOpts);
    if (!r || !r->ok()) {
      if (r) printSummary(*r->diags);
      return kExitUserError;
    }
    const Elaboration *e = selectEntity(*r, compileOpts.file, compileOpts.entry);
    if (!e) return kExitUserError;
    std::unique_ptr<Compilation> c;
    try {
      c = compile(*r, *e, compileOpts, {}, true);
    } catch (TooManyErrors &) {
    }
    printSummary(*r->diags);
    if (!c) return kExitUserError;
    codegen::Program program;
    if (!bundleProgram(*r, *e, *c, program)) return kExitUserError;
    std::string error;
    codegen::CudaOptions cuda;
    cuda.jit = compileJit;
    cuda.tf32 = compileTf32;
    cuda.cudaGraphs = compileGraphs;
    codegen::Bundle bundle = codegen::printBundle(program, r->sm, compileTarget, &cuda);
    if (!compileNoFormat) {
      std::string skipped;
      if (!codegen::formatBundle(bundle, error, skipped)) {
        fmt::print(stderr, "rnnc: internal compiler error: formatting the generated code: {}\n", error);
        return kExitInternal;
      }
      if (!skipped.empty())
        fmt::print(stderr, "rnnc: note: {} is {}; it is written as printed (rnnc formats up to {})\n", skipped,
                   rt::bytesText(bundle.source.size()), rt::bytesText(codegen::kFormatLimitBytes));
      else
        bundle.clangFormat = codegen::clangFormatStyle();
    }
    std::string warning;
    if (!codegen::writeBundle(bundle, compileOut, error, &warning)) {
      fmt::print(stderr, "rnnc: error: {}\n", error);
      return kExitUserError;
    }
    if (!warning.empty()) fmt::print(stderr, "rnnc: warning: {}\n", warning);
    return kExitOk;
  }
  auto dimsOf = [](const CommonOptions &o, std::vector<DimOverride> &dims) {
    for (const auto &d : o.defines) {
      std::string error;
      auto parsed = parseDimOverride(d, error);
      if (!parsed) {
        fmt::print(stderr, "rnnc: error: {}\n", error);
        return false;
      }
      dims.push_back(*parsed);
    }
    return true;
  };
  if (trainCmd->parsed()) {
    if (!dimsOf(trainOpts, tc.dims)) return kExitUserError;
    tc.device = resolveDevice(trainDevice);
    if (tc.device.empty()) return kExitUserError;
    tc.file = trainOpts.file;
    tc.entry = trainOpts.entry;
    tc.optimize = !trainOpts.o0;
    tc.timeParallel = timeParallelOf(trainOpts);
    tc.color = ::isatty(STDERR_FILENO) && !std::getenv("NO_COLOR");
    return trainCommand(tc);
  }
  if (benchCmd->parsed()) {
    if (!dimsOf(benchOpts, bc.dims)) return kExitUserError;
    bc.device = resolveDevice(benchDevice);
    if (bc.device.empty()) return kExitUserError;
    if (benchOpts.o0) bc.onlyOptimized = false;
    bc.timeParallel = timeParallelOf(benchOpts);
    bc.file = benchOpts.file;
    bc.entry = benchOpts.entry;
    bc.color = ::isatty(STDERR_FILENO) && !std::getenv("NO_COLOR");
    return benchCommand(bc);
  }
  if (init->parsed()) {
    auto r = readFile(initOpts);
    if (!r || !r->ok()) {
      if (r) printSummary(*r->diags);
      return kExitUserError;
    }
    printSummary(*r->diags);
    const Elaboration *e = selectEntity(*r, initOpts.file, initOpts.entry);
    if (!e) return kExitUserError;
    return initParams(*e, initSeed, initOut, initMaxMemory);
  }
  if (show->parsed()) {
    if (html || !htmlOut.empty() || show->count("--target")) {
      const char *other = ast ? "--ast" : params ? "--params" : !after.empty() ? "--after" : all ? "--all" : dot ? "--dot"
                          : sched ? "--schedule" : stats ? "--stats" : json ? "--json" : nullptr;
      if (!html) {
        fmt::print(stderr, "rnnc: error: {} goes with --html\n", htmlOut.empty() ? "--target" : "-o");
        return kExitUserError;
      }
      if (htmlOut.empty()) {
        fmt::print(stderr, "rnnc: error: --html needs -o FILE: the page to write\n");
        return kExitUserError;
      }
      if (other) {
        fmt::print(stderr, "rnnc: error: --html writes a page of its own; it does not combine with {}\n", other);
        return kExitUserError;
      }
    }
    bool graphWanted = !after.empty() || all || dot || sched || stats || html;
    if (!ast && !params && !graphWanted) {
      fmt::print(stderr, "rnnc: error: nothing to show: pass --ast, --params, --after PASS, --all, --dot, "
                         "--schedule, --stats or --html\n");
      return kExitUserError;
    }
    if (json && !stats) {
      fmt::print(stderr, "rnnc: error: --json goes with --stats\n");
      return kExitUserError;
    }
    const PassInfo *afterPass = after.empty() ? nullptr : findPass(after);
    if (!after.empty() && !afterPass) {
      fmt::print(stderr, "rnnc: error: no pass '{}' (the passes are: {})\n", after, passNameList());
      return kExitUserError;
    }
    if (showOpts.o0 && afterPass && !afterPass->atO0) {
      std::string atO0;
      for (const PassInfo &p : passRegistry())
        if (p.atO0) atO0 += (atO0.empty() ? "" : ", ") + std::string(p.name);
      fmt::print(stderr, "rnnc: error: {} does not run at -O0 (it runs {})\n", after, atO0);
      return kExitUserError;
    }
    auto r = readFile(showOpts);
    if (!r || !r->ok()) {
      if (r) printSummary(*r->diags);
      return kExitUserError;
    }
    std::string out;
    if (ast) out += dumpAST(r->program.root().module, r->sm);
    if (graphWanted) {
      const Elaboration *e = selectEntity(*r, showOpts.file, showOpts.entry);
      if (!e) return kExitUserError;
      std::string dumps;
      PassObserver observe = [&](const std::string &pass, const Compilation &c, bool changed) {
        if (pass == after || (all && changed)) {
          dumps += fmt::format("// ----- after {} -----\n", pass);
          dumps += passDumpText(findPass(pass)->dump, c, r->sm);
        }
      };
      std::unique_ptr<Compilation> c, withBackward;
      try {
        c = compile(*r, *e, showOpts, observe, backward);
        // The stats (and the page's kernels) always count the backward pass too.
        if (c && (stats || html)) withBackward = backward ? nullptr : compile(*r, *e, showOpts, {}, true);
      } catch (TooManyErrors &) {
      }
      printSummary(*r->diags);
      if (!c || ((stats || html) && !backward && !withBackward)) return kExitUserError;
      const Compilation &full = withBackward ? *withBackward : *c;
      if (html) return writeReport(*r, *e, *c, full, htmlTarget, htmlOut);
      out += dumps;
      if (dot) out += graphDot(*c, r->sm);
      if (sched) out += scheduleText(*c, r->sm);
      if (stats) out += json ? statsJson(computeStats(full)).dump(2) + "\n" : statsText(computeStats(full));
    }
    if (params) out += paramsText(*r);
    fmt::print("{}", out);
    std::fflush(stdout);
    return kExitOk;
  }
  return kExitUserError;
}

} // namespace
} // namespace rnnc

int main(int argc, char **argv) {
  rnnc::installCrashHandlers();
  try {
    return rnnc::run(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "rnnc: internal compiler error: out of memory\n");
    return rnnc::kExitInternal;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rnnc: internal compiler error: %s\n", e.what());
    return rnnc::kExitInternal;
  }
}
