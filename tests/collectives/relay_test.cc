// Router v2's two-hop relays in the data plane, on loopback: ranks as threads
// (or processes, for the SIGKILL case), one per host of a spec whose hosts
// have an EPS NIC (1 Gbit/s) and two OCS NICs (2 Gbit/s) on 127.x addresses.
// Checks that a pair without a circuit sends the plan's relay share through
// the host with circuits to both (counted at the origin and the relay
// against hand-worked shares, every byte checked at the destination); that
// every host can relay for every other at once with the smallest buffers
// (no deadlock); that a relay hop cut mid-transfer loses nothing (the origin
// re-sends the piece over EPS); that relays with one hop over EPS (a hot
// receiver fed through its partner, a hot sender through its) carry the plan's
// shares and lose nothing across a cut of their circuit hop; that a relay
// rank SIGKILLed mid-transfer is
// reported by every other rank without a hang, and that when it dies at a
// known point (its own test hook) the others' blocks still arrive whole,
// the unforwarded pieces re-sent over EPS, before they report it; and the relay cutting
// (CutRelays, RelayChunkCount/Len).
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/status.h"
#include "tests/collectives/checked_alltoallv.h"
#include "tests/collectives/lo_ocs_spec.h"
#include "tests/collectives/rank_harness.h"

namespace mixnet::collectives {
namespace {

using internal::CutRelays;
using internal::RelayChunkCount;
using internal::RelayChunkLen;
using testing::CheckedAlltoallv;
using testing::RankMode;
using testing::RunRanks;

constexpr size_t kMiB = 1 << 20;

// h0 - h1 - h2 in a line: h0 ocs0 (port 1) - h1 ocs0 (port 3), h1 ocs1
// (port 4) - h2 ocs0 (port 5). h0 and h2 share no circuit.
const char* kLine =
    "  - {switch: s0, ports: [1, 3]}\n"
    "  - {switch: s0, ports: [4, 5]}\n";

// A ring h0 - h1 - h2 - h3 - h0 (ocs1 of each host to ocs0 of the next).
const char* kRing =
    "  - {switch: s0, ports: [2, 3]}\n"
    "  - {switch: s0, ports: [4, 5]}\n"
    "  - {switch: s0, ports: [6, 7]}\n"
    "  - {switch: s0, ports: [8, 1]}\n";

router::RoutingPlan Plan(int hosts, const std::function<double(int, int)>& bytes) {
  return testing::HostPlan(hosts, /*relay=*/true, bytes);
}

// The line's plan: D each way between h0 and h2, nothing else. Hand-worked
// (fluid model): h0 -> h2 can go over EPS (E = 1 Gbit/s, h0's and h2's EPS
// NICs carry nothing else) and through h1 (both hops at c = 2 Gbit/s, no
// other traffic on them). The relay stores and forwards chunks of q = 256 KiB
// (the default MIXNET_RELAY_CHUNK_BYTES), so relaying x bytes takes
// x / c + q / c, and the best split has (D - x) / E = (x + q) / c:
// x = (c D - E q) / (E + c). For D = 3 MiB: x = (6 - 0.25) / 3 MiB = 23/12 MiB,
// a share of 23/36 (fluid relays would give 2/3); the same for h2 -> h0 over
// the circuits' other directions.
router::RoutingPlan LinePlan(double d) {
  return Plan(3, [&](int i, int j) { return (i == 0 && j == 2) || (i == 2 && j == 0) ? d : 0.0; });
}

struct Counters {
  uint64_t relay_sent = 0;
  uint64_t forwarded = 0;
  uint64_t resent = 0;
};

TEST(Relay, ALineRelaysThePlansShareThroughTheMiddleHost) {
  const std::string spec = testing::LoOcsSpec("lo-relay", 3, kLine);
  std::vector<Counters> c(3);
  std::vector<PeerRouting> routing(3);
  auto st = RunRanks(3, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(rank, n, store, spec));
    RETURN_IF_ERROR(comm->SetRouting(LinePlan(3.0 * kMiB)));
    routing[rank] = comm->routing(2 - rank);
    // 3 MiB between h0 and h2 (relayed), 1 MiB + 5 over each circuit pair.
    auto bytes = [](int s, int d) { return s + d == 2 ? 3 * kMiB : kMiB + 5; };
    for (uint64_t it = 0; it < 3; ++it) RETURN_IF_ERROR(CheckedAlltoallv(*comm, it, bytes));
    c[rank] = {comm->relay_bytes_sent(), comm->relay_bytes_forwarded(), comm->pieces_resent()};
    return Barrier(*comm);
  });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  for (int origin : {0, 2}) {
    const PeerRouting& r = routing[origin];
    ASSERT_EQ(r.relays.size(), 1u) << "rank " << origin;
    EXPECT_EQ(r.relays[0].rank, 1) << "rank " << origin;
    EXPECT_NEAR(r.relays[0].share, 23.0 / 36.0, 2e-3) << "rank " << origin;
    EXPECT_NEAR(r.eps_share, 13.0 / 36.0, 2e-3) << "rank " << origin;
    // Three calls of 23/12 MiB each (within a page of rounding).
    EXPECT_NEAR(static_cast<double>(c[origin].relay_sent), 3 * 23.0 / 12.0 * kMiB, 3 * 4096.0)
        << "rank " << origin;
    EXPECT_EQ(c[origin].forwarded, 0u) << "rank " << origin;
  }
  EXPECT_EQ(c[1].relay_sent, 0u);
  EXPECT_EQ(c[1].forwarded, c[0].relay_sent + c[2].relay_sent);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c[i].resent, 0u) << "rank " << i;
}

