// plan-memory (passes/PlanMemory.h): the one memory plan, by hand on small
// cells, and the kernel IR allocating exactly its buffers. That the bundles'
// workspace_bytes agree with `show --stats` on every sample is
// tests/memory/run.py.
#include "TestSupport.h"

#include "codegen/ConcatInPlace.h"
#include "codegen/KernelIR.h"
#include "frontend/Lower.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"
#include "passes/PlanMemory.h"
#include "passes/Stats.h"
#include "rnnc/workspace.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>

using namespace rnnc;

namespace {

struct Planned {
  std::unique_ptr<FrontendResult> fe;
  Compilation c;
  const MemoryPlan &m() const { return c.memory; }
  /// The buffer of the value the user named `name`.
  const WorkspaceBuffer &of(const std::string &name) const {
    for (NodeId id = 0; id < c.graph.nodes.size(); ++id)
      if (!c.graph.node(id).dead && c.graph.node(id).name == name && c.memory.bufferOf[id] >= 0)
        return c.memory.buffers[c.memory.bufferOf[id]];
    FAIL("no buffer for " << name);
    return c.memory.buffers.front();
  }
  /// The buffer of the product with param `param`.
  const WorkspaceBuffer &product(const std::string &param) const {
    for (NodeId id = 0; id < c.graph.nodes.size(); ++id) {
      const Node &n = c.graph.node(id);
      if (!n.dead && n.op == Op::MatMul && n.params.front() == param) return c.memory.buffers[c.memory.bufferOf[id]];
    }
    FAIL("no product with " << param);
    return c.memory.buffers.front();
  }
};

enum class Backward { None, All, Training };

/// Frontend, lowering, autodiff of the default objective (All) or of the
/// params' gradients alone (Training), the pipeline.
std::unique_ptr<Planned> planned(const std::string &text, Backward backward, TimeParallelMode mode = TimeParallelMode::Auto,
                                 std::vector<DimOverride> dims = {}, DType dtype = DType::F32) {
  auto out = std::make_unique<Planned>();
  out->fe = test::frontend(text, std::move(dims));
  REQUIRE(out->fe->ok());
  auto graph = lowerToGraph(out->fe->sema.entities.front(), *out->fe->diags);
  REQUIRE(graph);
  Objective objective = defaultObjective(*graph);
  objective.inputGrads = objective.stateGrads = backward != Backward::Training;
  if (backward != Backward::None) REQUIRE(differentiate(*graph, objective, *out->fe->diags));
  out->c.graph = std::move(*graph);
  out->c.timeParallel.mode = mode;
  out->c.dtype = dtype;
  REQUIRE(runPipeline(out->c, *out->fe->diags));
  REQUIRE(out->c.memory.planned);
  return out;
}

const std::string kRing = "dim H = 8\n"
                          "cell Ring(x: [H]) -> h {\n"
                          "  param U: [H, H]\n"
                          "  a = tanh(U @ h[t-1] + x)\n"
                          "  h = a + a[t-2]\n"
                          "}\n";

const std::string kMinGru = "dim I = 4\ndim H = 8\n"
                            "cell MinGRU(x: [I]) -> h {\n"
                            "  param W: [2*H, I]\n"
                            "  param b: [2*H]\n"
                            "  zx, hc = split(W @ x + b, 2)\n"
                            "  z = sigmoid(zx)\n"
                            "  h = (1 - z) * h[t-1] + z * hc\n"
                            "}\n";

const std::string kIndRnn = "dim I = 4\ndim H = 8\n"
                            "cell IndRNN(x: [I]) -> h {\n"
                            "  param W: [H, I]\n"
                            "  param u, b: [H]\n"
                            "  h = relu(W @ x + u * h[t-1] + b)\n"
                            "}\n";

/// The scratch of the one loop stage that has some (null: none).
const ScanScratch *scanOf(const MemoryPlan &m) {
  for (const ScanScratch &s : m.scans)
    if (s.aggregates >= 0) return &s;
  return nullptr;
}

} // namespace

