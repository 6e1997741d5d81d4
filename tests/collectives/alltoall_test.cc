// Collectives tests: alltoall / alltoallv / barrier / allgather with ranks as
// threads and as processes, world sizes 1-7, sizes 0, 1, odd and 64 MiB, every
// byte checked; bad input; a rank SIGKILLed mid-alltoall.
#include "runtime/collectives/alltoall.h"

#include <csignal>
#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/status.h"
#include "tests/collectives/rank_harness.h"

namespace mixnet::collectives {
namespace {

using testing::RankMode;
using testing::RunRanks;
using testing::TestOptions;

// Deterministic contents of the bytes rank `src` sends to `dst`, by 64-bit
// words so that filling and checking 64 MiB blocks stays cheap.
void Fill(uint8_t* p, size_t n, int src, int dst) {
  const uint64_t seed = (static_cast<uint64_t>(src) * 131 + dst + 1) * 0x9E3779B97F4A7C15ull;
  size_t words = n / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = seed ^ (w * 0xD6E8FEB86659FD93ull);
    std::memcpy(p + w * 8, &v, 8);
  }
  for (size_t k = words * 8; k < n; ++k) p[k] = static_cast<uint8_t>(seed >> (k % 8));
}

bool Matches(const uint8_t* p, size_t n, int src, int dst) {
  std::vector<uint8_t> want(n);
  Fill(want.data(), n, src, dst);
  return n == 0 || std::memcmp(p, want.data(), n) == 0;
}

absl::Status Check(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::DataLossError(what);
}

// Runs one alltoall and verifies every byte (including guard bytes past the end).
absl::Status AlltoallOnce(Communicator& comm, size_t bytes) {
  const int n = comm.size(), me = comm.rank();
  std::vector<uint8_t> send(bytes * n), recv(bytes * n + 16, 0xEE);
  for (int j = 0; j < n; ++j) Fill(send.data() + j * bytes, bytes, me, j);
  RETURN_IF_ERROR(Alltoall(comm, send.data(), recv.data(), bytes));
  for (int j = 0; j < n; ++j) {
    RETURN_IF_ERROR(Check(Matches(recv.data() + j * bytes, bytes, j, me),
                          absl::StrCat("rank ", me, ": bytes from rank ", j, " are wrong")));
  }
  for (size_t k = bytes * n; k < recv.size(); ++k) {
    RETURN_IF_ERROR(Check(recv[k] == 0xEE, "alltoall wrote past the receive buffer"));
  }
  return absl::OkStatus();
}

struct Case {
  RankMode mode;
  int world;
  size_t bytes;
  std::string intra_host = "local";  // ranks share a host: local transport or TCP over lo
};

class AlltoallTest : public ::testing::TestWithParam<Case> {};

TEST_P(AlltoallTest, EveryByteArrives) {
  const Case c = GetParam();
  auto statuses = RunRanks(c.world, c.mode, [&](int rank, int world, rendezvous::Store& store) {
    CommunicatorOptions o = TestOptions(rank, world, &store);
    o.intra_host = c.intra_host;
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(std::move(o)));
    const std::string want = world > 1 && c.intra_host == "local" ? "local" : "tcp";
    if (comm->intra_host_transport() != want) {
      return absl::InternalError(absl::StrCat("rank ", rank, " talks to its host over ",
                                              comm->intra_host_transport(), ", not ", want));
    }
    RETURN_IF_ERROR(AlltoallOnce(*comm, c.bytes));
    RETURN_IF_ERROR(Barrier(*comm));
    if (c.bytes < (1 << 20)) RETURN_IF_ERROR(AlltoallOnce(*comm, c.bytes));  // reusable
    return Barrier(*comm);
  });
  for (int r = 0; r < c.world; ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  for (RankMode m : {RankMode::kThreads, RankMode::kProcesses}) {
    for (int w : {1, 2, 3, 4, 7}) {
      for (size_t b : {size_t{0}, size_t{1}, size_t{12345}}) v.push_back({m, w, b});
    }
    v.push_back({m, 2, size_t{64} << 20});
    v.push_back({m, 3, size_t{64} << 20});
    // The same over TCP loopback (MIXNET_INTRA_HOST=nic).
    for (size_t b : {size_t{12345}, size_t{3} << 20}) v.push_back({m, 4, b, "nic"});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Collectives, AlltoallTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return absl::StrCat(testing::RankModeName(i.param.mode), "_w",
                                               i.param.world, "_b", i.param.bytes, "_",
                                               i.param.intra_host);
                         });

// alltoallv with zero and heavily skewed counts: rank i sends (i*7 + j*13) % 5
// units to j, one unit being large for j == 0 (a hot expert).
size_t SkewedCount(int src, int dst) {
  size_t units = static_cast<size_t>((src * 7 + dst * 13) % 5);
  return dst == 0 ? units * 1'000'003 : units * 17;
}

class AlltoallvTest : public ::testing::TestWithParam<std::tuple<RankMode, int>> {};

TEST_P(AlltoallvTest, SkewedAndZeroCounts) {
  const auto [mode, world] = GetParam();
  auto statuses = RunRanks(world, mode, [&](int me, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(TestOptions(me, n, &store)));
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t st = 0, rt = 0;
    for (int j = 0; j < n; ++j) {
      sc[j] = SkewedCount(me, j);
      sd[j] = st;
      st += sc[j] + 3;  // gaps between blocks must stay untouched
      rc[j] = SkewedCount(j, me);
      rd[j] = rt;
      rt += rc[j] + 5;
    }
    std::vector<uint8_t> send(st, 0), recv(rt, 0xEE);
    for (int j = 0; j < n; ++j) Fill(send.data() + sd[j], sc[j], me, j);
    AlltoallvArgs a{send.data(), send.size(), sc, sd, recv.data(), recv.size(), rc, rd};
    RETURN_IF_ERROR(Alltoallv(*comm, a));
    for (int j = 0; j < n; ++j) {
      RETURN_IF_ERROR(Check(Matches(recv.data() + rd[j], rc[j], j, me),
                            absl::StrCat("rank ", me, ": wrong bytes from ", j)));
      for (size_t k = rc[j]; k < rc[j] + 5; ++k) {
        RETURN_IF_ERROR(Check(recv[rd[j] + k] == 0xEE, "alltoallv wrote into a gap"));
      }
    }
    return Barrier(*comm);
  });
  for (int r = 0; r < world; ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

INSTANTIATE_TEST_SUITE_P(Collectives, AlltoallvTest,
                         ::testing::Combine(::testing::Values(RankMode::kThreads,
                                                              RankMode::kProcesses),
                                            ::testing::Values(1, 2, 3, 4, 7)),
                         [](const auto& i) {
                           return absl::StrCat(testing::RankModeName(std::get<0>(i.param)), "_w",
                                               std::get<1>(i.param));
                         });

TEST(Collectives, AllgatherAndBarrier) {
  auto statuses = RunRanks(5, RankMode::kThreads, [](int me, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(TestOptions(me, n, &store)));
    for (int iter = 0; iter < 20; ++iter) {
      uint64_t mine = static_cast<uint64_t>(me) * 1000 + iter;
      std::vector<uint64_t> all(n);
      RETURN_IF_ERROR(Allgather(*comm, &mine, all.data(), sizeof(mine)));
      for (int j = 0; j < n; ++j) {
        RETURN_IF_ERROR(Check(all[j] == static_cast<uint64_t>(j) * 1000 + iter, "allgather"));
      }
      RETURN_IF_ERROR(Barrier(*comm));
    }
    return absl::OkStatus();
  });
  for (auto& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST(CollectivesBadInput, MismatchedCountsAreInvalidArgumentOnBothRanks) {
  auto statuses = RunRanks(2, RankMode::kThreads, [](int me, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(TestOptions(me, n, &store)));
    // Rank 0 sends 100 bytes to rank 1; rank 1 expects 40.
    std::vector<size_t> sc = {10, me == 0 ? 100u : 10u}, rc = {10, 10};
    if (me == 1) rc = {40, 10}, sc = {10, 10};
    std::vector<size_t> sd = {0, 200}, rd = {0, 200};
    std::vector<uint8_t> send(400, 1), recv(400, 0xEE);
    AlltoallvArgs a{send.data(), send.size(), sc, sd, recv.data(), recv.size(), rc, rd};
    absl::Status s = Alltoallv(*comm, a);
    if (me == 1) {
      for (size_t k = 40; k < 200; ++k) {
        if (recv[k] != 0xEE) return absl::DataLossError("wrote past the expected block");
      }
    }
    // The communicator stays usable after a count mismatch.
    RETURN_IF_ERROR(Barrier(*comm));
    return s;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
    EXPECT_NE(statuses[r].message().find("count mismatch"), std::string::npos) << statuses[r];
  }
}

TEST(CollectivesBadInput, NullBuffersAndBadSpansAreInvalidArgument) {
  auto statuses = RunRanks(1, RankMode::kThreads, [](int me, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(TestOptions(me, n, &store)));
    std::vector<uint8_t> buf(64);
    std::vector<absl::Status> got;
    got.push_back(Alltoall(*comm, nullptr, buf.data(), 8));
    got.push_back(Alltoall(*comm, buf.data(), nullptr, 8));
    std::vector<size_t> c = {8}, d = {60}, two = {1, 2};
    got.push_back(Alltoallv(*comm, {buf.data(), 64, c, d, buf.data(), 64, c, {}}));
    got.push_back(Alltoallv(*comm, {buf.data(), 64, c, d, buf.data(), 64, c, d}));  // 60+8 > 64
    got.push_back(Alltoallv(*comm, {buf.data(), 64, two, two, buf.data(), 64, c, c}));
    got.push_back(Alltoall(*comm, buf.data(), buf.data() + 4, 8));  // overlap
    for (auto& s : got) {
      if (s.code() != absl::StatusCode::kInvalidArgument) {
        return absl::InternalError(absl::StrCat("expected InvalidArgument, got ", s.ToString()));
      }
    }
    return Alltoall(*comm, nullptr, nullptr, 0);  // zero bytes with null buffers is fine
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
}

TEST(CollectivesBadInput, WorldSizeMismatchIsInvalidArgument) {
  auto statuses = RunRanks(2, RankMode::kThreads, [](int me, int n, rendezvous::Store& store) {
    auto o = TestOptions(me, me == 1 ? 3 : 2, &store);
    o.connect_timeout = absl::Seconds(3);
    return Communicator::Create(o).status();
  });
  for (auto& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("world-size mismatch"), std::string::npos) << s;
  }
}

TEST(CollectivesBadInput, SpecNicMissingOnThisMachineIsNamed) {
  // The spec puts this host's only NIC at an address no local interface has.
  auto spec = cluster::ClusterSpec::Parse(R"(
hosts:
  - name: h0
    nics:
      - {name: eth9, role: eps, address: 192.0.2.77/24, gbps: 10}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  testing::TempDir dir;
  auto store = rendezvous::CreateFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  auto o = TestOptions(0, 1, store->get());
  o.spec = *spec;
  o.host = "h0";
  absl::Status s = Communicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("eth9"), std::string::npos) << s;
  EXPECT_NE(s.message().find("192.0.2.77"), std::string::npos) << s;

  o.host = "h7";  // a host the spec lacks
  s = Communicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("h7"), std::string::npos) << s;
}

TEST(CollectivesBadInput, RankOutsideWorldIsInvalidArgument) {
  testing::TempDir dir;
  auto store = rendezvous::CreateFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(Communicator::Create(TestOptions(4, 4, store->get())).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Communicator::Create(TestOptions(0, 1, nullptr)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// SIGKILL one rank while all run alltoalls in a loop: every other rank returns
// Unavailable naming the dead rank, well within twice the timeout.
TEST(CollectivesFailure, KilledRankIsReportedByEveryOtherRank) {
  constexpr int kWorld = 4, kVictim = 2;
  const absl::Duration timeout = absl::Seconds(5);
  absl::Time start = absl::Now();
  auto statuses = RunRanks(
      kWorld, RankMode::kProcesses,
      [&](int me, int n, rendezvous::Store& store) -> absl::Status {
        auto o = TestOptions(me, n, &store);
        o.timeout = timeout;
        ASSIGN_OR_RETURN(auto comm, Communicator::Create(o));
        std::vector<uint8_t> send((4 << 20) * n, 7), recv((4 << 20) * n);
        for (int i = 0; i < 100000; ++i) {
          RETURN_IF_ERROR(Alltoall(*comm, send.data(), recv.data(), 4 << 20));
        }
        return absl::InternalError("the victim was never killed");
      },
      absl::Seconds(60), kVictim, absl::Milliseconds(1500));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1500) + 2 * timeout + absl::Seconds(3));
  for (int r = 0; r < kWorld; ++r) {
    if (r == kVictim) continue;
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable)
        << "rank " << r << ": " << statuses[r];
    EXPECT_NE(statuses[r].message().find("rank 2"), std::string::npos)
        << "rank " << r << ": " << statuses[r];
  }
}

// A peer that is alive but never joins the collective: the caller gets
// DeadlineExceeded naming it, promptly after its timeout (the abort does not
// wait for queued data to drain to the stuck peer).
TEST(CollectivesFailure, SilentPeerTimesOutNamingIt) {
  absl::Duration elapsed;
  auto statuses = RunRanks(2, RankMode::kThreads, [&](int me, int n, rendezvous::Store& store) {
    auto o = TestOptions(me, n, &store);
    o.timeout = absl::Seconds(1);
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(o));
    if (me == 1) {
      absl::SleepFor(absl::Seconds(3));  // alive, but never calls the collective
      return absl::OkStatus();
    }
    std::vector<uint8_t> send(16 << 20, 1), recv(16 << 20);
    absl::Time t0 = absl::Now();
    absl::Status s = Alltoall(*comm, send.data(), recv.data(), 8 << 20);
    elapsed = absl::Now() - t0;
    return s;
  });
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDeadlineExceeded) << statuses[0];
  EXPECT_NE(statuses[0].message().find("rank 1"), std::string::npos) << statuses[0];
  EXPECT_LT(elapsed, absl::Milliseconds(2500));
}