// Router v1 ignores the plan; a v2 rank relays to a v1 destination through a
// v1 relay (the headers, not the router, say what to forward and expect).
TEST(Relay, V1RanksForwardForV2Origins) {
  const std::string spec = testing::LoOcsSpec("lo-relay-mixed", 3, kLine);
  const std::vector<std::string> routers = {"v2", "v1", "v1"};
  std::vector<Counters> c(3);
  auto st = RunRanks(3, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(rank, n, store, spec, routers[rank]));
    RETURN_IF_ERROR(comm->SetRouting(LinePlan(3.0 * kMiB)));
    auto bytes = [](int s, int d) { return s + d == 2 ? 3 * kMiB : kMiB; };
    RETURN_IF_ERROR(CheckedAlltoallv(*comm, 1, bytes));
    c[rank] = {comm->relay_bytes_sent(), comm->relay_bytes_forwarded(), comm->pieces_resent()};
    return Barrier(*comm);
  });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  EXPECT_NEAR(static_cast<double>(c[0].relay_sent), 23.0 / 12.0 * kMiB, 4096.0);  // as above
  EXPECT_EQ(c[2].relay_sent, 0u) << "a v1 rank relayed";
  EXPECT_EQ(c[1].forwarded, c[0].relay_sent);
}

// Every host relays for every other at once: uniform traffic on a ring, where
// each non-adjacent pair relays through both of its common neighbours, with
// the smallest chunks and buffers (one 4 KiB chunk in flight per stream),
// so back-pressure holds every origin back; several calls, every byte checked.
TEST(Relay, EveryHostRelaysForEveryOtherAtOnce) {
  const std::string spec = testing::LoOcsSpec("lo-relay-ring", 4, kRing);
  std::vector<Counters> c(4);
  std::vector<PeerRouting> routing(4);
  auto st = RunRanks(4, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm,
                     testing::MakeLoOcsComm(rank, n, store, spec, "v2", [](CommunicatorOptions& o) {
                       o.relay_chunk_bytes = 4096;
                       o.relay_buffer_bytes = 4096;
                     }));
    RETURN_IF_ERROR(comm->SetRouting(Plan(4, [](int, int) { return 2.0 * kMiB; })));
    routing[rank] = comm->routing((rank + 2) % 4);
    for (uint64_t it = 0; it < 4; ++it) {
      RETURN_IF_ERROR(CheckedAlltoallv(*comm, it, [](int, int) { return 2 * kMiB + 7; }));
    }
    c[rank] = {comm->relay_bytes_sent(), comm->relay_bytes_forwarded(), comm->pieces_resent()};
    return Barrier(*comm);
  });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  uint64_t sent = 0, forwarded = 0;
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(routing[i].relays.empty()) << "rank " << i << " plans no relay to its opposite";
    EXPECT_GT(c[i].relay_sent, 0u) << "rank " << i;
    EXPECT_GT(c[i].forwarded, 0u) << "rank " << i << " relayed nothing";
    sent += c[i].relay_sent;
    forwarded += c[i].forwarded;
  }
  EXPECT_EQ(sent, forwarded);
}

