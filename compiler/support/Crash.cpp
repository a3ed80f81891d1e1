#include "support/Crash.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace rnnc {

namespace {
bool abortOnError = false;
} // namespace

void abortOnInternalError() { abortOnError = true; }

void internalError(const char *file, int line, const std::string &what) {
  std::fflush(stdout);
  std::fprintf(stderr, "rnnc: internal compiler error: %s (at %s:%d)\n", what.c_str(), file, line);
  std::fprintf(stderr, "rnnc: this is a bug in rnnc; please report it with the input that caused it\n");
  if (abortOnError) std::abort();
  std::_Exit(kExitInternal);
}

namespace {

void onFatalSignal(int sig) {
  // Only async-signal-safe calls here.
  const char *name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE"
                   : sig == SIGILL ? "SIGILL" : "SIGABRT";
  const char prefix[] = "rnnc: internal compiler error: crashed with ";
  const char suffix[] = "\nrnnc: this is a bug in rnnc; please report it with the input that caused it\n";
  ssize_t ignored = ::write(STDERR_FILENO, prefix, sizeof prefix - 1);
  ignored = ::write(STDERR_FILENO, name, std::strlen(name));
  ignored = ::write(STDERR_FILENO, suffix, sizeof suffix - 1);
  (void)ignored;
  _exit(kExitInternal);
}

} // namespace

void installCrashHandlers() {
  // The handler runs on its own stack so a stack overflow is reported too.
  static char altStack[1 << 16];
  stack_t ss{};
  ss.ss_sp = altStack;
  ss.ss_size = sizeof altStack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = onFatalSignal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

} // namespace rnnc
