// NCCL plugin relays (router v2's two-hop paths; plugins/nccl_net/
// path_mover_relay.cc, relay_forwarder.h) on loopback, driven through the
// exported v11 API: four forked ranks, each a host of a spec whose EPS NICs
// (1 Gbit/s) and OCS NICs (3 Gbit/s) are distinct 127.x addresses, circuits
// h0-h1 and h2-h3, no controller; a static demand of equal bytes h0 <-> h3
// that allows relays. Hand-worked: h0 and h3 have no circuit, and each
// one's single EPS NIC bounds what it sends directly (x per second); the
// relays circuit-then-EPS through its circuit partner and EPS-then-circuit
// through the other's partner add two paths that share no NIC with each
// other, so router v2 relays: the pair finishes in half the time of EPS alone.
//  * Ranks 0 and 3 stream mixed sizes on three tags to each other over lanes
//    with relay stripes (every byte and size checked, FIFO per tag); their
//    split lines and ranks 1 and 2's relays match the hand-worked cut below.
//  * Rank 0's circuit (to relay host h1) cut mid-stream: the relayed comms
//    leave their relay lanes (a failover, or a move to EPS while rank 0's
//    comm to h1 recovers) and every message arrives once and in order.
// Runs on the test thread; the ranks are forked processes (plugin_harness.h).

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"
#include "tests/nccl_net/stream.h"
#include "tests/nccl_net/two_fabric_spec.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::TempDir;

constexpr int kWorld = 4;

std::string OcsAddress(int host) { return HostAddress("127.0.55.", host); }

std::string SpecYaml() {
  return TwoFabricSpecYaml(TwoFabricSpec{.name = "nccl_relay",
                                         .hosts = kWorld,
                                         .eps_prefix = "127.0.54.",
                                         .ocs_prefix = "127.0.55.",
                                         .eps_gbps = 1,
                                         .ocs_gbps = 3,
                                         .circuits = {{1, 2}, {3, 4}}});
}

constexpr size_t kSizes[6] = {1000, 1048576, 65535, 300000, 65536, 3145729};

StreamPlan MixedPlan(int rounds) {
  StreamPlan p;
  for (int k = 0; k < 6 * rounds; ++k) {
    p.sizes.push_back(kSizes[k % 6]);
    p.tags.push_back(1 + (k / 2) % 3);
  }
  p.send_window = p.recv_window = 16;
  return p;
}

int Partner(int me) { return me == 0 ? 3 : me == 3 ? 0 : -1; }

// Until ranks 0 and 3 both run their send comm to each other over a lane
// with a relay stripe through each of h1 and h2.
absl::Status WaitOnRelays(const Net& net, const Mesh& m, int me, Board* b) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  const std::string to = absl::StrCat("send comm to h", Partner(me));
  for (int seq = 0;; ++seq) {
    RETURN_IF_ERROR(ExchangeAll(net, m, me, kWorld, 4096, seq));
    const bool mine = Partner(me) < 0 ||
                      (CountLoggedLines(to, "switched to") > 0 &&
                       CountLoggedLines(to, "-> h1 ") > 0 && CountLoggedLines(to, "-> h2 ") > 0);
    ASSIGN_OR_RETURN(bool all, AllAgree(b, me, mine));
    if (all) return absl::OkStatus();
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": the comms never moved onto relays; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
  }
}

std::string SplitLine(int partner) {
  for (const std::string& l : LoggedLines()) {
    if (absl::StrContains(l, absl::StrCat("send comm to h", partner)) &&
        absl::StrContains(l, " part(s): ")) {
      return l;
    }
  }
  return "";
}

class NcclNetRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    spec_ = dir_.path() + "/spec.yaml";
    std::ofstream(spec_) << SpecYaml();
    demand_ = dir_.path() + "/demand.json";
    std::ofstream(demand_) << R"({"hosts": ["h0", "h1", "h2", "h3"], "relay": true,
      "bytes": [0, 0, 0, 1e9,  0, 0, 0, 0,  0, 0, 0, 0,  1e9, 0, 0, 0]})";
  }

  absl::Status Run(const std::function<absl::Status(int, Board*)>& fn) {
    return RunRanks(kWorld, fn, absl::Seconds(90), [&](int rank) {
      setenv("MIXNET_CLUSTER_SPEC", spec_.c_str(), 1);
      setenv("MIXNET_HOST", absl::StrCat("h", rank).c_str(), 1);
      setenv("MIXNET_NCCL_STATIC_DEMAND", demand_.c_str(), 1);
      setenv("MIXNET_ROUTER", "v2", 1);
      unsetenv("MIXNET_CONTROLLER");
      unsetenv("MIXNET_NCCL_SPLIT_MIN_BYTES");
      setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
      return absl::OkStatus();
    });
  }

  TempDir dir_;
  std::string spec_, demand_;
};