// A relay hop cut while the relay forwards: the destination misses the
// piece, its receipt names it and the origin re-sends it over EPS; every byte
// checked, and the next call works. `second_hop`: the relay kills its link to
// the destination (else the one to the origin).
class RelayCut : public ::testing::TestWithParam<bool> {};

TEST_P(RelayCut, TheOriginResendsThePieceOverEps) {
  const bool second_hop = GetParam();
  const std::string spec = testing::LoOcsSpec("lo-relay-cut", 3, kLine);
  std::vector<Counters> c(3);
  auto st = RunRanks(3, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(rank, n, store, spec));
    RETURN_IF_ERROR(comm->SetRouting(LinePlan(3.0 * kMiB)));
    std::thread killer;
    if (rank == 1) {
      killer = testing::KillDirectLinkWhen(
          *comm, [&] { return comm->relay_bytes_forwarded() > 0; }, second_hop ? 2 : 0);
    }
    // Only h0 -> h2 carries bytes, so the relay's first forwarded chunk is
    // one of them; 48 MiB: 32 MiB relayed in 128 chunks.
    auto bytes = [](int s, int d) { return s == 0 && d == 2 ? 48 * kMiB : 0; };
    absl::Status s = CheckedAlltoallv(*comm, 7, bytes);
    if (killer.joinable()) killer.join();
    RETURN_IF_ERROR(s);
    c[rank] = {comm->relay_bytes_sent(), comm->relay_bytes_forwarded(), comm->pieces_resent()};
    RETURN_IF_ERROR(CheckedAlltoallv(*comm, 8, [](int, int) { return kMiB; }));
    RETURN_IF_ERROR(comm->health());
    return Barrier(*comm);
  });
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  EXPECT_EQ(c[0].resent, 1u) << "the origin re-sends the one relay piece";
  EXPECT_LT(c[1].forwarded, 32 * kMiB) << "the cut came after the relay had forwarded everything";
  std::cout << "forwarded before the cut: " << c[1].forwarded << " bytes\n";
}

INSTANTIATE_TEST_SUITE_P(Hops, RelayCut, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "SecondHop" : "FirstHop";
                         });

// A star's arm: h0 ocs0 (port 1) - h1 ocs0 (port 3); h2 and h3 have no
// circuit.
const char* kArm = "  - {switch: s0, ports: [1, 3]}\n";

// Relays with one hop over EPS (router v2, runtime/planner/routing.h; the
// fluid shares are hand-worked in tests/planner/fluid_model_test.cc):
//  - EpsThenCircuit: h2 and h3 send h0 D each; h0's EPS ingress binds, so
//    part goes h2|h3 -EPS-> h1 -circuit-> h0;
//  - CircuitThenEps: h0 sends h2 and h3 D each; h0's EPS egress binds, so
//    part goes h0 -circuit-> h1 -EPS-> h2|h3.
// Checks that the ranks send the plan's relay shares through h1 (counted at
// the origins, forwarded by h1), that the EPS hop carries no direct-link
// bytes, every byte at the destination. With `cut`, h1 kills its circuit
// while it forwards: the pieces cut come again over EPS, exactly once (every
// byte checked), and the next call works.
struct OneSidedCase {
  bool eps_first = true;
  bool cut = false;
};

class OneSidedRelay : public ::testing::TestWithParam<OneSidedCase> {};