TEST_CASE("plan-memory: the LSTM forward, by hand", "[passes][memory]") {
  auto r = planned(test::kLstmSource, Backward::None); // I = 64, H = 128: the gates are 512 wide
  // x (an input) and W_ih @ x (the hoisted GEMM, read by the loop) keep every
  // step; W_hh @ h[t-1] and the gates' sum (read by the slices' sweeps, the
  // slices being views) are written and read within one step of the loop;
  // h is read at t-1 and is the output: T + 1 rows; c is read at t-1 by its
  // loop alone: a ring of two steps, which holds its initial and final steps.
  CHECK(r->m().buffers.size() == 6);
  CHECK(r->of("x").input == 0);
  CHECK(r->product("W_ih").rowsPerStep() == 1);
  CHECK(r->product("W_hh").stepLocal);
  CHECK(r->of("c").padBefore == 1);
  CHECK(bufferRows(r->of("c")) == "2");
  CHECK(bufferRows(r->of("h")) == "T + 1");
  CHECK(r->m().bytesPerStep == 4 * (64 + 512 + 128));
  CHECK(r->m().fixedBytes == 4 * (512 + 512 + 2 * 128 + 128)); // two step-local buffers, c's ring, h's initial row
  CHECK(r->m().savedBytesPerStep == 0); // no backward pass compiled
}

TEST_CASE("plan-memory: the LSTM with backward keeps what BPTT reads", "[passes][memory]") {
  auto r = planned(test::kLstmSource, Backward::All);
  // BPTT reads sigmoid(f), sigmoid(i), tanh(g), sigmoid(o), tanh(c), c and h
  // (not x, an input): 7 values of 128 floats per step.
  int saved = 0;
  for (const WorkspaceBuffer &b : r->m().buffers) {
    if (!b.saved) continue;
    ++saved;
    CHECK(b.width == 128);
    CHECK(b.rowsPerStep() == 1);
  }
  CHECK(saved == 7);
  CHECK(r->m().savedBytesPerStep == 7 * 128 * 4);
  CHECK(r->m().savedBytesPerStep == computeStats(r->c).savedBytesPerStep);
  // The gates' gradients (backward's concat, read by the hoisted GEMMs after
  // the loop) take the memory of the hoisted input GEMM's result, whose last
  // reader is the forward loop.
  int sharing = 0;
  for (const WorkspaceBuffer &b : r->m().buffers) {
    if (b.shares < 0) continue;
    ++sharing;
    CHECK(r->c.graph.node(b.node).op == Op::Concat);
    CHECK(r->m().buffers[b.shares].name == r->product("W_ih").name);
  }
  CHECK(sharing == 1);
  CHECK(r->m().bytesPerStep == r->m().unsharedBytesPerStep - 4 * 512);
  // The initial states' gradients: one step before the first, all padding.
  CHECK(r->m().initialStateGradients.size() == 2);
  for (const auto &[state, b] : r->m().initialStateGradients) {
    CHECK(r->m().buffers[b].fixed);
    CHECK(r->m().buffers[b].fixedRows() == 1);
  }
  Stats s = computeStats(r->c);
  CHECK(s.bufferBytesPerStep == r->m().bytesPerStep);
  CHECK(s.bufferFixedBytes == r->m().fixedBytes);
  CHECK(s.cudaBytesPerStep == 4); // the bias gradients' ones: one real per row
}

