// main() of every GoogleTest binary of the suite (linked by mixnet_add_test,
// cmake/MixnetTest.cmake), in place of gtest_main. It runs the tests as
// gtest_main does and changes one thing: when every selected test case of the
// binary skipped (GTEST_SKIP) and none failed, it prints each skip reason on a
// line "MIXNET_SKIPPED: <reason>" and exits with kMixnetSkipExitCode, which
// ctest reports as "Skipped" (SKIP_RETURN_CODE). A binary in which some cases
// ran and others skipped keeps exit code 0 ("Passed": its other cases ran) and
// lists the skipped cases on "MIXNET_PARTLY_SKIPPED" lines. A run that
// selects no case at all fails. Runs on the main thread.
#include <cstdio>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace {

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
