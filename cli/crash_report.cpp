#include "cli/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace sublet::cli {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
constexpr int kMaxFrames = 64;

void write_text(const char* text) { [[maybe_unused]] const auto ignored = write(STDERR_FILENO, text, std::strlen(text)); }

// Only async-signal-safe calls: write, backtrace (its library loaded before any crash), the
// symbol-free backtrace_symbols_fd, then the same signal again under its default action.
void report(int signal) {
  write_text("\nsublet: fatal signal ");
  write_text(signal == SIGSEGV ? "SIGSEGV (segmentation fault)" : signal == SIGBUS ? "SIGBUS (bus error)"
             : signal == SIGILL ? "SIGILL (illegal instruction)" : "SIGFPE (arithmetic trap)");
  write_text("; return addresses, innermost first (addr2line -f -C -e <unstripped sublet of this build> ADDRESS):\n");
  void* frames[kMaxFrames];
  backtrace_symbols_fd(frames, backtrace(frames, kMaxFrames), STDERR_FILENO);
  raise(signal);  // SA_RESETHAND restored the default action: the process dies of the signal
}

}  // namespace

void install_crash_report() {
  void* warm_up[1];
  backtrace(warm_up, 1);  // loads libgcc's unwinder now, not inside the handler
  // Its own stack, so that a stack overflow is reported too.
  static char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = report;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (const int signal : kSignals) sigaction(signal, &action, nullptr);
}

}  // namespace sublet::cli
