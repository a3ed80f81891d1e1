#include "frontend/ParamInit.h"

#include "frontend/CellWalk.h"
#include "rnnc/init.h"

#include <cmath>
#include <functional>
#include <random>
#include <set>

namespace rnnc {

std::map<std::string, InitRule> initRules(const Elaboration &e) {
  // Each param of a cell instance: uniform in ±1/sqrt(H), H the width of the
  // cell's first output (torch's rule for its recurrent cells). A model's own
  // params: an embedding table N(0, 1) (torch.nn.Embedding); a matrix
  // uniform in ±1/sqrt(columns) and a vector in ±1/sqrt(its length)
  // (torch.nn.Linear's rule, by fan-in).
  std::map<std::string, double> bound;
  std::set<std::string> tables;
  std::function<void(const ElaboratedInstance &)> visit = [&](const ElaboratedInstance &inst) {
    const CellDecl &cell = *inst.cell;
    std::optional<int64_t> h;
    if (!cell.outputs.empty())
      if (auto it = inst.values.find(cell.outputs[0].name); it != inst.values.end()) h = it->second.width;
    for (const auto &st : cell.body) {
      if (st->kind == StmtKind::Assign) {
        forEachCall(*static_cast<const AssignStmt &>(*st).value, [&](const CallExpr &c) {
          if (c.callee.name == "embed" && !c.args.empty() && c.args[0]->kind == ExprKind::Name)
            tables.insert(inst.prefix + as<NameExpr>(*c.args[0]).name);
        });
        continue;
      }
      for (const auto &n : static_cast<const ParamDecl &>(*st).names)
        if (!cell.isModel && h) bound[inst.prefix + n.name] = 1.0 / std::sqrt(static_cast<double>(*h));
    }
    for (const auto &[stmt, child] : inst.children) visit(*child);
  };
  visit(*e.tree);
  std::map<std::string, InitRule> rules;
  for (const ElaboratedParam &p : e.params) {
    int64_t fanIn = p.shape.size() == 2 ? *p.shape[1] : *p.shape[0];
    InitRule r;
    r.normal = tables.count(p.name) > 0;
    r.scale = r.normal ? 1.0 : bound.count(p.name) ? bound.at(p.name) : 1.0 / std::sqrt(static_cast<double>(fanIn));
    rules[p.name] = r;
  }
  return rules;
}

std::vector<io::Tensor> initialParams(const Elaboration &e, uint64_t seed) {
  auto rules = initRules(e);
  std::mt19937_64 rng(seed);
  std::vector<io::Tensor> tensors;
  for (const ElaboratedParam &p : e.params) {
    io::Tensor t;
    t.name = p.name;
    t.array.dtype = io::DType::F32;
    int64_t numel = 1;
    for (const auto &d : p.shape) {
      t.array.shape.push_back(*d);
      numel *= *d;
    }
    t.array.data.resize(static_cast<size_t>(numel));
    const InitRule &r = rules.at(p.name);
    rt::drawParam(rng, r.normal, r.scale, numel, t.array.data.data());
    tensors.push_back(std::move(t));
  }
  return tensors;
}

double paramElements(const Elaboration &e) {
  double n = 0;
  for (const ElaboratedParam &p : e.params) {
    double numel = 1;
    for (const auto &d : p.shape) numel *= static_cast<double>(d.value_or(0));
    n += numel;
  }
  return n;
}

} // namespace rnnc
