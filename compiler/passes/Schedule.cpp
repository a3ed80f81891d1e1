// 1. Order: a time-parallel stage of level k has rank 2k, a loop of level k
//    rank 2k-1; ties keep loop order. A stage needs another if one of its
//    nodes reads one of the other's.
// 2. -O0: walk the stages in order, merging each into the current run when it
//    is a loop of the run's direction, or time-parallel work whose delayed
//    reads of the run point the way the run goes.
// 3. Streams, in order: a stage continues the stream whose last stage it needs
//    (the first such), else opens a new stream; every needed stage on another
//    stream is an event to wait for.
#include "passes/Schedule.h"

#include <algorithm>
#include <set>

namespace rnnc {

namespace {

void computeNeeds(const Graph &g, std::vector<Stage> &stages) {
  std::vector<int> stageOf(g.nodes.size(), -1);
  for (size_t s = 0; s < stages.size(); ++s)
    for (NodeId id : stages[s].nodes) stageOf[id] = static_cast<int>(s);
  for (size_t s = 0; s < stages.size(); ++s) {
    std::set<int> needs;
    for (NodeId id : stages[s].nodes)
      for (Edge e : g.node(id).inputs)
        if (stageOf[e.src] >= 0 && stageOf[e.src] != static_cast<int>(s)) needs.insert(stageOf[e.src]);
    stages[s].after.assign(needs.begin(), needs.end());
    stages[s].waits.clear();
  }
}

/// Whether every delayed read among `nodes` (and from `nodes` into `run`) goes
/// the way a loop of `direction` runs, so one loop can compute them all.
bool readsFollow(const Graph &g, const std::vector<NodeId> &nodes, const std::set<NodeId> &run, int direction) {
  for (NodeId id : nodes)
    for (Edge e : g.node(id).inputs)
      if (run.count(e.src) && e.delay != 0 && (e.delay > 0) != (direction > 0)) return false;
  return true;
}

std::vector<Stage> mergeIntoRuns(const Graph &g, std::vector<Stage> stages) {
  std::vector<Stage> runs;
  std::set<NodeId> inRun;
  bool runHasLoop = false;
  for (Stage &s : stages) {
    bool joins = false;
    if (!runs.empty()) {
      Stage &run = runs.back();
      std::set<NodeId> with = inRun;
      with.insert(s.nodes.begin(), s.nodes.end());
      if (s.backward != run.backward) {
        joins = false;
      } else if (s.loop && runHasLoop) {
        joins = s.direction == run.direction;
      } else if (s.loop) {
        // A run of time-parallel work takes the loop's direction if its own
        // delayed reads allow it.
        joins = true;
        for (const auto &part : {run.nodes, s.nodes}) joins &= readsFollow(g, part, with, s.direction);
        if (joins) run.direction = s.direction;
      } else {
        joins = readsFollow(g, s.nodes, with, run.direction);
      }
    }
    if (!joins) {
      std::set<NodeId> own(s.nodes.begin(), s.nodes.end());
      int direction = s.loop ? s.direction : readsFollow(g, s.nodes, own, +1) ? +1 : readsFollow(g, s.nodes, own, -1) ? -1 : 0;
      if (direction == 0) {
        // Time-parallel work reading both earlier and later steps of itself:
        // one loop per op, each after the ops it reads (they are in order).
        for (size_t k = 0; k < s.nodes.size(); ++k) {
          Stage one;
          one.loop = true;
          one.level = s.level;
          one.backward = s.backward;
          one.nodes = {s.nodes[k]};
          for (auto &kernel : s.kernels)
            if (kernel.nodes == one.nodes) one.kernels.push_back(kernel);
          runs.push_back(std::move(one));
        }
        inRun.clear();
        runHasLoop = true; // nothing more joins these
        continue;
      }
      Stage run;
      run.loop = true;
      run.direction = direction;
      run.level = s.level;
      run.backward = s.backward;
      runs.push_back(std::move(run));
      inRun.clear();
      runHasLoop = false;
    }
    Stage &run = runs.back();
    runHasLoop |= s.loop;
    run.loopIndex = run.loopIndex < 0 ? s.loopIndex : run.loopIndex;
    run.nodes.insert(run.nodes.end(), s.nodes.begin(), s.nodes.end());
    for (auto &k : s.kernels) run.kernels.push_back(std::move(k));
    inRun.insert(s.nodes.begin(), s.nodes.end());
  }
  return runs;
}

} // namespace

void schedule(Compilation &c) {
  std::vector<Stage> &stages = c.schedule.stages;
  auto rank = [](const Stage &s) { return s.loop ? 2 * s.level - 1 : 2 * s.level; };
  std::stable_sort(stages.begin(), stages.end(), [&](const Stage &a, const Stage &b) {
    if (a.backward != b.backward) return !a.backward; // forward first (backward reads it)
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.loopIndex < b.loopIndex;
  });
  if (!c.optimize) stages = mergeIntoRuns(c.graph, std::move(stages));
  computeNeeds(c.graph, stages);

  std::vector<int> tail; // last stage issued on each stream
  for (size_t s = 0; s < stages.size(); ++s) {
    Stage &stage = stages[s];
    int stream = -1;
    if (c.optimize) {
      for (int need : stage.after)
        for (size_t k = 0; k < tail.size() && stream < 0; ++k)
          if (tail[k] == need) stream = static_cast<int>(k);
    } else if (!tail.empty()) {
      stream = 0; // -O0: one stream
    }
    if (stream < 0 && (stage.after.empty() && !tail.empty() && c.optimize)) {
      // Needs nothing: it may start at once on a stream of its own.
      stream = static_cast<int>(tail.size());
      tail.push_back(-1);
    }
    if (stream < 0) {
      stream = static_cast<int>(tail.size());
      tail.push_back(-1);
    }
    stage.stream = stream;
    tail[stream] = static_cast<int>(s);
    for (int need : stage.after)
      if (stages[need].stream != stream) stage.waits.push_back(need);
  }
  c.schedule.streams = std::max<int>(1, static_cast<int>(tail.size()));
}

} // namespace rnnc
