// Collectives across topology changes, on loopback: ranks as threads, one per
// host of a spec whose hosts have an EPS NIC and two "ocs" NICs on 127.x
// addresses (direct paths over lo). Checks (a) continuous checksummed
// alltoallv while per-rank agent threads drive >= 50 Prepare/Commit/Abort
// rounds with skew between ranks, (b) a direct path killed mid-collective
// (the collective completes over EPS, every byte checked, next call works),
// (c) Prepare's deadline while a collective is stuck, (d) Abort closing a
// direct link a collective holds after a Commit dropped it, (e) links whose
// circuits left kept suspended and resumed when their circuits come back.
#include <atomic>
#include <barrier>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/status.h"
#include "tests/collectives/checked_alltoallv.h"
#include "tests/collectives/lo_ocs_spec.h"
#include "tests/collectives/rank_harness.h"

namespace mixnet::collectives {
namespace {

using testing::CheckedAlltoallv;
using testing::RankMode;
using testing::RunRanks;

std::string Spec(int hosts, const std::string& circuits) {
  return testing::LoOcsSpec("lo-ocs", hosts, circuits);
}

cluster::CircuitSpec C(int a, int b) { return cluster::CircuitSpec{"s0", a, b}; }

absl::StatusOr<std::unique_ptr<Communicator>> MakeComm(int rank, int world,
                                                       rendezvous::Store& store,
                                                       const std::string& spec_yaml) {
  return testing::MakeLoOcsComm(rank, world, store, spec_yaml);
}

// (a) Many rounds of Prepare -> (apply) -> Commit (some Aborts), with each
// rank's agent thread getting the events at different times, while the ranks
// run checksummed alltoallv non-stop.
TEST(Reconfig, ContinuousAlltoallvAcrossManyRounds) {
  constexpr int kWorld = 4;
  constexpr int kRounds = 60;
  const std::vector<std::vector<cluster::CircuitSpec>> topo = {
      {C(1, 3), C(5, 7), C(2, 6)},  // h0-h1, h2-h3 (ocs0); h0-h2 (ocs1)
      {C(1, 5), C(3, 7), C(4, 6)},  // h0-h2, h1-h3 (ocs0); h1-h2 (ocs1)
      {},                           // none
      {C(1, 3), C(2, 4), C(5, 7)},  // two circuits h0-h1; h2-h3
  };
  const std::string spec = Spec(kWorld, "  - {switch: s0, ports: [1, 3]}\n");
  std::atomic<int> rounds_done{0}, aborted{0}, prepare_late{0};
  std::atomic<bool> agents_done{false};
  std::barrier sync(kWorld);
  std::vector<uint64_t> direct_bytes(kWorld), calls(kWorld);
  auto statuses =
      RunRanks(kWorld, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
        ASSIGN_OR_RETURN(auto comm, MakeComm(rank, world, store, spec));
        absl::Status agent_status;
        std::thread agent([&] {
          std::mt19937 rng(rank * 77 + 1);
          for (int r = 1; r <= kRounds; ++r) {
            router::Topology target{static_cast<uint64_t>(r), topo[r % topo.size()]};
            absl::SleepFor(absl::Microseconds(rng() % 4000));  // skew: events arrive apart
            absl::Status p = comm->Prepare(target, absl::Now() + absl::Seconds(5));
            if (!p.ok() && p.code() != absl::StatusCode::kDeadlineExceeded) agent_status = p;
            if (!p.ok()) prepare_late++;
            sync.arrive_and_wait();  // the controller collects every PREPARE answer
            absl::SleepFor(absl::Microseconds(rng() % 4000));
            if (r % 10 == 7) {  // the controller calls some rounds off
              comm->Abort(target.epoch);
              if (rank == 0) aborted++;
            } else {
              absl::Status c = comm->Commit(target, absl::Now() + absl::Seconds(10));
              if (!c.ok() && agent_status.ok()) agent_status = c;
              if (c.ok() && comm->installed_epoch() != target.epoch) {
                agent_status = absl::InternalError("installed epoch not the committed one");
              }
            }
            sync.arrive_and_wait();
            if (rank == 0) rounds_done++;
          }
          agents_done = true;
        });
        absl::Status s;
        uint64_t iter = 0;
        for (;; ++iter) {
          s = CheckedAlltoallv(*comm, iter, 1000 + (iter % 3) * 20000);
          if (!s.ok()) break;
          // Agree on when to stop: every rank's view of the agents, OR-ed.
          uint8_t mine = agents_done.load() ? 1 : 0;
          std::vector<uint8_t> all(world);
          s = Allgather(*comm, &mine, all.data(), 1);
          if (!s.ok()) break;
          bool stop = false;
          for (uint8_t v : all) stop |= v != 0;
          if (stop) break;
        }
        agent.join();
        calls[rank] = iter;
        RETURN_IF_ERROR(s);
        RETURN_IF_ERROR(agent_status);
        // Still healthy afterwards, and on the last round's circuits (epoch
        // 60: topo[0], committed), whatever the calls during the rounds got
        // (under a sanitizer on a loaded machine that may be a handful).
        RETURN_IF_ERROR(CheckedAlltoallv(*comm, iter + 1, 50000));
        direct_bytes[rank] = comm->direct_bytes_sent();
        return absl::OkStatus();
      });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  EXPECT_EQ(rounds_done.load(), kRounds);
  uint64_t total_direct = 0;
  for (int r = 0; r < kWorld; ++r) total_direct += direct_bytes[r];
  EXPECT_GT(total_direct, 0u) << "no byte went over a direct link";
  std::cout << "calls per rank " << calls[0] << ", aborted rounds " << aborted.load()
            << ", late prepares " << prepare_late.load() << ", direct bytes " << total_direct
            << "\n";
}

// (b) A direct link dies (from one end) mid-collective: the collective
// completes, its lost pieces re-sent over EPS, every byte checked; the next
// call works.
TEST(Reconfig, KilledDirectPathFallsBackToEps) {
  const std::string spec =
      Spec(2, "  - {switch: s0, ports: [1, 3]}\n  - {switch: s0, ports: [2, 4]}\n");
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<uint64_t> resent(2);
    auto statuses =
        RunRanks(2, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
          ASSIGN_OR_RETURN(auto comm, MakeComm(rank, world, store, spec));
          if (comm->InstalledDirect(1 - rank).size() != 2) {
            return absl::InternalError("expected two direct links");
          }
          std::thread killer;
          if (rank == 0) {
            killer = std::thread([&, variant] {
              // 0: right after the call offered the link (the peer joins 300 ms
              // later); 1, 2: while data flows, or just after.
              const absl::Time give_up = absl::Now() + absl::Seconds(20);
              while (!comm->transfer_active() && absl::Now() < give_up) {
                absl::SleepFor(absl::Microseconds(200));
              }
              absl::SleepFor(absl::Milliseconds(5 * variant));
              comm->TestOnlyKillDirectLink(1);
            });
          }
          if (rank == 1 && variant == 0) absl::SleepFor(absl::Milliseconds(300));
          const size_t bytes = variant == 0 ? (8u << 20) + 5 : (64u << 20) + 5;
          absl::Status s = CheckedAlltoallv(*comm, 7, [&](int, int) { return bytes; });
          if (killer.joinable()) killer.join();
          RETURN_IF_ERROR(s);
          resent[rank] = comm->pieces_resent();
          RETURN_IF_ERROR(CheckedAlltoallv(*comm, 8, 1 << 20));
          RETURN_IF_ERROR(comm->health());
          return Barrier(*comm);
        });
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(statuses[r].ok())
          << "variant " << variant << " rank " << r << ": " << statuses[r];
    }
    if (variant == 0) {
      EXPECT_GT(resent[0] + resent[1], 0u) << "nothing was re-sent over EPS";
    }
    std::cout << "variant " << variant << ": pieces re-sent over EPS " << resent[0] << " + "
              << resent[1] << "\n";
  }
}