TEST(SplitAcrossPaths, ProportionalAlignedAndComplete) {
  EXPECT_EQ(SplitAcrossPaths(0, {1, 1}), (std::vector<size_t>{0, 0}));
  EXPECT_EQ(SplitAcrossPaths(10, {1}), (std::vector<size_t>{10}));
  auto v = SplitAcrossPaths(3 << 20, {100, 200});
  EXPECT_EQ(v[0] + v[1], size_t{3} << 20);
  EXPECT_EQ(v[0] % 4096, 0u);
  EXPECT_NEAR(static_cast<double>(v[0]), (1 << 20), 4096);
  auto small = SplitAcrossPaths(100, {1, 1, 1});
  EXPECT_EQ(small[0] + small[1] + small[2], 100u);
}

// Hand-worked largest-remainder splits (P = one 4 KiB page).
TEST(SplitAcrossPaths, PagesLeftOverTakeTurns) {
  constexpr size_t P = 4096;
  // 5 pages over 4 equal paths: one each, the fifth to path `first`.
  EXPECT_EQ(SplitAcrossPaths(5 * P, {1, 1, 1, 1}, 0), (std::vector<size_t>{2 * P, P, P, P}));
  EXPECT_EQ(SplitAcrossPaths(5 * P, {1, 1, 1, 1}, 2), (std::vector<size_t>{P, P, 2 * P, P}));
  EXPECT_EQ(SplitAcrossPaths(5 * P, {1, 1, 1, 1}, 7), (std::vector<size_t>{P, P, P, 2 * P}));
  // 6 pages and 100 bytes: the two extra pages to paths 1 and 2, the 100
  // bytes to path 3 (next in turn).
  EXPECT_EQ(SplitAcrossPaths(6 * P + 100, {1, 1, 1, 1}, 1),
            (std::vector<size_t>{P, 2 * P, 2 * P, P + 100}));
  // Speeds 1:2, 10 pages: 3.33 and 6.67 -> 3 and 6, the page left to the
  // path that lost 0.67 to rounding, whatever `first` says.
  EXPECT_EQ(SplitAcrossPaths(10 * P, {1, 2}, 0), (std::vector<size_t>{3 * P, 7 * P}));
  EXPECT_EQ(SplitAcrossPaths(10 * P, {1, 2}, 1), (std::vector<size_t>{3 * P, 7 * P}));
  // A path of speed 0 gets nothing, not even the bytes short of a page.
  EXPECT_EQ(SplitAcrossPaths(3 * P + 1, {0, 1, 1}, 0), (std::vector<size_t>{0, 2 * P, P + 1}));
  EXPECT_EQ(SplitAcrossPaths(3 * P + 1, {0, 1, 1}, 2), (std::vector<size_t>{0, P + 1, 2 * P}));
  // Over the 7 peers of rank 0 in an 8-rank all-to-all (first = 0 + peer),
  // blocks of 5 pages over 4 NICs put the extra page on NICs 1, 2, 3, 0, 1,
  // 2, 3: 8 or 9 pages per NIC where "the rest on the last path" gave NIC 3
  // 14 and the others 7.
  std::vector<size_t> per_nic(4, 0);
  for (int peer = 1; peer < 8; ++peer) {
    std::vector<size_t> v = SplitAcrossPaths(5 * P, {1, 1, 1, 1}, PairSplitFirst(0, peer));
    for (size_t i = 0; i < 4; ++i) per_nic[i] += v[i] / P;
  }
  EXPECT_EQ(per_nic, (std::vector<size_t>{8, 9, 9, 9}));
  // Both ends of a pair get the same turn.
  EXPECT_EQ(PairSplitFirst(3, 5), PairSplitFirst(5, 3));
}

}  // namespace
}  // namespace mixnet::collectives