TEST_CASE("plan-memory: a value only its loop reads k steps back keeps a ring of k + 1 steps", "[passes][memory]") {
  // Training's backward pass (the params' gradients alone): the backward
  // loop reads W_hh^T @ delta one step later (t + 1) and nothing else does.
  auto r = planned(test::kLstmSource, Backward::Training);
  const WorkspaceBuffer *ring = nullptr;
  for (const WorkspaceBuffer &b : r->m().buffers)
    if (b.node != kNoNode && r->c.graph.node(b.node).op == Op::MatMulT) ring = &b;
  REQUIRE(ring);
  CHECK(ring->ring == 2);
  CHECK(ring->fixedBytes() == 2 * 128 * 4);
  CHECK(bufferSteps(*ring) == "ring of 2");
  // With the initial states' gradients asked for, they read it again after
  // the loop at step 0, the last step the loop wrote: the ring still holds it.
  auto all = planned(test::kLstmSource, Backward::All);
  int rings = 0;
  for (const WorkspaceBuffer &b : all->m().buffers)
    if (b.node != kNoNode && all->c.graph.node(b.node).op == Op::MatMulT && b.width == 128) {
      CHECK(bufferSteps(b) == "ring of 2");
      ++rings;
    }
  CHECK(rings == 1);
  // What they read at step -1, before the first, of a backward value (the
  // seeds, dc's term of the same step) is the zero padding: no load at all,
  // so that term stays a local of the loop's kernel and the seeds need no padding.
  int zeros = 0;
  for (const auto &[node, input] : all->m().initialZeros) {
    const Edge &e = all->c.graph.node(node).inputs[input];
    CHECK(all->c.graph.node(e.src).backward);
    CHECK(e.delay >= 0);
    int b = all->m().bufferOf[e.src];
    if (b >= 0) CHECK(all->m().buffers[b].padBefore == 0);
    ++zeros;
  }
  CHECK(zeros >= 3); // dh's two seeds, dc's seed and its f·dc term
  for (const WorkspaceBuffer &b : all->m().buffers)
    if (b.node != kNoNode && all->c.graph.node(b.node).backward && !b.fixed) CHECK(b.padBefore == 0);
  // A state that backward reads keeps all T, with a[t-2]'s two steps of padding.
  auto state = planned(kRing, Backward::All);
  CHECK(bufferRows(state->of("a")) == "T + 2");
  CHECK(state->of("a").saved);
  CHECK(state->product("U").stepLocal);
}

TEST_CASE("plan-memory: a state only its loop reads keeps a ring; its initial and final steps are the ring's",
          "[passes][memory]") {
  // Forward alone: the LSTM's c is no output and nothing after the loop
  // reads it but the final state (a port the host reads at steps T - 1).
  auto fwd = planned(test::kLstmSource, Backward::None);
  CHECK(fwd->of("c").ring == 2);
  CHECK(fwd->of("c").rowsPerStep() == 0);
  CHECK(bufferRows(fwd->of("h")) == "T + 1"); // the output
  // Backward reads c at every step: all T.
  auto all = planned(test::kLstmSource, Backward::All);
  CHECK(all->of("c").ring == 0);
  CHECK(all->of("c").saved);
  // a[t-2] of kRing: a ring of three steps, initial steps -2 and -1 in slots 1 and 2.
  auto ring = planned(kRing, Backward::None);
  CHECK(ring->of("a").ring == 3);
  CHECK(rnnc::host::ring_slot(-2, 3) == 1);
  CHECK(rnnc::host::ring_slot(-1, 3) == 2);
}

/// The buffers of the final states' seeds, by state.
std::map<std::string, const WorkspaceBuffer *> finalSeeds(const Planned &p) {
  std::map<std::string, const WorkspaceBuffer *> out;
  for (const WorkspaceBuffer &b : p.m().buffers) {
    const std::string &name = b.node == kNoNode ? "" : p.c.graph.node(b.node).name;
    if (name.rfind(kFinalSeedPrefix, 0) == 0) out[name.substr(kFinalSeedPrefix.size())] = &b;
  }
  return out;
}

