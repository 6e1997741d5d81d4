// Unplanned circuit loss on the emulated cluster (label netns; needs root,
// skips with the reason otherwise). Four ranks (threads, each in its host's
// namespace) run a large checksummed alltoallv whose heavy pairs ride OCS
// circuits; mid-transfer the test cuts one circuit with
// EmulatedFabric::ApplyCircuits, without any Prepare. Stall detection
// (TCP_USER_TIMEOUT + keepalive, 1 s) errors the dead connection on both ends,
// the lost pieces are re-sent over EPS, every byte verifies, and the
// communicator stays healthy for the next call.
//
// Threads: the test thread cuts; rank threads run the collectives.
#include <atomic>
#include <iostream>
#include <thread>

#include "absl/time/clock.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/sync.h"
#include "tests/collectives/checked_alltoallv.h"
#include "tests/emulation/dataplane_fabric.h"

namespace mixnet::testing {
namespace {

class CircuitCutTest : public DataplaneFabricTest {};

TEST_F(CircuitCutTest, CutMidTransferCompletesOverEpsExactlyOnce) {
  ASSERT_NO_FATAL_FAILURE(Up("cut"));
  if (IsSkipped()) return;
  constexpr int kWorld = 4;
  // Circuit pairs (h0-h1 over two circuits, h2-h3 over one) move 48 MiB each
  // way; the rest 256 KiB (over EPS).
  auto heavy = [](int src, int dst) -> size_t {
    return src / 2 == dst / 2 ? (48u << 20) + src * 4096 + 3 : (256u << 10) + dst;
  };
  auto light = [](int src, int dst) -> size_t { return (1u << 20) + src * 1000 + dst; };
  std::atomic<int> in_call{0};
  std::atomic<bool> cut_done{false};
  std::vector<uint64_t> resent(kWorld, 0);
  absl::Status cut_status;
  absl::Duration cut_at;
  const absl::Time t0 = absl::Now();
  std::thread cutter([&] {
    // Cut h0.ocs0-h1.ocs0 once a few MiB crossed it.
    absl::StatusOr<uint64_t> base = TxBytes("h0", "ocs0");
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      absl::StatusOr<uint64_t> now = TxBytes("h0", "ocs0");
      if (in_call.load() == kWorld && base.ok() && now.ok() && *now - *base > (4u << 20)) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    cut_at = absl::Now() - t0;
    cut_status = fabric_->ApplyCircuits({{"ocs0", 2, 4}, {"ocs0", 5, 7}});
    cut_done = true;
  });
  absl::Duration call_took;
  auto statuses =
      RunRanks(kWorld, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
        ASSIGN_OR_RETURN(auto comm, Join(rank, world, store));
        RETURN_IF_ERROR(collectives::Barrier(*comm));
        in_call++;
        absl::Time start = absl::Now();
        RETURN_IF_ERROR(CheckedAlltoallv(*comm, 1, heavy));
        if (rank == 0) call_took = absl::Now() - start;
        resent[rank] = comm->pieces_resent();
        while (!cut_done.load()) absl::SleepFor(absl::Milliseconds(5));
        RETURN_IF_ERROR(collectives::Barrier(*comm));
        // Healthy afterwards: more calls, all checked.
        for (uint64_t i = 2; i < 5; ++i) RETURN_IF_ERROR(CheckedAlltoallv(*comm, i, light));
        RETURN_IF_ERROR(comm->health());
        return collectives::Barrier(*comm);
      });
  cutter.join();
  ASSERT_TRUE(cut_status.ok()) << cut_status;
  for (int r = 0; r < kWorld; ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  EXPECT_GT(resent[0] + resent[1], 0u) << "the cut circuit lost nothing: was it cut too late?";
  EXPECT_EQ(resent[2] + resent[3], 0u) << "h2-h3 lost pieces though its circuit stayed";
  std::cout << "cut at " << absl::FormatDuration(cut_at) << "; rank 0's call took "
            << absl::FormatDuration(call_took) << "; pieces re-sent over EPS: " << resent[0]
            << " (rank 0), " << resent[1] << " (rank 1)\n";
}

}  // namespace
}  // namespace mixnet::testing