TEST_P(OneSidedRelay, RanksSendThePlansSharesAndLoseNothingAcrossACut) {
  const OneSidedCase c = GetParam();
  const std::string spec = testing::LoOcsSpec("lo-relay-one-sided", 4, kArm);
  const double d = 3.0 * kMiB;
  // The plan and the traffic: hot pairs (2, 0), (3, 0), or (0, 2), (0, 3).
  auto hot = [&](int s, int t) { return c.eps_first ? (t == 0 && s >= 2) : (s == 0 && t >= 2); };
  const uint64_t block = c.cut ? 48 * kMiB : 3 * kMiB;
  const int calls = c.cut ? 1 : 3;
  std::vector<Counters> got(4);
  std::vector<uint64_t> direct(4, 0);
  std::vector<std::vector<PeerRouting>> routing(4, std::vector<PeerRouting>(4));
  auto st = RunRanks(4, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(rank, n, store, spec));
    RETURN_IF_ERROR(comm->SetRouting(Plan(4, [&](int s, int t) { return hot(s, t) ? d : 0.0; })));
    for (int peer = 0; peer < n; ++peer) {
      if (peer != rank) routing[rank][peer] = comm->routing(peer);
    }
    std::thread killer;
    if (c.cut && rank == 1) {
      killer = testing::KillDirectLinkWhen(
          *comm, [&] { return comm->relay_bytes_forwarded() > 0; }, 0);
    }
    absl::Status s;
    for (int it = 0; it < calls && s.ok(); ++it) {
      s = CheckedAlltoallv(*comm, it, [&](int a, int b) { return hot(a, b) ? block : 0; });
    }
    if (killer.joinable()) killer.join();
    RETURN_IF_ERROR(s);
    got[rank] = {comm->relay_bytes_sent(), comm->relay_bytes_forwarded(), comm->pieces_resent()};
    direct[rank] = comm->direct_bytes_sent();
    RETURN_IF_ERROR(CheckedAlltoallv(*comm, 9, [](int, int) { return kMiB; }));
    RETURN_IF_ERROR(comm->health());
    return Barrier(*comm);
  });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  // The plan relays through h1 only, and some of it.
  double want = 0;
  int relaying = 0;
  for (int s = 0; s < 4; ++s) {
    for (int t = 0; t < 4; ++t) {
      if (!hot(s, t)) continue;
      const PeerRouting& r = routing[s][t];
      for (const RelayRoute& rr : r.relays) {
        EXPECT_EQ(rr.rank, 1) << s << "->" << t;
        want += rr.share * static_cast<double>(block) * calls;
      }
      relaying += r.relays.empty() ? 0 : 1;
    }
  }
  ASSERT_GT(relaying, 0) << "the plan relays nothing";
  const uint64_t sent = got[0].relay_sent + got[2].relay_sent + got[3].relay_sent;
  // (A cut first hop fails the origin's sends after it: those are not counted.)
  if (!c.cut || c.eps_first) {
    EXPECT_NEAR(static_cast<double>(sent), want, 2 * 4096.0 * calls) << "relayed bytes";
  }
  EXPECT_EQ(got[1].relay_sent, 0u);
  if (c.eps_first) {
    EXPECT_EQ(direct[2] + direct[3], 0u) << "h2 and h3 have no circuit: the first hop is EPS";
  } else {
    EXPECT_EQ(direct[1], 0u) << "h1 has no circuit to h2 or h3: the second hop is EPS";
  }
  if (!c.cut) {
    EXPECT_EQ(got[1].forwarded, sent);
    if (c.eps_first) EXPECT_EQ(direct[1], sent) << "the second hop is h1's circuit";
    if (!c.eps_first) EXPECT_EQ(direct[0], sent) << "the first hop is h0's circuit";
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i].resent, 0u) << "rank " << i;
  } else {
    const uint64_t resent = got[0].resent + got[2].resent + got[3].resent;
    EXPECT_GE(resent, 1u) << "no relay piece was re-sent over EPS";
    EXPECT_LE(resent, static_cast<uint64_t>(relaying));
    EXPECT_LT(static_cast<double>(got[1].forwarded), want)
        << "the cut came after h1 had forwarded everything";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, OneSidedRelay,
                         ::testing::Values(OneSidedCase{true, false}, OneSidedCase{true, true},
                                           OneSidedCase{false, false}, OneSidedCase{false, true}),
                         [](const ::testing::TestParamInfo<OneSidedCase>& i) {
                           return absl::StrCat(
                               i.param.eps_first ? "EpsThenCircuit" : "CircuitThenEps",
                               i.param.cut ? "Cut" : "");
                         });

