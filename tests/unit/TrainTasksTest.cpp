// The training tasks (rnnc/tasks.h): how each binds to a model's ports and
// says what is missing, the data each makes (adding targets, copy layout,
// text vocabulary, entropy and streams), and that the data depends only on
// the seed and the RNG state saved as text.
#include "rnnc/tasks.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

using namespace rnnc::rt;
namespace fs = std::filesystem;

namespace {

rnnc_tensor port(const char *name, int64_t width, bool index = false) {
  rnnc_tensor t{};
  t.name = name;
  t.rank = 1;
  t.shape[0] = width;
  t.is_index = index ? 1 : 0;
  return t;
}

/// A model with only ports: enough for binding and data.
struct Ports {
  std::vector<rnnc_tensor> inputs, outputs;
  rnnc_model m{};
  Ports(std::vector<rnnc_tensor> in, std::vector<rnnc_tensor> out) : inputs(std::move(in)), outputs(std::move(out)) {
    m.abi_version = RNNC_ABI_VERSION;
    m.name = "M";
    m.source_hash = "h";
    m.real_bytes = 4;
    m.n_inputs = static_cast<int32_t>(inputs.size());
    m.inputs = inputs.data();
    m.n_outputs = static_cast<int32_t>(outputs.size());
    m.outputs = outputs.data();
    m.has_loss = 1;
  }
};

Ports addingPorts() { return Ports({port("x", 2), port("y", 1)}, {port("out", 1)}); }
Ports indexPorts(int64_t range, int64_t logits) {
  return Ports({port("tok", range, true), port("target", range, true)}, {port("logits", logits)});
}

std::string taskError(const std::string &spec, const rnnc_model &m, int64_t T = 30, int64_t B = 2) {
  std::string error;
  CHECK_FALSE(makeTask(spec, m, T, B, 0, error));
  CHECK(error.find('\n') == std::string::npos);
  return error;
}

std::string tempFile(const std::string &bytes) {
  static std::atomic<int> counter{0};
  fs::path p = fs::temp_directory_path() / ("rnnc-task-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

}  // namespace

TEST_CASE("train: adding binds two dense inputs and a width-1 output, or says what is missing", "[train]") {
  std::string error;
  Ports ok = addingPorts();
  CHECK(makeTask("adding", ok.m, 10, 4, 1, error));

  Ports noPair({port("y", 1)}, {port("out", 1)});
  CHECK(taskError("adding", noPair.m) == "task adding needs a dense input of width 2 (value, marker); model 'M' has none left");
  Ports noTarget({port("x", 2)}, {port("out", 1)});
  CHECK(taskError("adding", noTarget.m) == "task adding needs a dense input of width 1 (the target); model 'M' has none left");
  Ports extra({port("x", 2), port("y", 1), port("z", 3)}, {port("out", 1)});
  CHECK(taskError("adding", extra.m) == "model 'M' has an input 'z' that task adding does not feed");
  Ports wide({port("x", 2), port("y", 1)}, {port("out", 3)});
  CHECK(taskError("adding", wide.m) == "task adding needs an output of width 1 as output 0; model 'M' has 'out' of width 3");
  Ports none({port("x", 2), port("y", 1)}, {});
  CHECK(taskError("adding", none.m) == "task adding needs an output of width 1 as output 0; model 'M' has no output");
  Ports index({port("x", 2, true), port("y", 1)}, {port("out", 1)});
  CHECK_THAT(taskError("adding", index.m), Catch::Contains("needs a dense input of width 2"));
  CHECK(taskError("adding", ok.m, 1) == "task adding needs at least 2 steps (one marker in each half), not 1");
  CHECK(taskError("sorting", ok.m) == "unknown task 'sorting' (expected adding, copy or text:PATH)");
  CHECK(taskError("adding", ok.m, 10, 0) == "the batch and the BPTT length must be positive, not 0 and 10");
}

TEST_CASE("train: adding marks one step in each half and sums the marked values", "[train]") {
  Ports p = addingPorts();
  const int64_t T = 9, B = 50;
  std::string error;
  auto task = makeTask("adding", p.m, T, B, 7, error);
  REQUIRE(task);
  CHECK(task->metricName() == "mse");
  CHECK_FALSE(task->carriesState());
  Segment s;
  task->next(s);
  REQUIRE(s.pointers.size() == 2);
  const std::vector<float> &x = s.dense[0], &y = s.dense[1];
  REQUIRE(x.size() == static_cast<size_t>(T * B * 2));
  REQUIRE(y.size() == static_cast<size_t>(T * B));
  std::vector<float> last(B);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> marks;
    float sum = 0;
    for (int64_t t = 0; t < T; ++t) {
      const float value = x[(t * B + b) * 2], marker = x[(t * B + b) * 2 + 1];
      CHECK((value >= 0.0f && value < 1.0f));
      CHECK((marker == 0.0f || marker == 1.0f));
      if (marker == 1.0f) {
        marks.push_back(t);
        sum += value;
      }
      CHECK(y[t * B + b] == sum);  // dense: the marked values seen so far
    }
    REQUIRE(marks.size() == 2);
    CHECK(marks[0] < T / 2);
    CHECK(marks[1] >= T / 2);
    last[b] = sum;
  }
  // The metric is the MSE at the last step against the classic target.
  std::vector<float> out(T * B, 0.0f);
  for (int64_t b = 0; b < B; ++b) out[(T - 1) * B + b] = last[b];
  CHECK(task->metric(out.data(), 0) == 0.0);
  for (int64_t b = 0; b < B; ++b) out[(T - 1) * B + b] = last[b] + 0.5f;
  CHECK(task->metric(out.data(), 0) == Approx(0.25));
}

TEST_CASE("train: predicting the mean on adding scores about 0.17", "[train]") {
  Ports p = addingPorts();
  std::string error;
  auto task = makeTask("adding", p.m, 20, 4000, 3, error);
  REQUIRE(task);
  Segment s;
  task->next(s);
  std::vector<float> out(20 * 4000, 1.0f);
  CHECK(task->metric(out.data(), 0) == Approx(1.0 / 6).margin(0.01));
}

TEST_CASE("train: task data depends only on the seed and the saved RNG state", "[train]") {
  Ports p = addingPorts();
  std::string error;
  auto a = makeTask("adding", p.m, 6, 3, 42, error), b = makeTask("adding", p.m, 6, 3, 42, error),
       c = makeTask("adding", p.m, 6, 3, 43, error);
  Segment sa, sb, sc;
  a->next(sa);
  b->next(sb);
  c->next(sc);
  CHECK(sa.dense == sb.dense);
  CHECK(sa.dense != sc.dense);

  const std::string saved = a->rngState();
  a->next(sa);
  REQUIRE(c->setRngState(saved));
  c->next(sc);
  CHECK(sa.dense == sc.dense);
  CHECK_FALSE(c->setRngState("not a state"));
  CHECK_FALSE(c->setRngState(saved + " 17"));
}

TEST_CASE("train: copy lays out symbols, delimiter and answers", "[train]") {
  Ports p = indexPorts(10, 10);
  const int64_t T = 25, B = 6;
  std::string error;
  auto task = makeTask("copy", p.m, T, B, 5, error);
  REQUIRE(task);
  CHECK(task->metricName() == "accuracy");
  Segment s;
  task->next(s);
  const std::vector<int32_t> &x = s.index[0], &y = s.index[1];
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int32_t tok = x[t * B + b], tgt = y[t * B + b];
      if (t < 10) CHECK((tok >= 1 && tok <= 8));
      else if (t == T - 11) CHECK(tok == 9);
      else CHECK(tok == 0);
      if (t < T - 10) CHECK(tgt == 0);
      else CHECK(tgt == x[(t - (T - 10)) * B + b]);
    }
  }
  // Logits that pick each answer score 1; all-blank answers score 0.
  std::vector<float> logits(T * B * 10, 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) logits[(t * B + b) * 10 + y[t * B + b]] = 1.0f;
  CHECK(task->metric(logits.data(), 0) == 1.0);
  std::fill(logits.begin(), logits.end(), 0.0f);
  for (int64_t i = 0; i < T * B; ++i) logits[i * 10] = 1.0f;
  CHECK(task->metric(logits.data(), 0) == 0.0);
}