TEST_CASE("plan-memory: a final state's seed keeps its last steps and one step of zeros", "[passes][memory]") {
  // Zero but at the last step: the LSTM's two seeds keep that step (slot 1)
  // and the zeros every other step reads (slot 0), not T rows.
  auto lstm = planned(test::kLstmSource, Backward::All);
  auto seeds = finalSeeds(*lstm);
  REQUIRE(seeds.size() == 2);
  for (const auto &[state, b] : seeds) {
    CHECK(b->lastSteps == 1);
    CHECK(b->rowsPerStep() == 0);
    CHECK(b->fixedBytes() == 2 * 128 * 4);
    CHECK(bufferSteps(*b) == "last 1");
  }
  // A seed read by a loop that runs in parallel over time (minGRU's scan,
  // whose chunks run at once) keeps every step; run step by step, its last.
  auto minGru = planned(kMinGru, Backward::All); // finalSeeds points into it: it must outlive them
  auto scan = finalSeeds(*minGru);
  REQUIRE(scan.size() == 1);
  CHECK(scan.begin()->second->lastSteps == 0);
  CHECK(scan.begin()->second->rowsPerStep() == 1);
  auto minGruOff = planned(kMinGru, Backward::All, TimeParallelMode::Off);
  auto stepwise = finalSeeds(*minGruOff);
  REQUIRE(stepwise.size() == 1);
  CHECK(stepwise.begin()->second->lastSteps == 1);
  // The slots: steps T - k .. T - 1 in 1 .. k, every earlier step in 0; with
  // T < k the steps are the last T slots.
  using rnnc::host::seed_slot;
  CHECK(seed_slot(0, 5, 2) == 0);
  CHECK(seed_slot(2, 5, 2) == 0);
  CHECK(seed_slot(3, 5, 2) == 1);
  CHECK(seed_slot(4, 5, 2) == 2);
  CHECK(seed_slot(0, 1, 2) == 2);
  CHECK(seed_slot(99, 100, 1) == 1);
}

TEST_CASE("plan-memory: gate gradients summed after the loop rise into it and keep one step", "[passes][memory]") {
  // The GRU's backward loop writes the three gate gradients; W_ih's products
  // read them padded to 3H and summed. That sum reads only the loop's values
  // at the same step, so fuse-pointwise puts it in the loop's kernel: the
  // padded pieces stay one step's rows, only the sum keeps every step.
  auto r = planned(test::kGruSource, Backward::Training);
  const Graph &g = r->c.graph;
  int pads = 0, sums = 0;
  for (const WorkspaceBuffer &b : r->m().buffers) {
    if (b.node == kNoNode || !g.node(b.node).backward) continue;
    const Node &n = g.node(b.node);
    if (n.op == Op::Pad) {
      CHECK(b.stepLocal);
      ++pads;
    }
    if (n.op == Op::Add && n.width == 24 && bufferSteps(b) == "T") ++sums; // the gate gradients of W_ih and W_hh
  }
  CHECK(pads >= 2);
  CHECK(sums == 2);
  // No time-parallel kernel is left after the loop but the library calls and the bias sums.
  for (const Stage &s : r->c.schedule.stages)
    if (s.backward && !s.loop)
      for (const Kernel &k : s.kernels)
        for (NodeId id : k.nodes) CHECK(opKind(g.node(id).op) != OpKind::Layout);
}

