#include "driver/Compiler.h"

#include "driver/Entity.h"
#include "frontend/Lower.h"
#include "frontend/ParamInit.h"
#include "passes/ApplyLengths.h"
#include "passes/Autodiff.h"

#include <fmt/format.h>

namespace rnnc {

std::optional<DType> parseDType(std::string_view name) {
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::F16})
    if (name == dtypeName(d)) return d;
  return std::nullopt;
}

TimeParallelMode timeParallelMode(std::string_view name) {
  return name == "off" ? TimeParallelMode::Off : name == "scan" ? TimeParallelMode::Scan
         : name == "newton" ? TimeParallelMode::Newton : TimeParallelMode::Auto;
}

std::optional<CheckedProgram> checkProgram(const std::string &path, const CompileOptions &o, const std::string *text,
                                           bool pickEntity) {
  FrontendOptions fo;
  fo.dims = o.dims;
  fo.color = o.color;
  CheckedProgram p;
  p.path = path;
  p.file = runFrontend(path, fo, text);
  if (!p.file->ok()) {
    printSummary(*p.file->diags);
    return std::nullopt;
  }
  if (pickEntity && !(p.entity = selectEntity(*p.file, path, o.entry))) return std::nullopt;
  return p;
}

std::unique_ptr<Compilation> compileGraph(Graph g, const CompileOptions &o, DiagnosticEngine &diags,
                                          const PassObserver &observe) {
  auto c = std::make_unique<Compilation>();
  c->graph = std::move(g);
  c->optimize = o.optimize;
  c->dtype = o.dtype;
  c->timeParallel = o.timeParallel;
  if (observe) observe("lower", *c, true);
  try {
    if (!runPipeline(*c, diags, observe)) return nullptr;
  } catch (TooManyErrors &) {
    return nullptr;
  }
  return c;
}

std::unique_ptr<Compilation> compileProgram(const CheckedProgram &p, const Elaboration &entity, const CompileOptions &o,
                                            const PassObserver &observe) {
  DiagnosticEngine &diags = *p.file->diags;
  try {
    std::optional<Graph> g = lowerToGraph(entity, diags);
    if (!g) return nullptr;
    if (o.lengths && !applyLengths(*g, diags)) return nullptr;
    if (o.gradients != Gradients::None) {
      Objective objective = defaultObjective(*g);
      objective.inputGrads = objective.stateGrads = objective.stateSeeds = o.gradients == Gradients::All;
      if ((objective.loss || !objective.outputs.empty()) && !differentiate(*g, objective, diags)) return nullptr;
    }
    return compileGraph(std::move(*g), o, diags, observe);
  } catch (TooManyErrors &) {
    return nullptr;
  }
}

void finishDiagnostics(const CheckedProgram &p) { printSummary(*p.file->diags); }

bool kernelsOf(const Compilation &c, const CheckedProgram *entity, codegen::Program &program, std::string &error) {
  if (!codegen::buildProgram(c, program, error)) return false;
  if (!entity) return true;
  program.dims = entity->file->sema.dims;
  auto rules = initRules(*entity->entity);
  for (codegen::ParamSlot &s : program.params)
    if (auto it = rules.find(s.name); it != rules.end()) {
      s.initNormal = it->second.normal;
      s.initScale = it->second.scale;
    }
  return true;
}

std::optional<codegen::Bundle> bundleOf(const Compilation &c, const CheckedProgram *entity, const SourceManager &sm,
                                        const BundleOptions &o, std::string &error) {
  codegen::Program program;
  if (!kernelsOf(c, entity, program, error)) return std::nullopt;
  return codegen::printBundle(program, sm, o.target, &o.cuda);
}

std::optional<codegen::Bundle> compileToBundle(const std::string &path, const CompileOptions &o, const BundleOptions &b,
                                               const std::string *text) {
  auto p = checkProgram(path, o, text);
  if (!p) return std::nullopt;
  auto c = compileProgram(*p, o);
  finishDiagnostics(*p);
  if (!c) return std::nullopt;
  std::string error;
  auto bundle = bundleOf(*c, &*p, p->file->sm, b, error);
  if (!bundle) fmt::print(stderr, "rnnc: error: {}\n", error);
  return bundle;
}

} // namespace rnnc