TEST_CASE("train: copy needs 21 steps and index ports of range 10", "[train]") {
  Ports ok = indexPorts(10, 10);
  CHECK(taskError("copy", ok.m, 20) ==
        "task copy needs at least 21 steps (10 symbols, the delimiter, 10 answers), not 20");
  Ports narrow = indexPorts(9, 10);
  CHECK(taskError("copy", narrow.m) == "task copy needs an index input of range at least 10 (tokens); model 'M' has none left");
  Ports one({port("tok", 10, true)}, {port("logits", 10)});
  CHECK(taskError("copy", one.m) ==
        "task copy needs a second index input of range at least 10 (targets); model 'M' has none left");
  Ports small = indexPorts(10, 8);
  CHECK(taskError("copy", small.m) ==
        "task copy needs logits of width at least 10 as output 0; model 'M' has 'logits' of width 8");
}

TEST_CASE("train: text builds its vocabulary, entropy and B streams", "[train]") {
  // "abacabad" twice: a 8/16, b 4/16, c 2/16, d 2/16 → 1.75 bits.
  const std::string path = tempFile("abacabadabacabad");
  Ports p = indexPorts(4, 4);
  std::string error;
  auto task = makeTask("text:" + path, p.m, 3, 2, 0, error);
  REQUIRE(task);
  CHECK(task->spec() == "text:" + path);
  CHECK(task->metricName() == "bpc");
  CHECK(task->carriesState());
  CHECK(task->vocabulary() == 4);
  CHECK(task->unigramBits() == Approx(1.75));
  CHECK(task->metric(nullptr, std::log(2.0) * 3) == Approx(3.0));

  // Two streams of 8 bytes: "abacabad" each; ranks a0 b1 c2 d3.
  Segment s;
  task->next(s);
  CHECK_FALSE(task->wrapped());
  CHECK(s.index[0] == std::vector<int32_t>{0, 0, 1, 1, 0, 0});  // t-major: a a, b b, a a
  CHECK(s.index[1] == std::vector<int32_t>{1, 1, 0, 0, 2, 2});  // the next bytes
  CHECK(task->position() == 3);
  task->next(s);  // bytes 3..5 → "cab", targets "aba"
  CHECK(s.index[0] == std::vector<int32_t>{2, 2, 0, 0, 1, 1});
  CHECK_FALSE(task->wrapped());
  task->next(s);  // 6 + 3 + 1 > 8: start over
  CHECK(task->wrapped());
  CHECK(s.index[0] == std::vector<int32_t>{0, 0, 1, 1, 0, 0});
  CHECK(task->position() == 3);

  REQUIRE(task->setPosition(6, error));
  std::string bad;
  CHECK_FALSE(task->setPosition(9, bad));
  CHECK(bad == "data position 9 is outside the streams of 8 bytes of " + path);
  fs::remove(path);
}