TEST_CASE("plan-memory: --dtype bf16 stores what keeps every step in 16 bits, but the recurrent states", "[passes][memory]") {
  auto f32 = planned(test::kLstmSource, Backward::All);
  auto bf16 = planned(test::kLstmSource, Backward::All, TimeParallelMode::Auto, {}, DType::BF16);
  REQUIRE(f32->m().buffers.size() == bf16->m().buffers.size());
  int half = 0;
  for (const WorkspaceBuffer &b : bf16->m().buffers) {
    const bool keepsEveryStep = b.rowsPerStep() == 1 && !b.padBefore && !b.padAfter && !b.scratch && !b.index;
    CHECK(b.half == keepsEveryStep);
    half += b.half;
    CHECK(b.bytesPerStep() == (b.half ? 2 : 4) * b.width * b.rowsPerStep());
  }
  // x, W_ih·x, the four gate values and tanh(c) backward reads, the output's
  // seed, dx and the gate gradients (sharing W_ih·x's memory). The final
  // states' seeds keep two steps' rows, in float.
  CHECK(half == 10);
  // c and h are read one step back (their padding holds the initial state): float.
  CHECK_FALSE(bf16->of("c").half);
  CHECK_FALSE(bf16->of("h").half);
  CHECK(bf16->product("W_ih").half);
  // Saved: five 16-bit values and c, h in float.
  CHECK(bf16->m().savedBytesPerStep == 5 * 128 * 2 + 2 * 128 * 4);
  CHECK(f32->m().savedBytesPerStep == 7 * 128 * 4);
  CHECK(bf16->m().bytesPerStep < f32->m().bytesPerStep * 2 / 3);
  // Sharing stays within one storage: the gate gradients still take W_ih·x's memory.
  for (const WorkspaceBuffer &b : bf16->m().buffers)
    if (b.shares >= 0) CHECK(bf16->m().buffers[b.shares].half == b.half);
  // Products read their float operands rounded: on CUDA h (128 wide) for W_hh·h and for the weight
  // gradient Σ δ h[t-1]ᵀ (δ is 16 bits), in a scratch per stream; f32 rounds nothing.
  CHECK(bf16->m().roundedPerRow == 128);
  CHECK(bf16->m().roundedStreams == 1);
  CHECK(f32->m().roundedPerRow == 0);
  // F16 plans the same buffers; F64 none in 16 bits.
  auto f16 = planned(test::kLstmSource, Backward::All, TimeParallelMode::Auto, {}, DType::F16);
  CHECK(f16->m().bytesPerStep == bf16->m().bytesPerStep);
  auto f64 = planned(test::kLstmSource, Backward::All, TimeParallelMode::Auto, {}, DType::F64);
  for (const WorkspaceBuffer &b : f64->m().buffers) CHECK_FALSE(b.half);
  // A loop run as a scan composes float coefficients: nothing it reads or writes is 16 bits.
  auto scan = planned(kMinGru, Backward::None, TimeParallelMode::Auto, {}, DType::BF16);
  REQUIRE(scanOf(scan->m()));
  CHECK_FALSE(scan->of("h").half);
  int read = 0;
  for (size_t s = 0; s < scan->c.schedule.stages.size(); ++s) {
    if (scan->m().scans[s].aggregates < 0) continue;
    for (NodeId id : scan->c.schedule.stages[s].nodes)
      for (const Edge &e : scan->c.graph.node(id).inputs)
        if (int b = scan->m().bufferOf[e.src]; b >= 0) {
          ++read;
          CHECK_FALSE(scan->m().buffers[b].half);
        }
  }
  CHECK(read >= 2); // (1 - z) and z·hc, made before the loop
  CHECK(scan->product("W").half); // W·x, which only the work before the loop reads
}

TEST_CASE("plan-memory: a loop run in parallel over time keeps every step and has its scratch", "[passes][memory]") {
  // minGRU's loop is a scan: k = 1 state of n = 8 per element; per chunk its
  // A and b (n·(k·k + k)) and its carry (n·k).
  auto scan = planned(kMinGru, Backward::None);
  const ScanScratch *s = scanOf(scan->m());
  REQUIRE(s);
  CHECK(s->states == 1);
  CHECK(s->width == 8);
  CHECK(s->coefficients < 0);
  const WorkspaceBuffer &aggregates = scan->m().buffers[s->aggregates];
  CHECK(aggregates.scratch);
  CHECK(aggregates.width == 16);
  CHECK(aggregates.fixedRows() == kScanChunks);
  CHECK(scan->m().buffers[s->carries].width == 8);
  // Off: no scratch.
  CHECK_FALSE(scanOf(planned(kMinGru, Backward::None, TimeParallelMode::Off)->m()));
  // A step of one element runs step by step (ScanIR takes no scalar loads of its own values).
  CHECK_FALSE(scanOf(planned(kMinGru, Backward::None, TimeParallelMode::Auto, {{"H", 1}})->m()));
  // IndRNN (relu) runs as Newton iterations: each step's coefficients too.
  auto newton = planned(kIndRnn, Backward::None);
  const ScanScratch *n = scanOf(newton->m());
  REQUIRE(n);
  REQUIRE(n->coefficients >= 0);
  CHECK(newton->m().buffers[n->coefficients].rowsPerStep() == 1);
  CHECK(newton->m().buffers[n->coefficients].width == 16);
}