// The plan is the dispatch into a hot receiver (h2 and h3 send h0 D each);
// the calls are its combine, the reverse (h0 sends h2 and h3). Each rank
// routes the combine by the plan's reverse, which the counts weigh more on:
// h0 sends circuit-then-EPS through h1 as the reverse's split says (by the
// plan's own split, h0 has no bytes for h2 and h3 and would send them over
// EPS alone); a call like the plan still routes by the plan.
TEST(Relay, ACombineRoutesByThePlansReverse) {
  const std::string spec = testing::LoOcsSpec("lo-relay-reverse", 4, kArm);
  const double d = 3.0 * kMiB;
  std::vector<Counters> got(4);
  std::vector<uint64_t> reversed(4, 0), reversed_after(4, 0);
  std::vector<std::vector<PeerRouting>> routing(4, std::vector<PeerRouting>(4));
  auto st = RunRanks(4, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(rank, n, store, spec));
    RETURN_IF_ERROR(
        comm->SetRouting(Plan(4, [&](int s, int t) { return t == 0 && s >= 2 ? d : 0.0; })));
    for (int peer = 0; peer < n; ++peer) {
      if (peer != rank) routing[rank][peer] = comm->routing(peer, /*reverse=*/true);
    }
    for (int it = 0; it < 2; ++it) {
      RETURN_IF_ERROR(CheckedAlltoallv(
          *comm, it, [](int s, int t) { return s == 0 && t >= 2 ? 3 * kMiB : 0; }));
    }
    got[rank] = {comm->relay_bytes_sent(), comm->relay_bytes_forwarded(), comm->pieces_resent()};
    reversed[rank] = comm->reverse_routed_calls();
    RETURN_IF_ERROR(
        CheckedAlltoallv(*comm, 5, [](int s, int t) { return t == 0 && s >= 2 ? 3 * kMiB : 0; }));
    reversed_after[rank] = comm->reverse_routed_calls();
    return Barrier(*comm);
  });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  double want = 0;
  for (int t : {2, 3}) {
    for (const RelayRoute& rr : routing[0][t].relays) {
      EXPECT_EQ(rr.rank, 1) << "0->" << t;
      want += rr.share * 2 * 3.0 * kMiB;
    }
  }
  ASSERT_GT(want, 0) << "the reverse plan relays nothing";
  EXPECT_EQ(reversed[0], 2u) << "h0 routed its combine by the plan";
  EXPECT_NEAR(static_cast<double>(got[0].relay_sent), want, 2 * 2 * 4096.0);
  EXPECT_EQ(got[1].forwarded, got[0].relay_sent);
  EXPECT_EQ(reversed_after[2], reversed[2]) << "h2 routed a call like the plan by its reverse";
  EXPECT_EQ(reversed_after[3], reversed[3]) << "h3 routed a call like the plan by its reverse";
}