TEST_CASE("train: text refuses short, empty or unreadable files and narrow ports", "[train]") {
  const std::string path = tempFile("abacabadabacabad");
  Ports narrow = indexPorts(3, 4);
  CHECK(taskError("text:" + path, narrow.m, 3) ==
        "task text: the index input 'tok' (tokens) has range 3, the vocabulary of " + path + " has 4 symbols");
  Ports narrowLogits = indexPorts(4, 3);
  CHECK(taskError("text:" + path, narrowLogits.m, 3) ==
        "task text needs logits of width at least the vocabulary size 4 as output 0; model 'M' has 'logits' of width 3");
  Ports ok = indexPorts(4, 4);
  CHECK(taskError("text:" + path, ok.m, 8, 2) == path + ": the file is 16 bytes; 2 streams of 8+1 bytes need at least 18");
  const std::string empty = tempFile("");
  CHECK(taskError("text:" + empty, ok.m) == empty + ": the file is empty");
  CHECK(taskError("text:" + fs::temp_directory_path().string(), ok.m) ==
        fs::temp_directory_path().string() + ": is a directory, not a file");
  CHECK_THAT(taskError("text:/nonexistent/rnnc.txt", ok.m), Catch::StartsWith("/nonexistent/rnnc.txt: cannot open"));
  CHECK(taskError("text:", ok.m) == "task text needs a file: text:PATH");
  fs::remove(path);
  fs::remove(empty);
}