TEST_CASE("plan-memory: the kernel IR allocates the plan, and workspaceBytes is the runtime's layout", "[passes][memory]") {
  for (const std::string *text : {&test::kLstmSource, &kRing, &kMinGru, &kIndRnn}) {
    auto r = planned(*text, Backward::All);
    codegen::Program p;
    std::string error;
    REQUIRE(codegen::buildProgram(r->c, p, error));
    REQUIRE(p.buffers.size() == r->m().buffers.size());
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      CHECK(p.buffers[b].name == r->m().buffers[b].name);
      CHECK(bufferRows(p.buffers[b]) == bufferRows(r->m().buffers[b]));
      CHECK(p.buffers[b].shares == r->m().buffers[b].cpuShares); // the program's: the CPU's
      CHECK(p.cudaShares[b] == r->m().buffers[b].shares);
    }
    codegen::Program cudaProgram = p;
    codegen::keepEveryStep(cudaProgram);
    CHECK(p.onesWidth == r->m().onesWidth);
    CHECK(p.panelElements == r->m().panelElements);
    CHECK(p.gridBarrierWords == r->m().gridBarrierWords);
    // What the generated layout() does (codegen/HostCode.cpp) with the runtime's Carver.
    for (auto [T, B] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {100, 32}}) {
      for (bool cuda : {false, true}) {
        host::Carver carver(nullptr, T, B);
        for (const codegen::Buffer &b : (cuda ? cudaProgram : p).buffers)
          if (b.caller && !cuda) continue; // the caller's array
          else if (b.shares < 0 && b.block && !cuda) (void)carver.take<float>(0, host::block_steps(T, B), b.width);
          else if (b.shares < 0)
            b.index ? (void)carver.take<int32_t>(b.rowsPerStep(), b.fixedRows(), b.width)
                    : (void)carver.take<float>(b.rowsPerStep(), b.fixedRows(), b.width);
        if (cuda && p.onesWidth) carver.take<float>(1, 0, p.onesWidth);
        if (!cuda && p.panelElements) carver.take_fixed<float>(p.panelElements);
        if (!cuda && p.zeroRowElements) carver.take_fixed<float>(p.zeroRowElements);
        if (cuda && p.gridBarrierWords) carver.take_fixed<unsigned>(p.gridBarrierWords);
        CHECK(workspaceBytes(r->m(), T, B, cuda) == carver.bytes());
      }
    }
  }
}

