// Tests of the rendezvous stores, parameterised over the store kind (file,
// tcp): set/get, waiting, timeouts, exact counters across threads and forked
// processes, large and binary values, prefixes and URLs. Ranks are threads or
// forked processes of this test binary.
#include "runtime/rendezvous/store.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rendezvous/test_util.h"

namespace mixnet::rendezvous {
namespace {

using testing::ForkChild;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::RemoveTree;
using testing::Stopwatch;
using testing::WaitChildren;

enum class Kind { kFile, kTcp };

std::string KindName(const ::testing::TestParamInfo<Kind>& info) {
  return info.param == Kind::kFile ? "file" : "tcp";
}

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    if (GetParam() == Kind::kTcp) {
      auto server = TcpStoreServer::Start("127.0.0.1", 0);
      ASSERT_TRUE(server.ok()) << server.status();
      server_ = std::move(*server);
    }
    auto store = NewStore();
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  void TearDown() override {
    store_.reset();
    server_.reset();
    testing::RemoveTree(dir_);
  }

  // A new, independent handle on the same store (another "rank").
  absl::StatusOr<std::unique_ptr<Store>> NewStore() {
    if (GetParam() == Kind::kFile) return CreateFileStore(dir_);
    return ConnectTcpStore("127.0.0.1", server_->port(), absl::Seconds(10));
  }

  // What a DeadlineExceeded message should name besides the key.
  std::string Where() const {
    return GetParam() == Kind::kFile ? dir_ : absl::StrCat("127.0.0.1:", server_->port());
  }

  std::string dir_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreTest, SetThenGet) {
  ASSERT_TRUE(store_->Set("rank0/addr", "10.0.0.1:1234").ok());
  auto v = store_->Get("rank0/addr", absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "10.0.0.1:1234");

  auto other = NewStore();
  ASSERT_TRUE(other.ok());
  v = (*other)->Get("rank0/addr", absl::ZeroDuration());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "10.0.0.1:1234");
}

TEST_P(StoreTest, SetOverwritesAndEmptyValueRoundTrips) {
  ASSERT_TRUE(store_->Set("k", "first").ok());
  ASSERT_TRUE(store_->Set("k", "").ok());
  auto v = store_->Get("k", absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "");
}

TEST_P(StoreTest, GetWaitsForLaterSetFromAnotherThread) {
  auto other = NewStore();
  ASSERT_TRUE(other.ok());
  // One writer uses its own handle, one shares the waiter's handle.
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(150));
    EXPECT_TRUE((*other)->Set("late", "value").ok());
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(store_->Set("late2", "value2").ok());
  });
  Stopwatch sw;
  auto v = store_->Get("late", absl::Seconds(10));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "value");
  EXPECT_GE(sw.Elapsed(), absl::Milliseconds(100));
  v = store_->Get("late2", absl::Seconds(10));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "value2");
  EXPECT_LT(sw.Elapsed(), absl::Seconds(5));
  writer.join();
}

TEST_P(StoreTest, ManyWaitersReleasedBySingleSet) {
  constexpr int kWaiters = 16;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      // Half share the fixture's handle, half have their own.
      std::unique_ptr<Store> own;
      Store* s = store_.get();
      if (i % 2 == 1) {
        auto st = NewStore();
        if (!st.ok()) return;
        own = std::move(*st);
        s = own.get();
      }
      auto v = s->Get("go", absl::Seconds(10));
      if (v.ok() && *v == "now") ok.fetch_add(1);
    });
  }
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(store_->Set("go", "now").ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kWaiters);
}