TEST_CASE("train: a run that evaluates holds out text's tail and draws adding and copy apart", "[train]") {
  CHECK(heldOutBytes(1000, 3, 2) == 100);  // the last 10%
  CHECK(heldOutBytes(1001, 3, 2) == 101);  // rounded up
  CHECK(heldOutBytes(40, 3, 2) == 8);      // at least one segment per stream: B * (T + 1)

  // 40 bytes, T = 3, B = 2: the last 8 held out ("efghefgh"); training reads the 32 before.
  const std::string path = tempFile("abcdabcdabcdabcdabcdabcdabcdabcdefghefgh");
  Ports p = indexPorts(8, 8);
  std::string error;
  auto training = makeTask("text:" + path, p.m, 3, 2, 0, error, 0, TaskData::Training);
  auto heldOut = makeTask("text:" + path, p.m, 3, 2, 0, error, 0, TaskData::HeldOut);
  REQUIRE(training);
  REQUIRE(heldOut);
  CHECK(training->spec() == "text:" + path + " (tail held out)");
  CHECK(training->heldOut() == 8);
  CHECK(training->vocabulary() == 8);  // the whole file's, in both
  CHECK(heldOut->vocabulary() == 8);
  Segment s;
  heldOut->next(s);  // streams "efgh" and "efgh": e f g, targets f g h
  CHECK(s.index[0] == std::vector<int32_t>{4, 4, 5, 5, 6, 6});
  CHECK(s.index[1] == std::vector<int32_t>{5, 5, 6, 6, 7, 7});
  heldOut->next(s);  // 4 bytes per stream hold one segment: it starts over
  CHECK(heldOut->wrapped());
  std::string bad;
  CHECK_FALSE(training->setPosition(17, bad));  // streams of 16 bytes
  CHECK(bad == "data position 17 is outside the streams of 16 bytes of " + path);
  for (int k = 0; k < 20; ++k) {
    training->next(s);
    CHECK(*std::max_element(s.index[1].begin(), s.index[1].end()) <= 3);  // never a held-out byte
  }

  // Too short for both: 16 bytes, B = 2, T = 4 need 2 x (2 x 5) = 20.
  const std::string shortText = tempFile("abacabadabacabad");
  CHECK_FALSE(makeTask("text:" + shortText, p.m, 4, 2, 0, error, 0, TaskData::Training));
  CHECK(error == shortText + ": the file is 16 bytes, too short to hold out a part for evaluation: 2 streams of 4+1 "
                             "bytes for training and as many held out need at least 20 (--eval-batches 0: no "
                             "evaluation, all of it trains)");

  // Adding and copy: the held-out stream is another stream, the training's is the plain one.
  Ports a = addingPorts();
  auto plain = makeTask("adding", a.m, 8, 4, 5, error);
  auto train = makeTask("adding", a.m, 8, 4, 5, error, 0, TaskData::Training);
  auto eval = makeTask("adding", a.m, 8, 4, 5, error, 0, TaskData::HeldOut);
  Segment x, y, z;
  plain->next(x);
  train->next(y);
  eval->next(z);
  CHECK(x.dense[0] == y.dense[0]);
  CHECK(x.dense[0] != z.dense[0]);
  CHECK(heldOutSeed(5) != 5);
  CHECK(heldOutSeed(5) != heldOutSeed(6));
  fs::remove(path);
  fs::remove(shortText);
}
