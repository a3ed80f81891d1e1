// The progress bar, plain progress lines and the CSV log (progress.h).
#include "rnnc/progress.h"

#include "io/Array.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <unistd.h>

namespace rnnc::rt {
namespace {

constexpr int kBarWidth = 24;
constexpr double kRedrawSeconds = 0.1;

std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

bool isTerminal(std::FILE *out) { return ::isatty(::fileno(out)) == 1; }

Progress::Progress(int64_t first, int64_t total, std::string metricName, std::FILE *out, bool tty)
    : first_(first), total_(total), metric_(std::move(metricName)), out_(out), tty_(tty),
      start_(std::chrono::steady_clock::now()) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

bool Progress::openLog(const std::string &path, bool append, std::string &error) {
  std::error_code ec;
  const bool resumeRows = append && std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) > 0;
  if (resumeRows) {
    // Keep the header and the rows of steps 1..first_, whole lines only.
    std::ifstream in(path);
    std::string kept, row;
    while (std::getline(in, row) && !in.eof()) {
      int64_t step = 0;
      auto [end, bad] = std::from_chars(row.data(), row.data() + row.size(), step);
      const bool isRow = bad == std::errc() && end != row.data() && *end == ',';
      if (isRow && step > first_) break;
      kept += row + "\n";
    }
    if (!io::writeFileAtomically(path, kept, error)) return false;
  }
  log_.open(path, resumeRows ? std::ios::app : std::ios::trunc);
  if (!log_) {
    error = fmt::format("{}: cannot write the log: {}", path, std::strerror(errno));
    return false;
  }
  logPath_ = path;
  if (!resumeRows) log_ << "step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric\n";
  return true;
}

void Progress::flushLog() {
  if (log_.is_open()) log_.flush();
}

void Progress::update(int64_t step, double loss, double metric, double gradNorm, double lr,
                      const Evaluation *evaluation) {
  const double now = seconds();
  if (log_.is_open())
    log_ << fmt::format("{},{},{},{},{},{:.3f},{}\n", step, loss, metric, gradNorm, lr, now,
                        evaluation ? fmt::format("{},{}", evaluation->loss, evaluation->metric) : ",");
  if (!out_) return;
  if (evaluation) lastDraw_ = -1;  // the bar shows this step before the evaluation's line
  progressLine(step, loss, metric, now);
  if (evaluation) evaluationLine(*evaluation);
}

void Progress::progressLine(int64_t step, double loss, double metric, double now) {
  const int64_t count = total_ - first_;
  if (tty_) {
    if (step != total_ && now - lastDraw_ < kRedrawSeconds) return;
    lastDraw_ = now;
    const double done = count > 0 ? static_cast<double>(step - first_) / static_cast<double>(count) : 1.0;
    const double rate = now > 0 ? static_cast<double>(step - first_) / now : 0.0;
    const int filled = static_cast<int>(done * kBarWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kBarWidth - filled), '.');
    fmt::print(out_, "\r[{}] {}/{}  {:.1f} steps/s  loss {:.4f}  {} {:.4f}  ETA {}\033[K", bar, step, total_, rate,
               loss, metric_, metric, rate > 0 ? duration(static_cast<double>(total_ - step) / rate) : "?");
    drawn_ = true;
    std::fflush(out_);
    return;
  }
  const int64_t every = std::max<int64_t>(1, (count + 9) / 10);
  if ((step - first_) % every == 0 || step == total_) line(step, loss, metric);
}

void Progress::line(int64_t step, double loss, double metric) {
  const double now = seconds();
  const double rate = now > 0 ? static_cast<double>(step - first_) / now : 0.0;
  fmt::print(out_, "step {}/{}  loss {:.4f}  {} {:.4f}  {:.1f} steps/s\n", step, total_, loss, metric_, metric, rate);
  std::fflush(out_);
}

void Progress::evaluationLine(const Evaluation &e) {
  if (tty_ && drawn_) { // the bar as it stands stays above the line; the next update draws a new one
    fmt::print(out_, "\n");
    drawn_ = false;
    lastDraw_ = -1;
  }
  fmt::print(out_, "eval step {}/{}  loss {:.4f}  {} {:.4f}\n", e.step, total_, e.loss, metric_, e.metric);
  std::fflush(out_);
}

void Progress::finish() {
  if (out_ && tty_ && drawn_) fmt::print(out_, "\n");
  if (log_.is_open()) log_.flush();
}

}  // namespace rnnc::rt