// (c) Prepare waits for a collective that uses a changing direct path and
// gives up at its deadline; the collective then completes and Abort lifts the
// restriction.
TEST(Reconfig, PrepareDeadlineWhileCollectiveIsStuck) {
  const std::string spec = Spec(2, "  - {switch: s0, ports: [1, 3]}\n");
  std::atomic<bool> rank0_in_call{false};
  auto statuses =
      RunRanks(2, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
        ASSIGN_OR_RETURN(auto comm, MakeComm(rank, world, store, spec));
        // No collective running: Prepare returns at once.
        router::Topology none{1, {}};
        absl::Time t0 = absl::Now();
        RETURN_IF_ERROR(comm->Prepare(none, absl::Now() + absl::Seconds(5)));
        if (absl::Now() - t0 > absl::Seconds(1)) return absl::InternalError("idle Prepare waited");
        comm->Abort(1);
        RETURN_IF_ERROR(Barrier(*comm));
        absl::Status agent_status;
        std::thread agent;
        if (rank == 0) {
          agent = std::thread([&] {
            while (!rank0_in_call.load()) absl::SleepFor(absl::Milliseconds(1));
            // Until rank 0's all-to-all holds the direct link (a loaded
            // machine, e.g. the sanitizer build under ctest -j, can take
            // longer than any fixed sleep to get there).
            const absl::Time started_by = absl::Now() + absl::Seconds(5);
            while (!comm->transfer_active() && absl::Now() < started_by) {
              absl::SleepFor(absl::Milliseconds(1));
            }
            if (!comm->transfer_active()) {
              agent_status = absl::InternalError("rank 0's all-to-all never started a transfer");
              comm->Abort(2);
              return;
            }
            router::Topology target{2, {}};
            absl::Time start = absl::Now();
            absl::Status p = comm->Prepare(target, absl::Now() + absl::Milliseconds(300));
            absl::Duration took = absl::Now() - start;
            if (p.code() != absl::StatusCode::kDeadlineExceeded) {
              agent_status = absl::InternalError(absl::StrCat("Prepare returned ", p.ToString()));
            } else if (took > absl::Seconds(2)) {
              agent_status = absl::InternalError("Prepare overran its deadline");
            }
            comm->Abort(2);
          });
        } else {
          absl::SleepFor(absl::Milliseconds(1500));  // rank 1 is late: rank 0's call is stuck
        }
        if (rank == 0) rank0_in_call = true;
        absl::Status s = CheckedAlltoallv(*comm, 3, 100000);
        if (agent.joinable()) agent.join();
        RETURN_IF_ERROR(s);
        RETURN_IF_ERROR(agent_status);
        // After Abort the direct link is offered again.
        if (comm->OfferDirect(1 - rank).empty()) return absl::InternalError("link not offered");
        return CheckedAlltoallv(*comm, 4, 100000);
      });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

