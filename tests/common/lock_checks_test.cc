// ApplyLockChecks: MIXNET_LOCK_CHECKS=0 turns abseil's lock-order checks off
// for the process, 1 leaves them as abseil was built. Each case runs in a
// fresh process (threadsafe death tests re-execute the binary), so the
// setting is read from the environment the case sets.
#include "runtime/common/lock_checks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace mixnet {
namespace {

// Takes two locks in both orders: a potential deadlock.
void InvertLockOrder() {
  absl::Mutex a, b;
  a.Lock();
  b.Lock();
  b.Unlock();
  a.Unlock();
  b.Lock();
  a.Lock();
  a.Unlock();
  b.Unlock();
}

// Whether this abseil build checks lock order at all (Debian's does: it is
// built without NDEBUG). Probed in a child so an abort does not end the test.
bool AbseilChecksLockOrder() {
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    std::freopen("/dev/null", "w", stderr);
    InvertLockOrder();
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(LockChecksDeathTest, OffLetsAnInversionPass) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        setenv("MIXNET_LOCK_CHECKS", "0", 1);
        ApplyLockChecks();
        InvertLockOrder();
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

TEST(LockChecksDeathTest, OnReportsAnInversion) {
  if (!AbseilChecksLockOrder()) GTEST_SKIP() << "this abseil build has no lock-order checks";
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        setenv("MIXNET_LOCK_CHECKS", "1", 1);
        ApplyLockChecks();
        InvertLockOrder();
      },
      "deadlock");
}

}  // namespace
}  // namespace mixnet
