// Runs Graphviz's `dot -Tsvg` for `rnnc show --html` as a child process: no
// shell, its own process group, bounded in time and in output. What it returns
// is the <svg> element alone, ready to be inlined in a page.
#include "driver/Graphviz.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace rnnc {

namespace {

constexpr int kDotSeconds = 60;                  // a graph Graphviz cannot lay out in this is refused
constexpr size_t kMaxSvgBytes = size_t(64) << 20;
constexpr size_t kMaxErrBytes = 4096;

/// $RNNC_DOT when set, else the first executable `dot` on $PATH; empty if none.
std::string findDot() {
  if (const char *env = std::getenv("RNNC_DOT"); env && *env) return env;
  const char *pathEnv = std::getenv("PATH");
  std::string path = pathEnv ? pathEnv : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= path.size();) {
    size_t end = std::min(path.find(':', start), path.size());
    std::string dir = end > start ? path.substr(start, end - start) : ".";
    std::string candidate = dir + "/dot";
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

/// File descriptors closed when it goes out of scope.
struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  void close(int &fd) {
    for (int &f : fds)
      if (f == fd) f = -1;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

/// SIGPIPE ignored while it lives (a filter that exits early must not kill rnnc).
struct IgnoreSigpipe {
  struct sigaction old {};
  IgnoreSigpipe() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old);
  }
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &old, nullptr); }
};

/// Moves what is readable on `fd` into `into` (at most `cap` bytes kept).
/// Returns false at end of file or on an error.
bool drain(int fd, std::string &into, size_t cap, bool &overflow) {
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  if (n == 0) return false;
  size_t room = into.size() < cap ? cap - into.size() : 0;
  into.append(buf, std::min(room, static_cast<size_t>(n)));
  if (static_cast<size_t>(n) > room) overflow = true;
  return true;
}

struct FilterResult {
  std::string out, err;
  bool timedOut = false, overflow = false;
  int status = 0;
};

/// Feeds `input` to `in` and collects `out` and `err` until both end. False on
/// the deadline, too much output or a failing poll (the caller kills the child).
bool exchange(Fds &fds, int &in, int &out, int &err, const std::string &input,
              std::chrono::steady_clock::time_point deadline, FilterResult &r) {
  size_t written = 0;
  if (input.empty()) fds.close(in);
  while (out >= 0 || err >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || r.overflow) {
      r.timedOut = !r.overflow;
      return false;
    }
    pollfd p[3] = {{in, POLLOUT, 0}, {out, POLLIN, 0}, {err, POLLIN, 0}};
    if (::poll(p, 3, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) return false;
    if (in >= 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::write(in, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) fds.close(in);
    }
    bool spare = false;
    if (out >= 0 && (p[1].revents & (POLLIN | POLLERR | POLLHUP)) && !drain(out, r.out, kMaxSvgBytes, r.overflow))
      fds.close(out);
    if (err >= 0 && (p[2].revents & (POLLIN | POLLERR | POLLHUP)) && !drain(err, r.err, kMaxErrBytes, spare))
      fds.close(err);
  }
  return true;
}

/// Waits for the child (its exit status in `r`), killing it at the deadline.
void reap(pid_t pid, std::chrono::steady_clock::time_point deadline, FilterResult &r) {
  for (;;) {
    pid_t done = ::waitpid(pid, &r.status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      r.timedOut = true;
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
      }
      return;
    }
    ::usleep(10000);
  }
}

/// Runs `argv` (argv[0] a path, no shell) with `input` on its stdin, collecting
/// stdout and stderr, for at most `seconds`. False with `error` if it cannot start.
bool runFilter(const std::vector<std::string> &argv, const std::string &input, int seconds, FilterResult &r,
               std::string &error) {
  int in[2], out[2], err[2];
  Fds fds;
  for (int *p : {in, out, err}) {
    if (::pipe2(p, O_CLOEXEC) != 0) {
      error = fmt::format("cannot make a pipe: {}", std::strerror(errno));
      return false;
    }
    fds.fds.insert(fds.fds.end(), {p[0], p[1]});
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<char *> args;
  for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  // Its own process group, so that a timeout kills whatever it started too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    error = fmt::format("cannot run '{}': {}", argv[0], std::strerror(rc));
    return false;
  }
  fds.close(in[0]);
  fds.close(out[1]);
  fds.close(err[1]);
  for (int fd : {in[1], out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  IgnoreSigpipe quiet;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool finished = exchange(fds, in[1], out[0], err[0], input, deadline, r);
  if (!finished) ::kill(-pid, SIGKILL);
  reap(pid, deadline, r);
  return true;
}

/// The first line of Graphviz's complaint, for a one-line error.
std::string firstLine(const std::string &text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.empty() ? "no message" : line;
}

} // namespace

bool graphSvg(const std::string &dotText, std::string &svg, std::string &error) {
  std::string dot = findDot();
  if (dot.empty()) {
    error = "--html draws the graph with Graphviz, and 'dot' is not on PATH (install graphviz, or set RNNC_DOT to "
            "the dot program)";
    return false;
  }
  FilterResult r;
  if (!runFilter({dot, "-Tsvg"}, dotText, kDotSeconds, r, error)) return false;
  if (r.timedOut) error = fmt::format("Graphviz ('{}') took more than {} s to draw the graph", dot, kDotSeconds);
  else if (r.overflow) error = fmt::format("Graphviz ('{}') wrote more than {} bytes of SVG", dot, kMaxSvgBytes);
  else if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
    error = fmt::format("Graphviz ('{}') failed to draw the graph: {}", dot, firstLine(r.err));
  if (!error.empty()) return false;
  // Inline SVG wants the element alone: no XML prolog, doctype or comments before it.
  size_t begin = r.out.find("<svg");
  size_t end = r.out.rfind("</svg>");
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    error = fmt::format("Graphviz ('{}') wrote no SVG", dot);
    return false;
  }
  svg = r.out.substr(begin, end + 6 - begin);
  return true;
}

} // namespace rnnc
