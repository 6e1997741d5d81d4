// Tests for runtime/common/status: errno texts (from any thread) and the
// errno -> absl::Status mapping with its message.
#include "runtime/common/status.h"

#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace mixnet {
namespace {

TEST(ErrnoText, KnownAndUnknownValues) {
  EXPECT_EQ(ErrnoText(ECONNREFUSED), "Connection refused");
  EXPECT_EQ(ErrnoText(0), "Success");
  const std::string unknown = ErrnoText(4242);
  EXPECT_TRUE(absl::StrContains(unknown, "4242")) << unknown;
}

// Unknown values are formatted per call: threads asking for different ones
// at once each get their own number back (a shared buffer would mix them).
TEST(ErrnoText, EachThreadGetsItsOwnText) {
  constexpr int kThreads = 8;
  constexpr int kCalls = 20000;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &wrong] {
      const std::string number = absl::StrCat(100000 + t);
      for (int i = 0; i < kCalls; ++i) {
        if (!absl::StrContains(ErrnoText(100000 + t), number)) ++wrong[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST(ErrnoStatus, CodeFollowsErrnoAndMessageNamesEverything) {
  const absl::Status reset = ErrnoStatus("lost connection to rank 3", "recv", ECONNRESET);
  EXPECT_EQ(reset.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(reset.message(),
            "lost connection to rank 3: recv failed: Connection reset by peer (errno 104)");
  EXPECT_EQ(ErrnoStatus("x", "connect", ETIMEDOUT).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ErrnoStatus("x", "bind", EADDRNOTAVAIL).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoStatus("x", "open", ENOENT).code(), absl::StatusCode::kNotFound);
}

TEST(ErrnoStatus, DefaultsToTheCurrentErrno) {
  errno = EPIPE;
  const absl::Status s = ErrnoStatus("send to rank 1", "sendmsg");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(s.message(), "(errno 32)")) << s;
}

TEST(Annotate, KeepsTheCodeAndPrependsContext) {
  const absl::Status s = Annotate(absl::NotFoundError("no host h9"), "spec.yaml");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "spec.yaml")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "no host h9")) << s;
  EXPECT_TRUE(Annotate(absl::OkStatus(), "ctx").ok());
}

}  // namespace
}  // namespace mixnet
