// CPU affinity helpers: CPU lists, the allowed set, pinning a thread.
#include "runtime/common/cpu_affinity.h"

#include <sched.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace mixnet {
namespace {

TEST(ParseCpuList, SinglesRangesAndOrder) {
  auto cpus = ParseCpuList("3, 0,8-10");
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_EQ(*cpus, (std::vector<int>{3, 0, 8, 9, 10}));
}

TEST(ParseCpuList, BadElementsAreNamed) {
  for (const char* bad : {"", "x", "1,,2", "5-3", "-1", "2-", "0-99999"}) {
    auto cpus = ParseCpuList(bad);
    ASSERT_FALSE(cpus.ok()) << "'" << bad << "'";
    EXPECT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(cpus.status().message().find("bad CPU list element"), std::string::npos)
        << cpus.status();
  }
}

TEST(AllowedCpus, IncludesTheCpuWeRunOn) {
  auto cpus = AllowedCpus();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  ASSERT_FALSE(cpus->empty());
  const int here = sched_getcpu();
  ASSERT_GE(here, 0);
  EXPECT_NE(std::find(cpus->begin(), cpus->end(), here), cpus->end());
}

TEST(PinThread, PinsAndReadsBack) {
  auto allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  const int target = allowed->back();
  std::atomic<bool> pinned{false};
  std::atomic<int> ran_on{-1};
  std::thread t([&] {
    while (!pinned.load()) std::this_thread::yield();
    std::this_thread::yield();  // the next time slice is on the new CPU
    ran_on.store(sched_getcpu());
  });
  absl::Status s = PinThread(t, target, "test thread");
  pinned.store(true);
  ASSERT_TRUE(s.ok()) << s;
  auto cpus = ThreadCpus(t);
  t.join();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_EQ(*cpus, std::vector<int>{target});
  EXPECT_EQ(ran_on.load(), target);
}

TEST(PinThread, ErrorsNameTheThreadAndCpu) {
  std::thread idle;  // not running
  absl::Status s = PinThread(idle, 0, "the idle thread");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("the idle thread"), std::string::npos) << s;
  EXPECT_FALSE(ThreadCpus(idle).ok());

  std::thread t([] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
  s = PinThread(t, CPU_SETSIZE - 1, "the worker");  // no machine here has it
  t.join();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the worker"), std::string::npos) << s;
  EXPECT_NE(s.message().find(std::to_string(CPU_SETSIZE - 1)), std::string::npos) << s;
  EXPECT_NE(s.message().find("pthread_setaffinity_np"), std::string::npos) << s;
}

}  // namespace
}  // namespace mixnet