// The relay rank SIGKILLed while it forwards: every other rank returns
// Unavailable naming it, well within twice the timeout (no hang).
TEST(Relay, AKilledRelayIsReportedByTheOthers) {
  const std::string spec = testing::LoOcsSpec("lo-relay-kill", 3, kLine);
  const absl::Duration timeout = absl::Seconds(5);
  const absl::Time start = absl::Now();
  auto st = RunRanks(
      3, RankMode::kProcesses,
      [&](int rank, int n, rendezvous::Store& store) -> absl::Status {
        ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(
                                        rank, n, store, spec, "v2",
                                        [&](CommunicatorOptions& o) { o.timeout = timeout; }));
        RETURN_IF_ERROR(comm->SetRouting(LinePlan(3.0 * kMiB)));
        for (uint64_t it = 0; it < 100000; ++it) {
          RETURN_IF_ERROR(CheckedAlltoallv(
              *comm, it, [](int s, int d) { return s + d == 2 ? 6 * kMiB : kMiB; }));
        }
        return absl::InternalError("the relay was never killed");
      },
      absl::Seconds(60), /*kill_rank=*/1, absl::Milliseconds(1500));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1500) + 2 * timeout + absl::Seconds(5));
  for (int r : {0, 2}) {
    EXPECT_EQ(st[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << ": " << st[r];
    EXPECT_NE(st[r].message().find("rank 1"), std::string::npos) << "rank " << r << ": " << st[r];
  }
}

// The relay dies at a known point (it SIGKILLs itself after forwarding
// 1 MiB of the 2 x 4 MiB it relays between h0 and h2): each survivor's call
// fails naming rank 1, but only after the other survivor's block arrived
// whole: the pieces the relay had not forwarded came again over EPS, asked
// for by their destination (at least one re-sent; every byte checked).
TEST(Relay, AKilledRelayLosesNothingBetweenTheOthers) {
  const std::string spec = testing::LoOcsSpec("lo-relay-die", 3, kLine);
  auto st = RunRanks(
      3, RankMode::kProcesses,
      [&](int rank, int n, rendezvous::Store& store) -> absl::Status {
        ASSIGN_OR_RETURN(auto comm, testing::MakeLoOcsComm(rank, n, store, spec, "v2",
                                                           [](CommunicatorOptions& o) {
                                                             o.timeout = absl::Seconds(10);
                                                             o.relay_chunk_bytes = 64 << 10;
                                                           }));
        RETURN_IF_ERROR(comm->SetRouting(LinePlan(6.0 * kMiB)));
        if (rank == 1) comm->TestOnlyDieAfterForwarding(kMiB);
        const std::vector<int> intact = rank == 1 ? std::vector<int>{} : std::vector<int>{2 - rank};
        absl::Status s = CheckedAlltoallv(
            *comm, 0, [](int a, int b) { return a + b == 2 ? 6 * kMiB : kMiB; }, intact);
        if (s.ok()) return absl::InternalError("the call succeeded though the relay died");
        if (s.code() == absl::StatusCode::kDataLoss) return s;
        // The counter travels back in the message (the ranks are processes).
        return absl::Status(s.code(),
                            absl::StrCat(s.message(), " [resent ", comm->pieces_resent(), "]"));
      },
      absl::Seconds(60));
  uint64_t resent = 0;
  for (int r : {0, 2}) {
    EXPECT_EQ(st[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << ": " << st[r];
    EXPECT_NE(st[r].message().find("rank 1"), std::string::npos) << "rank " << r << ": " << st[r];
    const size_t at = st[r].message().rfind("[resent ");
    ASSERT_NE(at, std::string::npos) << "rank " << r << ": " << st[r];
    resent += std::stoull(std::string(st[r].message().substr(at + 8)));
    std::cout << "rank " << r << ": " << st[r] << "\n";
  }
  EXPECT_GE(resent, 1u) << "no relay piece was re-sent over EPS";
}

// CutRelays and the chunking, hand-worked.
TEST(RelayCutting, SharesRoundToPagesAndTheRestKeepsTheEpsShare) {
  // 3 MiB, 2/3 relayed: 2 MiB (512 pages); EPS 1/3 of the whole is all of
  // the 1 MiB rest.
  internal::RelayCut c = CutRelays(3 * kMiB, 1.0 / 3.0, {2.0 / 3.0});
  EXPECT_EQ(c.lens, (std::vector<uint64_t>{2 * kMiB}));
  EXPECT_NEAR(c.rest_eps_share, 1.0, 1e-12);
  // 4 MiB: relays 1/4 and 1/4 (1 MiB each), EPS 1/4 of the whole = 1/2 of
  // the 2 MiB rest.
  c = CutRelays(4 * kMiB, 0.25, {0.25, 0.25});
  EXPECT_EQ(c.lens, (std::vector<uint64_t>{kMiB, kMiB}));
  EXPECT_NEAR(c.rest_eps_share, 0.5, 1e-12);
  // 5000 bytes, 0.5 relayed: round(2500 / 4096) = 1 page.
  c = CutRelays(5000, 0, {0.5});
  EXPECT_EQ(c.lens, (std::vector<uint64_t>{4096}));
  EXPECT_EQ(c.rest_eps_share, 0);
  // Shares past the bytes: the second relay gets what is left (8 KiB - 8 KiB = 0).
  c = CutRelays(8192, 0, {1.0, 0.5});
  EXPECT_EQ(c.lens, (std::vector<uint64_t>{8192, 0}));
  // Nothing to send: nothing relayed.
  c = CutRelays(0, 0.5, {0.5});
  EXPECT_EQ(c.lens, (std::vector<uint64_t>{0}));
  EXPECT_EQ(c.rest_eps_share, 0);
  // 10 KiB in 4 KiB chunks: 4 + 4 + 2.
  EXPECT_EQ(RelayChunkCount(10240, 4096), 3u);
  EXPECT_EQ(RelayChunkLen(10240, 4096, 0), 4096u);
  EXPECT_EQ(RelayChunkLen(10240, 4096, 2), 2048u);
  EXPECT_EQ(RelayChunkLen(10240, 4096, 3), 0u);
  EXPECT_EQ(RelayChunkCount(8192, 4096), 2u);
}

}  // namespace
}  // namespace mixnet::collectives
