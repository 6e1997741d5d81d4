// Receiver-paced pieces (runtime/collectives/alltoall_pull.cc) on loopback:
// ranks as threads on the loopback OCS spec (lo_ocs_spec.h: EPS 1 Gbit/s,
// two 2 Gbit/s OCS NICs per host), h0-h1 joined by two circuits and, with 4
// ranks, h2-h3 by one. Parameterised over router x world size x piece size
// x bytes: three checksummed alltoallv calls on one communicator (every
// byte and guard byte verified), and the number of pieces each rank asked
// for against a hand-worked bound. A direction is paced when it has two or
// more pieces (v1: h0-h1's two circuits; v2 with a plan: a pair's circuits
// plus EPS) and at least two chunks of bytes per piece; each ask is one chunk (a
// remainder under half a chunk rides with the last), so a paced direction of
// b bytes takes at least b / (1.5 chunk) asks. Pacing off (chunk 0), or
// every direction under two chunks: no asks at all.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/status.h"
#include "tests/collectives/checked_alltoallv.h"
#include "tests/collectives/lo_ocs_spec.h"
#include "tests/collectives/rank_harness.h"

namespace mixnet::collectives {
namespace {

using testing::RankMode;
using testing::RunRanks;

struct Case {
  const char* router;
  int world;
  size_t chunk;  // CommunicatorOptions::pull_chunk_bytes
  size_t scale;  // testing::Count's scale
};

std::string CaseName(const Case& c) {
  return absl::StrCat(c.router, "_world", c.world, "_chunk", c.chunk, "_scale", c.scale);
}

class PullTest : public ::testing::TestWithParam<Case> {};

TEST_P(PullTest, EveryByteArrivesAndPacedDirectionsAreAskedFor) {
  const Case c = GetParam();
  std::string circuits = "  - {switch: s0, ports: [1, 3]}\n  - {switch: s0, ports: [2, 4]}\n";
  if (c.world == 4) circuits += "  - {switch: s0, ports: [5, 7]}\n";
  const std::string spec = testing::LoOcsSpec("lo-pull", c.world, circuits);
  std::vector<uint64_t> asks(c.world);
  auto st = RunRanks(c.world, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(
                                    rank, n, store, spec, c.router,
                                    [&](CommunicatorOptions& o) { o.pull_chunk_bytes = c.chunk; }));
    if (std::string(c.router) == "v2") {
      RETURN_IF_ERROR(comm->SetRouting(testing::HostPlan(n, false, [](int, int) { return 1e6; })));
    }
    for (uint64_t iter = 1; iter <= 3; ++iter) {
      RETURN_IF_ERROR(testing::CheckedAlltoallv(
          *comm, iter, [&](int s, int d) { return testing::Count(s, d, iter, c.scale); }));
    }
    asks[rank] = comm->pull_asks();
    return Barrier(*comm);
  });
  for (int r = 0; r < c.world; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  // v1: h0 and h1 receive from each other over two circuits.
  for (int r = 0; r < c.world; ++r) {
    uint64_t at_least = 0;
    bool paced = false;
    if (std::string(c.router) == "v1" && r < 2 && c.chunk > 0) {
      for (uint64_t iter = 1; iter <= 3; ++iter) {
        const size_t b = testing::Count(1 - r, r, iter, c.scale);
        if (b >= 2 * c.chunk * 2) {  // two pieces: h0-h1's circuits
          paced = true;
          at_least += static_cast<uint64_t>(b / (1.5 * static_cast<double>(c.chunk)));
        }
      }
    }
    std::cout << CaseName(c) << ": rank " << r << " asked for " << asks[r] << " pieces\n";
    if (c.chunk == 0 || c.scale * 16 + 4 * 4099 < 2 * c.chunk) {
      EXPECT_EQ(asks[r], 0u) << "rank " << r << ": nothing is paced here";
    } else if (paced) {
      EXPECT_GE(asks[r], at_least) << "rank " << r;
    }
  }
  if (std::string(c.router) == "v2" && c.chunk > 0 && c.chunk <= c.scale) {
    EXPECT_GT(asks[0] + asks[1], 0u) << "h0-h1 splits over circuits and EPS: paced";
  }
}

INSTANTIATE_TEST_SUITE_P(Pull, PullTest,
                         ::testing::Values(Case{"v1", 2, 4096, 300000},
                                           Case{"v1", 2, 128 << 10, 300000},
                                           Case{"v1", 2, 0, 300000}, Case{"v1", 4, 4096, 100000},
                                           Case{"v2", 2, 4096, 300000},
                                           Case{"v2", 4, 128 << 10, 300000},
                                           Case{"v2", 4, 0, 300000}, Case{"v2", 4, 1 << 20, 1000}),
                         [](const auto& info) { return CaseName(info.param); });

}  // namespace
}  // namespace mixnet::collectives
