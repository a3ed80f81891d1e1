// Training progress: on a terminal (stderr is a tty) one bar redrawn in
// place with step/N, steps/s, loss, the task's metric and the ETA; otherwise
// plain lines about every 10% of the steps and at the end:
//   step 100/1000  loss 0.1234  mse 0.0567  12.3 steps/s
// a line after each held-out evaluation:
//   eval step 100/1000  loss 0.1301  mse 0.0612
// and optionally a CSV log, one row per step:
//   step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric
// (loss and metric printed so they read back bit for bit; the eval cells
// empty on the rows of steps without an evaluation).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace rnnc::rt {

/// One held-out evaluation after step `step`: the loss and the task's metric,
/// each the mean over its segments.
struct Evaluation {
  int64_t step = 0;
  double loss = 0, metric = 0;
};

class Progress {
public:
  /// Reports steps first+1..total to `out` (a terminal or not, as `tty` says;
  /// null: nothing is shown, the log is still written).
  Progress(int64_t first, int64_t total, std::string metricName, std::FILE *out, bool tty);
  /// Opens the CSV log at `path`: a fresh file with its header, or, when
  /// `append` and the file is not empty, appended to (a resumed run) after
  /// dropping the rows past step `first` (a run killed after its last
  /// checkpoint logged steps the resumed run does again) and a torn last line.
  /// False with a one-line error when it cannot be written.
  bool openLog(const std::string &path, bool append, std::string &error);
  /// Writes what the log holds through to the file (before a checkpoint).
  void flushLog();
  /// After each step, with the evaluation that followed it if there was one.
  void update(int64_t step, double loss, double metric, double gradNorm, double lr,
              const Evaluation *evaluation = nullptr);
  /// After the last step: ends the bar's line.
  void finish();
  /// Seconds since construction.
  double seconds() const;

private:
  void progressLine(int64_t step, double loss, double metric, double now);
  void line(int64_t step, double loss, double metric);
  void evaluationLine(const Evaluation &e);
  int64_t first_, total_;
  std::string metric_;
  std::FILE *out_;
  bool tty_;
  std::ofstream log_;
  std::string logPath_;
  std::chrono::steady_clock::time_point start_;
  double lastDraw_ = -1;
  bool drawn_ = false;
};

/// True when `out` is a terminal.
bool isTerminal(std::FILE *out);

}  // namespace rnnc::rt