// (d) A collective holds a direct link (BeginTransfer, as alltoallv does);
// a Commit of a topology without its circuit drops it from the installed
// links, but the call still has it, and may have receives posted there (a
// relay's forwards). An Abort (the call failing: a peer died) must close it
// too: the call frees its buffers when it returns, and a receive still
// posted on an open link would then write into freed memory.
TEST(Reconfig, AbortClosesALinkACommitDroppedWhileACollectiveHoldsIt) {
  const std::string spec = Spec(2, "  - {switch: s0, ports: [1, 3]}\n");
  std::barrier both_hold(2);
  auto statuses =
      RunRanks(2, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
        ASSIGN_OR_RETURN(auto comm, MakeComm(rank, world, store, spec));
        const int peer = 1 - rank;
        std::vector<DirectLinks> held = comm->BeginTransfer(4);
        // Neither end closes its link (the Abort below) before both hold it.
        both_hold.arrive_and_wait();
        if (held[peer].size() != 1)
          return absl::InternalError("the circuit's link was not offered");
        RETURN_IF_ERROR(comm->Commit(router::Topology{1, {}}, absl::Now() + absl::Seconds(5)));
        if (!comm->InstalledDirect(peer).empty()) {
          return absl::InternalError("the commit kept the circuit's link");
        }
        comm->Abort(absl::UnavailableError(absl::StrCat("test: ", comm->PeerName(peer), " died")));
        char buf[64];
        absl::StatusOr<std::unique_ptr<transport::Request>> late =
            held[peer][0]->Irecv(buf, sizeof(buf), 99);
        comm->EndTransfer();
        if (late.ok()) {
          return absl::InternalError(
              "Abort left the dropped link open: a receive posted there outlives the call");
        }
        return absl::OkStatus();
      });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

