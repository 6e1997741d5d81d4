// main() of every GoogleTest binary of the suite (linked by mixnet_add_test,
// cmake/MixnetTest.cmake), in place of gtest_main. It runs the tests as
// gtest_main does and changes one thing: when every selected test case of the
// binary skipped (GTEST_SKIP) and none failed, it prints each skip reason on a
// line "MIXNET_SKIPPED: <reason>" and exits with kMixnetSkipExitCode, which
// ctest reports as "Skipped" (SKIP_RETURN_CODE). A binary in which some cases
// ran and others skipped keeps exit code 0 ("Passed": its other cases ran) and
// lists the skipped cases on "MIXNET_PARTLY_SKIPPED" lines. A run that
// selects no case at all fails. Also: a crash (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL) of the binary or of a process it forked (the multi-rank tests'
// ranks) prints the pid, thread and symbolized stack before dying of the
// same signal, so a crash in CI says where it happened (not under ASan, which
// reports crashes itself). Runs on the main thread; the handler on the
// crashing one.
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "absl/debugging/symbolize.h"
#include "gtest/gtest.h"

namespace {

#if !defined(__SANITIZE_ADDRESS__)
#define MIXNET_CRASH_REPORT 1

void Say(const char* text) { (void)!write(STDERR_FILENO, text, strlen(text)); }

// Nearly only async-signal-safe work: glibc's backtrace (the unwinder reads
// the tables, no frame pointers needed; loaded at install, so it allocates
// nothing here) and absl's symbolizer (written for signal handlers);
// snprintf into a stack buffer is the exception crash reporters make.
void OnCrash(int sig, siginfo_t* info, void*) {
  const char* name = sig == SIGSEGV  ? "SIGSEGV"
                     : sig == SIGBUS ? "SIGBUS"
                     : sig == SIGFPE ? "SIGFPE"
                                     : "SIGILL";
  char line[600];
  snprintf(line, sizeof(line), "MIXNET: pid %d thread %ld caught %s (address %p); stack:\n",
           static_cast<int>(getpid()), static_cast<long>(syscall(SYS_gettid)), name,
           info != nullptr ? info->si_addr : nullptr);
  Say(line);
  void* frames[64];
  const int depth = backtrace(frames, 64);
  for (int i = 0; i < depth; ++i) {
    char symbol[400];
    if (!absl::Symbolize(frames[i], symbol, sizeof(symbol))) std::strcpy(symbol, "(unknown)");
    snprintf(line, sizeof(line), "MIXNET:   #%d %p %s\n", i, frames[i], symbol);
    Say(line);
  }
  // SA_RESETHAND restored the default action: the process dies of the
  // signal (a core where enabled; the parent's WTERMSIG).
  raise(sig);
}

void InstallCrashReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  void* warm[1];
  backtrace(warm, 1);              // loads the unwinder now, not in the handler
  static char alt_stack[1 << 16];  // the main thread's, for a stack overflow
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof(alt_stack);
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = OnCrash;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
}
#endif

// Also in cmake/MixnetTest.cmake (SKIP_RETURN_CODE) and tests/python.
constexpr int kMixnetSkipExitCode = 77;

// The first line of a skip message ("Skipped" alone when GTEST_SKIP() had no text).
std::string SkipReason(const testing::TestResult& r) {
  for (int i = 0; i < r.total_part_count(); ++i) {
    const testing::TestPartResult& p = r.GetTestPartResult(i);
    if (p.type() != testing::TestPartResult::kSkip) continue;
    std::string m = p.message();
    const size_t nl = m.find('\n');
    if (nl != std::string::npos) m.resize(nl);
    return m.empty() ? std::string("no reason given") : m;
  }
  return "no reason given";
}

}  // namespace

int main(int argc, char** argv) {
#ifdef MIXNET_CRASH_REPORT
  InstallCrashReport(argv[0]);
#endif
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const testing::UnitTest& u = *testing::UnitTest::GetInstance();
  if (rc == 0 && u.test_to_run_count() == 0 && !GTEST_FLAG_GET(list_tests)) {
    // A filter (e.g. a PARTS pattern of cmake/MixnetTest.cmake) that matches
    // nothing would otherwise pass without testing anything.
    std::printf("MIXNET: no test case matched the filter '%s'\n", GTEST_FLAG_GET(filter).c_str());
    return 1;
  }
  if (rc != 0 || u.skipped_test_count() == 0) return rc;

  // Each reason once, with how many cases gave it, and the cases that skipped.
  std::map<std::string, int> reasons;
  std::string skipped_cases;
  for (int s = 0; s < u.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *u.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& info = *suite.GetTestInfo(t);
      if (!info.should_run() || !info.result()->Skipped()) continue;
      ++reasons[SkipReason(*info.result())];
      skipped_cases += std::string(" ") + suite.name() + "." + info.name();
    }
  }
  // Skipped only when nothing ran: no case passed and the suite-level
  // set-up/tear-down (ad hoc results) added no failure (rc would be 1).
  const bool all_skipped = u.successful_test_count() == 0 && u.failed_test_count() == 0 &&
                           u.skipped_test_count() == u.test_to_run_count();
  for (const auto& [reason, count] : reasons) {
    std::printf("%s: %s (%d of %d cases)\n",
                all_skipped ? "MIXNET_SKIPPED" : "MIXNET_PARTLY_SKIPPED", reason.c_str(), count,
                u.test_to_run_count());
  }
  if (!all_skipped) std::printf("MIXNET_PARTLY_SKIPPED cases:%s\n", skipped_cases.c_str());
  std::fflush(stdout);
  return all_skipped ? kMixnetSkipExitCode : 0;
}