// The split, hand-worked: the EPS share is (nearly) 0 and the two relays
// share the rest equally, so a split part of S bytes keeps the 64 KiB
// minimum on the lane's own (EPS) connection and the relay stripes share
// S - 64 KiB, each floor((S - 65536) / 2 / 4096) pages (multipath.h,
// StripeCut):
//   1048576  491520 + 491520 on the relays
//   300000   114688 + 114688 (234464 / 2 = 117232: 28 pages), 70624 own
//   3145729  1540096 + 1540096 (376 pages), 65537 own
// The 1000, 65535 and 65536 B parts are not above the minimum: whole on
// the lane's own connection. Four rounds: 12 parts, 17977220 bytes,
// 17170432 on the stripes, 8585216 and 12 pieces through each relay host.
TEST_F(NcclNetRelayTest, RelayedStreamsArriveInOrderPerTag) {
  absl::Status s = Run([](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    RETURN_IF_ERROR(WaitOnRelays(net, m, me, b));
    if (Partner(me) >= 0) RETURN_IF_ERROR(Stream(net, m, me, Partner(me), MixedPlan(4)));
    RETURN_IF_ERROR(Barrier(b));
    NT_REQUIRE(CountLoggedLines("failed over") == 0, "rank ", me,
               ": a failover without a cut; log:\n", absl::StrJoin(LoggedLines(), "\n"));
    // The origins close first: their lanes' relay connections close in
    // order, and the relay hosts drain.
    if (Partner(me) >= 0) RETURN_IF_ERROR(CloseMesh(net, m));
    RETURN_IF_ERROR(Barrier(b));
    for (const std::string& l : LoggedLines()) {
      if (absl::StrContains(l, "relay")) fprintf(stderr, "rank %d: %s\n", me, l.c_str());
    }
    if (Partner(me) >= 0) {
      const std::string split = SplitLine(Partner(me));
      const std::string log = absl::StrJoin(LoggedLines(), "\n");
      NT_REQUIRE(absl::StrContains(split,
                                   "split 12 part(s): 17977220 bytes on their lanes, 0 on home "
                                   "(17170432 on stripes)"),
                 "rank ", me, ": not the hand-worked split; log:\n", log);
      return absl::OkStatus();
    }
    // Each relay host forwards for both directions; once the origins closed,
    // each relay ends (in order, or cut off when an origin's teardown
    // resets its end: everything had arrived by then) and says what it
    // carried.
    const std::string ended = absl::StrCat("via h", me, ": 12 piece(s), 8585216 bytes forwarded;");
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (CountLoggedLines(ended) < 2 && absl::Now() < deadline)
      absl::SleepFor(absl::Milliseconds(5));
    NT_REQUIRE(CountLoggedLines(ended) == 2 && CountLoggedLines(" bytes forwarded;") == 2, "rank ",
               me, ": expected two relays '", ended, "'; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
    return CloseMesh(net, m);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(NcclNetRelayTest, ARelayHostsCircuitCutMidStreamLosesNothing) {
  absl::Status s = Run([](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    RETURN_IF_ERROR(WaitOnRelays(net, m, me, b));
    RETURN_IF_ERROR(Barrier(b));
    StreamPlan plan;
    for (int k = 0; k < 40; ++k) {
      plan.sizes.push_back((1 << 20) + 4099 * k);
      plan.tags.push_back(1 + k % 2);
    }
    plan.linger = absl::Milliseconds(300);  // a late write fails, not crashes
    int cut = -1;
    if (me == 0) {
      // Rank 0's own circuit (to its relay h1) dies after 10 sends: hop 1
      // of its relay through h1, hop 2 of rank 3's.
      plan.on_send_done = [&](int done) {
        if (done == 10 && cut < 0) cut = ShutDownSocketsOn(OcsAddress(me));
      };
    }
    if (Partner(me) >= 0) {
      absl::Status streamed = Stream(net, m, me, Partner(me), plan);
      if (!streamed.ok()) {
        for (const std::string& l : LoggedLines()) fprintf(stderr, "rank %d: %s\n", me, l.c_str());
        fprintf(stderr, "rank %d: %s\n", me, streamed.ToString().c_str());
        return streamed;
      }
    }
    if (me == 0) NT_REQUIRE(cut > 0, "rank 0 found no circuit socket to cut");
    RETURN_IF_ERROR(Barrier(b));
    for (const std::string& l : LoggedLines()) {
      if (absl::StrContains(l, "fail") || absl::StrContains(l, "relay"))
        fprintf(stderr, "rank %d: %s\n", me, l.c_str());
    }
    const std::string log = absl::StrJoin(LoggedLines(), "\n");
    if (Partner(me) >= 0) {
      // Off the relay lane: failed over, or moved in order to EPS (a comm
      // of ours to the relay host failed over, so the relay split is not
      // used until it is back).
      const std::string to = absl::StrCat("send comm to h", Partner(me));
      NT_REQUIRE(CountLoggedLines(to, "failed over to") +
                         CountLoggedLines(to, "switched to eps0 -> eps0 (EPS)") >
                     0,
                 "rank ", me, ": the relayed send comm never left its relays; log:\n", log);
    }
    return CloseMesh(net, m);
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace mixnet::nccl_test