TEST_P(StoreTest, GetTimesOutQuicklyWithDeadlineExceeded) {
  Stopwatch sw;
  auto v = store_->Get("never/set", absl::Milliseconds(150));
  absl::Duration took = sw.Elapsed();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded) << v.status();
  EXPECT_THAT(v.status().message(), HasSubstr("never/set"));
  EXPECT_THAT(v.status().message(), HasSubstr(Where()));
  EXPECT_GE(took, absl::Milliseconds(140));
  EXPECT_LT(took, absl::Seconds(2));

  // Zero timeout: one look, no wait.
  sw = Stopwatch();
  v = store_->Get("never/set", absl::ZeroDuration());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(sw.Elapsed(), absl::Seconds(1));
  // The handle still works after a timeout.
  EXPECT_TRUE(store_->Set("after", "x").ok());
  EXPECT_TRUE(store_->Get("after", absl::ZeroDuration()).ok());
}

TEST_P(StoreTest, AddFromManyThreadsCountsExactly) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 100;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<Store> own;
      Store* s = store_.get();
      if (t % 2 == 1) {
        auto st = NewStore();
        if (!st.ok()) return;
        own = std::move(*st);
        s = own.get();
      }
      for (int i = 0; i < kAdds; ++i) {
        auto r = s->Add("counter", 1);
        if (!r.ok()) {
          ADD_FAILURE() << r.status();
          return;
        }
        seen[t].push_back(*r);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kThreads * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);  // every value handed out exactly once
  auto v = store_->Get("counter", absl::ZeroDuration());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, absl::StrCat(kThreads * kAdds));
}

TEST_P(StoreTest, AddFromForkedProcessesCountsExactly) {
  constexpr int kProcs = 4;
  constexpr int kAdds = 100;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pids.push_back(ForkChild([&]() -> int {
      auto s = NewStore();
      if (!s.ok()) return 2;
      int64_t last = 0;
      for (int i = 0; i < kAdds; ++i) {
        auto r = (*s)->Add("procs", 1);
        if (!r.ok() || *r <= last) return 3;
        last = *r;
      }
      return 0;
    }));
  }
  std::vector<int> codes = WaitChildren(pids, absl::Seconds(60));
  EXPECT_THAT(codes, ::testing::Each(0));
  auto total = store_->Add("procs", 0);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, kProcs * kAdds);
}

TEST_P(StoreTest, AddSemantics) {
  auto r = store_->Add("c", 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 5);
  r = store_->Add("c", -7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, -2);
  ASSERT_TRUE(store_->Set("not_a_number", "abc").ok());
  EXPECT_EQ(store_->Add("not_a_number", 1).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->Set("big", absl::StrCat(INT64_MAX)).ok());
  EXPECT_EQ(store_->Add("big", 1).status().code(), absl::StatusCode::kInvalidArgument);
  // An Add wakes a waiter like a Set.
  std::thread adder([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(store_->Add("ready", 3).ok());
  });
  auto v = store_->Get("ready", absl::Seconds(10));
  adder.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "3");
}

TEST_P(StoreTest, LargeValueRoundTrips) {
  std::string big(8 << 20, '\0');
  std::mt19937_64 rng(42);
  for (auto& c : big) c = static_cast<char>(rng());
  auto reader = NewStore();
  ASSERT_TRUE(reader.ok());
  std::string got;
  std::thread t([&] {
    auto v = (*reader)->Get("big", absl::Seconds(30));
    if (v.ok()) got = std::move(*v);
  });
  ASSERT_TRUE(store_->Set("big", big).ok());
  t.join();
  EXPECT_TRUE(got == big) << "size " << got.size();
  auto v = store_->Get("big", absl::Seconds(1));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(*v == big);
}

TEST_P(StoreTest, BinaryKeysAndValues) {
  std::string value;
  for (int i = 0; i < 1024; ++i) value.push_back(static_cast<char>(i % 256));
  const std::vector<std::string> keys = {std::string("a\0b", 3),
                                         std::string("a\0c", 3),
                                         "a",
                                         "A",
                                         "%41",
                                         ".",
                                         "..",
                                         "../x",
                                         "./x",
                                         "x/..",
                                         "/abs",
                                         "a b",
                                         "\xff\xfe",
                                         "a%2Fb",
                                         "a/b",
                                         ".lock",
                                         ".tmp.1.2"};
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(store_->Set(keys[i], absl::StrCat(i, value)).ok()) << i;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    auto v = store_->Get(keys[i], absl::Seconds(1));
    ASSERT_TRUE(v.ok()) << i << " " << v.status();
    EXPECT_TRUE(*v == absl::StrCat(i, value)) << "key #" << i;
  }
}