TEST_CASE("plan-memory: the CPU runs the hoisted product and the weight gradients in blocks of their loop's steps, "
          "and uses the caller's input, seed and input gradient in place",
          "[passes][memory]") {
  static_assert(MemoryPlan::kBlockRows == RNNC_BLOCK_ROWS, "the plan's figures and the runtime's block_steps agree");
  auto r = planned(test::kLstmSource, Backward::All);
  const MemoryPlan &m = r->m();
  const auto &stages = r->c.schedule.stages;
  REQUIRE(m.blockLoop.size() == stages.size());
  auto bufferOf = [&](Op op, bool backward) -> const WorkspaceBuffer * {
    for (const WorkspaceBuffer &b : m.buffers)
      if (b.node != kNoNode && r->c.graph.node(b.node).op == op && r->c.graph.node(b.node).backward == backward &&
          b.shares < 0)
        return &b;
    return nullptr;
  };
  // Forward: W_ih·x (the hoisted stage) runs at the start of each block of the loop, its buffer a block.
  std::vector<int> forwardLoops, inBlocks;
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].loop) forwardLoops.push_back(static_cast<int>(s));
    if (m.blockLoop[s] >= 0) {
      inBlocks.push_back(static_cast<int>(s));
      CHECK(!stages[s].loop);
      CHECK(stages[static_cast<size_t>(m.blockLoop[s])].loop);
      CHECK(stages[static_cast<size_t>(m.blockLoop[s])].backward == stages[s].backward);
    }
  }
  CHECK(inBlocks.size() == 2); // the hoisted stage forward, the weight gradients' stage backward
  const WorkspaceBuffer *hoisted = bufferOf(Op::MatMul, false);
  REQUIRE(hoisted);
  CHECK(hoisted->block);
  CHECK(hoisted->rowsPerStep() == 1); // CUDA keeps every step
  CHECK(m.blockBytesPerStep > 0);
  // What the host copies in or out, and what backward reads of forward, keep every step.
  for (const WorkspaceBuffer &b : m.buffers)
    if (b.input >= 0 || b.saved) CHECK_FALSE(b.block);
  // On the CPU the blocks take min(T, ⌈512 / B⌉)·B rows: less than T·B at B = 32, all of them at B = 1.
  CHECK(workspaceBytes(m, 100, 32, false) < workspaceBytes(m, 100, 32, true));
  CHECK(host::block_steps(100, 32) == 16);
  CHECK(host::block_steps(100, 1) == 100);
  CHECK(host::block_steps(7, 3) == 7);
  CHECK(host::block_steps(5, 1000) == 1);
  // The input, the output's seed and the input's gradient are the caller's arrays on the CPU;
  // the seed reads a row of zeros when none is passed.
  int callers = 0, inputs = 0;
  for (size_t k = 0; k < m.buffers.size(); ++k)
    if (m.buffers[k].caller) {
      ++callers;
      inputs += m.buffers[k].input >= 0 && !m.buffers[k].backward;
      CHECK(m.buffers[k].shares < 0);
      CHECK(m.buffers[k].rowsPerStep() == 1); // CUDA keeps it
    }
  CHECK(callers == 3);
  CHECK(inputs == 1);
  CHECK(m.zeroRowElements == 128);
  CHECK(m.callerBytesPerStep == 4 * (64 + 128 + 64));
  // Not with 16-bit storage: the stages stay in their places.
  auto half = planned(test::kLstmSource, Backward::All, TimeParallelMode::Auto, {}, DType::BF16);
  for (int l : half->m().blockLoop) CHECK(l == -1);
  for (const WorkspaceBuffer &b : half->m().buffers) CHECK_FALSE((b.block || b.caller));
}

TEST_CASE("plan-memory: the CPU and CUDA each get their own sharing, and the CPU keeps the blocks that pay",
          "[passes][memory]") {
  // The layer-norm LSTM: with its stages in blocks at their loops the CPU shares differently
  // from CUDA (every stage in its place), whose workspace stays what it is without blocks.
  std::ifstream file(std::string(RNNC_SAMPLES_DIR) + "/layernorm_lstm.rnn");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  REQUIRE(!text.empty());
  auto r = planned(text, Backward::All);
  auto half = planned(text, Backward::All, TimeParallelMode::Auto, {}, DType::BF16); // no blocks: one sharing
  const MemoryPlan &m = r->m();
  CHECK(m.blockBytesPerStep > 0);
  CHECK(std::any_of(m.buffers.begin(), m.buffers.end(), [](const WorkspaceBuffer &b) { return b.cpuShares != b.shares; }));
  for (const WorkspaceBuffer &b : half->m().buffers) CHECK(b.cpuShares == b.shares);
  CHECK(half->m().cpuBytesPerStep == half->m().bytesPerStep);
  // The blocks pay at 4 blocks' rows (2048): what the CPU keeps for all T, plus a block, is less
  // than CUDA's every step there.
  const int64_t rows = 4 * MemoryPlan::kBlockRows;
  const int64_t cpu = (m.cpuBytesPerStep - m.blockBytesPerStep - m.callerBytesPerStep) * rows +
                      m.blockBytesPerStep * MemoryPlan::kBlockRows;
  CHECK(cpu < (m.bytesPerStep - m.callerBytesPerStep) * rows);
  // And workspaceBytes counts each target's owners: the CPU's less at T·B = 3200.
  CHECK(workspaceBytes(m, 100, 32, false) < workspaceBytes(m, 100, 32, true));
}

