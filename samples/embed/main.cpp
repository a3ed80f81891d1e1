// Trains the AddingLSTM bundle (compiled from adding_lstm.rnn at build time)
// on the adding problem with the runtime's task, Adam and clipping: the loop
// `rnnc train` runs, written out with the generated class. Exits 1 unless the
// mean loss of the last 25 steps is a quarter of the first, so CI can run it
// as a test.
#include "AddingLSTM.h"
#include "rnnc/optim.h"
#include "rnnc/tasks.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
  const int64_t T = 50, B = 32;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  AddingLSTMModel model(T, B);

  // Params as `rnnc init --seed 0` draws them: the bundle's param table says how.
  model.initParams(0);

  std::string error;
  auto task = rnnc::rt::makeTask("adding", model.model(), T, B, /*seed=*/0, error);
  auto adam = rnnc::rt::makeOptimizer("adam", AddingLSTMModel::kParamElements, 0.01, 0.9, error);
  if (!task || !adam) {
    std::fprintf(stderr, "train_adding: %s\n", error.c_str());
    return 1;
  }
  rnnc::rt::Segment segment;
  std::vector<float> pred(T * B);
  double first = 0, recent = 0; // the first loss; the sum of the last 25
  for (int step = 1; step <= steps; ++step) {
    task->next(segment);
    model.forward(segment.pointers.data());
    model.backward();
    model.step(*adam, /*clip=*/1.0);
    model.readOutput(AddingLSTMModel::kOutput_pred, pred.data());
    double loss = model.loss();
    if (step == 1) first = loss;
    if (step > steps - 25) recent += loss;
    if (step % 50 == 0 || step == 1)
      std::printf("step %4d  loss %.4f  mse at the last step %.4f\n", step, loss, task->metric(pred.data(), loss));
  }
  double last = recent / std::min(steps, 25);
  bool learned = std::isfinite(last) && last < first / 4;
  std::printf("loss %.4f -> %.4f (mean of the last 25 steps): %s\n", first, last, learned ? "learned" : "did not learn");
  return learned ? 0 : 1;
}