TEST_P(StoreTest, RejectsEmptyKeyAndOversizedInput) {
  EXPECT_EQ(store_->Set("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Get("", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Add("", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Set(std::string(kMaxKeyBytes + 1, 'k'), "v").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Set("k", std::string(kMaxValueBytes + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
  // The store still works.
  EXPECT_TRUE(store_->Set("k", "v").ok());
}

TEST_P(StoreTest, PrefixIsolation) {
  auto a = PrefixStore("job1", store_.get());
  auto b = PrefixStore("job2", store_.get());
  ASSERT_TRUE(a->Set("addr", "A").ok());
  ASSERT_TRUE(b->Set("addr", "B").ok());
  EXPECT_EQ(*a->Get("addr", absl::Seconds(1)), "A");
  EXPECT_EQ(*b->Get("addr", absl::Seconds(1)), "B");
  EXPECT_EQ(*a->Add("n", 2), 2);
  EXPECT_EQ(*b->Add("n", 5), 5);
  EXPECT_EQ(*a->Add("n", 0), 2);
  EXPECT_EQ(a->Get("only_b", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // Nested prefixes and the base view.
  auto nested = PrefixStore("comm0", a.get());
  ASSERT_TRUE(nested->Set("k", "v").ok());
  EXPECT_EQ(*store_->Get("job1/comm0/k", absl::Seconds(1)), "v");
  EXPECT_EQ(*store_->Get("job1/addr", absl::Seconds(1)), "A");
  EXPECT_EQ(a->Set("", "v").code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreTest, OpenStoreByUrl) {
  std::string url;
  std::unique_ptr<Store> served;
  if (GetParam() == Kind::kFile) {
    url = absl::StrCat("file:", dir_, "/via_url");
  } else {
    url = absl::StrCat("tcp://127.0.0.1:", testing::FreePort());
    auto s = OpenStore(url, /*serve=*/true, absl::Seconds(10));
    ASSERT_TRUE(s.ok()) << s.status();
    served = std::move(*s);
  }
  auto client = OpenStore(url, /*serve=*/false, absl::Seconds(10));
  ASSERT_TRUE(client.ok()) << client.status();
  Store* writer = served ? served.get() : client->get();
  ASSERT_TRUE(writer->Set("hello", "world").ok());
  auto v = (*client)->Get("hello", absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "world");
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreTest, ::testing::Values(Kind::kFile, Kind::kTcp), KindName);

TEST(OpenStoreTest, BadUrlIsInvalidArgument) {
  for (const char* url :
       {"", "foo", "http://host:1", "file:", "file://", "tcp://", "tcp://host", "tcp://:123",
        "tcp://host:", "tcp://host:abc", "tcp://host:70000", "tcp://host:-1", "tcp://host:1x",
        "tcp://[::1", "tcp://[::1]", "tcp://::1:80", "tcp://host:0"}) {
    auto s = OpenStore(url, /*serve=*/false, absl::Milliseconds(100));
    ASSERT_FALSE(s.ok()) << url;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << url << ": " << s.status();
  }
}

TEST(OpenStoreTest, FileUrlWithTripleSlash) {
  std::string dir = MakeTempDir();
  auto s = OpenStore(absl::StrCat("file://", dir), false, absl::Seconds(1));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Set("k", "v").ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/k"));
  testing::RemoveTree(dir);
}

}  // namespace
}  // namespace mixnet::rendezvous