// (e) Paths outlive rounds: four hosts alternate between two circuit sets,
// h0-h1 + h2-h3 and h0-h2 + h1-h3 (ports 1-3, 5-7 and 1-5, 3-7 of s0's ocs0
// NICs), starting from the spec's h0-h1 alone. A link whose circuit leaves is
// suspended and resumed when the circuit comes back, so after each pairing
// was seen once no connection is made or closed; every call verifies and
// the resumed links carry bytes. With MIXNET_SUSPENDED_PATHS 0 each round
// makes its circuits' links anew and closes the old ones. Expected counts
// worked by hand from the sequence (rounds 1..8: B, A, B, A, ...):
//   h0: h1's link at creation; round 1 makes h2's; rounds 2..8 resume one.
//   h2: round 1 makes h0's, round 2 h3's; rounds 3..8 resume one.
// Without suspension every round makes one link per rank (h0 and h1 also
// one at creation) and closes the one it replaces (h2, h3: not in round 1).
class ReconfigPersistentPaths : public ::testing::TestWithParam<size_t> {};

TEST_P(ReconfigPersistentPaths, ACircuitThatComesBackReusesItsLink) {
  constexpr int kWorld = 4;
  constexpr int kRounds = 8;
  const size_t cap = GetParam();
  const std::vector<cluster::CircuitSpec> a = {C(1, 3), C(5, 7)};  // h0-h1, h2-h3
  const std::vector<cluster::CircuitSpec> b = {C(1, 5), C(3, 7)};  // h0-h2, h1-h3
  const std::string spec = Spec(kWorld, "  - {switch: s0, ports: [1, 3]}\n");
  std::barrier sync(kWorld);
  struct Counts {
    uint64_t connected = 0, resumed = 0, closed = 0, direct_growth_rounds = 0;
    size_t suspended = 0;
  };
  std::vector<Counts> counts(kWorld);
  auto statuses =
      RunRanks(kWorld, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
        ASSIGN_OR_RETURN(auto comm,
                         testing::MakeLoOcsComm(rank, world, store, spec, "v2",
                                                [cap](collectives::CommunicatorOptions& o) {
                                                  o.suspended_paths = cap;
                                                }));
        RETURN_IF_ERROR(CheckedAlltoallv(*comm, 0, 300000));
        for (int r = 1; r <= kRounds; ++r) {
          router::Topology target{static_cast<uint64_t>(r), r % 2 == 1 ? b : a};
          RETURN_IF_ERROR(comm->Prepare(target, absl::Now() + absl::Seconds(5)));
          sync.arrive_and_wait();
          RETURN_IF_ERROR(comm->Commit(target, absl::Now() + absl::Seconds(10)));
          sync.arrive_and_wait();
          const uint64_t before = comm->direct_bytes_sent();
          RETURN_IF_ERROR(CheckedAlltoallv(*comm, r, 300000));
          if (comm->direct_bytes_sent() > before) counts[rank].direct_growth_rounds++;
        }
        counts[rank].connected = comm->direct_links_connected();
        counts[rank].resumed = comm->direct_links_resumed();
        counts[rank].closed = comm->direct_links_closed();
        counts[rank].suspended = comm->suspended_direct();
        return Barrier(*comm);
      });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    // Every round's calls used direct links (resumed ones included).
    EXPECT_EQ(counts[r].direct_growth_rounds, static_cast<uint64_t>(kRounds)) << "rank " << r;
  }
  for (int r = 0; r < kWorld; ++r) {
    const bool h01 = r < 2;
    if (cap > 0) {
      EXPECT_EQ(counts[r].connected, 2u) << "rank " << r;
      EXPECT_EQ(counts[r].resumed, h01 ? 7u : 6u) << "rank " << r;
      EXPECT_EQ(counts[r].closed, 0u) << "rank " << r;
      EXPECT_EQ(counts[r].suspended, 1u) << "rank " << r;
    } else {
      EXPECT_EQ(counts[r].connected, h01 ? 9u : 8u) << "rank " << r;
      EXPECT_EQ(counts[r].resumed, 0u) << "rank " << r;
      EXPECT_EQ(counts[r].closed, h01 ? 8u : 7u) << "rank " << r;
      EXPECT_EQ(counts[r].suspended, 0u) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cap, ReconfigPersistentPaths, ::testing::Values(256, 0),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return i.param == 0 ? std::string("CloseAtOnce")
                                               : std::string("Suspend");
                         });

}  // namespace
}  // namespace mixnet::collectives