TEST_CASE("plan-memory: an input read a step back or by a scan stays in the workspace", "[passes][memory]") {
  auto inputCallers = [](const MemoryPlan &m) {
    int n = 0;
    for (const WorkspaceBuffer &b : m.buffers) n += b.caller && b.input >= 0 && !b.backward;
    return n;
  };
  // x[t-1] reads the padding's row before the first step: the workspace's copy has it.
  auto delayed = planned("dim H = 4\ncell C(x: [H]) -> h {\n  param W: [H, H]\n  h = tanh(W @ x[t-1] + h[t-1])\n}\n",
                         Backward::All);
  CHECK(inputCallers(delayed->m()) == 0);
  // A scan reads it by chunks (docs/passes.md, the scans): a copy too.
  auto scanned = planned("dim H = 4\ncell C(x: [H]) -> h {\n  h = 0.5 * h[t-1] + x\n}\n", Backward::All,
                         TimeParallelMode::Scan);
  CHECK(inputCallers(scanned->m()) == 0);
  auto plain = planned(test::kLstmSource, Backward::All);
  CHECK(inputCallers(plain->m()) == 1);
}

TEST_CASE("plan-memory: the products with a weight get its panels, forward's and backward's shared",
          "[passes][memory]") {
  auto r = planned(test::kLstmSource, Backward::All); // W_ih [512 x 64], W_hh [512 x 128]
  codegen::Program p;
  std::string error;
  REQUIRE(codegen::buildProgram(r->c, p, error));
  // Forward packs W_ih^T and W_hh^T, backward W_hh and W_ih (columns 128 and 64: whole panels of 16).
  CHECK(r->m().panelElements == 512 * 64 + 512 * 128);
  std::map<bool, std::map<int64_t, int>> offsets; // direction -> offset -> products
  for (const codegen::StageIR &s : p.stages)
    for (int k : s.kernels) {
      const codegen::KernelIR &kernel = p.kernels[k];
      const bool product = kernel.kind == codegen::KernelIR::Kind::Gemm || kernel.kind == codegen::KernelIR::Kind::GemmT;
      if (!product) {
        CHECK(kernel.panelOffset == -1); // the weight gradients are OpenBLAS's
        continue;
      }
      REQUIRE(kernel.panelOffset >= 0);
      ++offsets[s.backward][kernel.panelOffset];
    }
  // The hoisted product comes first forward (W_ih at 0), the loop's first backward (W_hh at 0).
  CHECK(offsets[false] == std::map<int64_t, int>{{0, 1}, {512 * 64, 1}});
  CHECK(offsets[true] == std::map<int64_t, int>{{0, 1}, {128 * 512, 1}});
  // A width that is not whole panels rounds up: W_hh [3 x 5] takes one panel of 16 columns.
  auto small = planned("dim H = 5\ncell Tiny(x: [H]) -> h {\n  param W: [3, H]\n  param U: [H, 3]\n"
                       "  h = tanh(x + U @ (W @ h[t-1]))\n}\n",
                       Backward::None);
  CHECK(small->m().panelElements == 16 * 5 + 16 * 3);
}

TEST_CASE("concat in place: the LSTM backward's gate gradients go straight into the buffer dW reads", "[codegen][memory]") {
  auto r = planned(test::kLstmSource, Backward::All);
  r->c.optimize = false; // buildProgram leaves the copying sweep (-O0's program)
  codegen::Program p;
  std::string error;
  REQUIRE(codegen::buildProgram(r->c, p, error));
  auto sweeps = [&] {
    size_t n = 0;
    for (const codegen::KernelIR &k : p.kernels) n += k.sweeps.size();
    return n;
  };
  const size_t before = sweeps();
  const int removed = codegen::storeConcatPiecesInPlace(p);
  CHECK(removed == 1); // the one concat of the four gate gradients
  CHECK(sweeps() == before - static_cast<size_t>(removed));
  CHECK(codegen::storeConcatPiecesInPlace(p) == 0); // nothing left to store in place
  for (const codegen::KernelIR &k : p.kernels)
    for (const codegen::Sweep &s : k.sweeps)
      for (const codegen::Instr &in : s.body) CHECK(in.op != Op::Concat);
}
