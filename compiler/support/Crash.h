// Internal compiler errors: RNNC_ASSERT checks our own invariants (never the
// user's input) and, when one fails, prints "internal compiler error" and exits
// with kExitInternal, a code distinct from a user error's 1.
#pragma once

#include <string>

namespace rnnc {

constexpr int kExitOk = 0;
constexpr int kExitUserError = 1;
constexpr int kExitInternal = 70; // EX_SOFTWARE

[[noreturn]] void internalError(const char *file, int line, const std::string &what);

/// Makes internalError abort() after its message instead of exiting, so that a
/// fuzzer or a debugger records the failure and its stack (tests/fuzz).
void abortOnInternalError();

/// Installs handlers so that a crash (SIGSEGV, SIGABRT, ...) still prints
/// "internal compiler error" and exits with kExitInternal.
void installCrashHandlers();

} // namespace rnnc

#define RNNC_ASSERT(cond, msg)                                                        \
  do {                                                                                \
    if (!(cond)) ::rnnc::internalError(__FILE__, __LINE__, std::string(#cond ": ") + (msg)); \
  } while (0)

#define RNNC_UNREACHABLE(msg) ::rnnc::internalError(__FILE__, __LINE__, msg)
