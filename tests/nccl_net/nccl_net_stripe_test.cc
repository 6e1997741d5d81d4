// NCCL plugin multipath over several circuits (router v2's striped lanes,
// plugins/nccl_net/multipath.h) on loopback, driven through the exported v11
// API: two forked ranks, each a host with an EPS NIC (1 Gbit/s) and two OCS
// NICs (3 Gbit/s each), all distinct 127.x addresses, joined by two
// circuits; no controller, a static demand of equal bytes each way gives
// router v2's weights. Hand-worked: one pair, EPS 1 and circuits 3 + 3
// Gbit/s, so the fluid model finishes all three at once with 1/7 of the
// bytes on EPS and the rest halved over the circuits.
//  * The cut itself (StripeCut), by hand.
//  * Mixed sizes on three tags, 16 sends and 16 receives in flight, every
//    receive 64 bytes larger than its message: each comm runs one lane over
//    both circuits, every byte and size checked (FIFO per tag), and the
//    sender's split counters equal the hand-worked pieces (below).
//  * One circuit cut mid-transfer (rank 0 shuts down its sockets on the
//    second OCS NIC only, no PREPARE): both ends fail over to home, every
//    message arrives once and in order, and the comms go on.
//  * MIXNET_ROUTER=v1: one circuit per comm, nothing striped.
// Runs on the test thread; the ranks are forked processes (plugin_harness.h).

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "plugins/nccl_net/multipath.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"
#include "tests/nccl_net/stream.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::TempDir;

constexpr int kWorld = 2;

std::string Address(const char* prefix, int host) { return absl::StrCat(prefix, host + 1); }

// h<i>: eps0 127.0.61.<i+1>, ocs0 127.0.62.<i+1> (port i+1), ocs1
// 127.0.63.<i+1> (port i+3); circuits 1-2 and 3-4.
std::string SpecYaml() {
  std::string y =
      "name: nccl_stripe\nocs_switches:\n  - {name: ocs0, ports: 4, switch_ms: 1}\nhosts:\n";
  for (int h = 0; h < kWorld; ++h) {
    absl::StrAppend(&y, "  - name: h", h, "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: ", Address("127.0.61.", h),
                    "/32, gbps: 1}\n",
                    "      - {name: ocs0, role: ocs, address: ", Address("127.0.62.", h),
                    "/32, gbps: 3, switch: ocs0, port: ", h + 1, "}\n",
                    "      - {name: ocs1, role: ocs, address: ", Address("127.0.63.", h),
                    "/32, gbps: 3, switch: ocs0, port: ", h + 3, "}\n");
  }
  y += "regions:\n  - {name: r0, hosts: [h0, h1]}\n";
  y += "circuits:\n  - {switch: ocs0, ports: [1, 2]}\n  - {switch: ocs0, ports: [3, 4]}\n";
  return y;
}

// The mixed stream: message k has size kSizes[k % 6] and tag 1 + (k / 2) % 3.
// EPS share 1/7: EPS gets round(S / 7 / 4096) pages, the lane the rest but
// at least 64 KiB; the lane's piece a is cut over the two circuits by rate
// (3:3): the second circuit gets floor(a / 2 / 4096) pages, the first the
// rest (at least 64 KiB):
//   1000     whole on the first circuit (below 64 KiB, no header)
//   1048576  EPS 151552 (36.57: 37 pages); a = 897024: 450560 + 446464 (109 pages)
//   65535    whole
//   300000   EPS 40960 (10.46: 10 pages); a = 259040: 132064 + 126976 (31 pages)
//   65536    EPS 8192 would leave 57344 < 64 KiB: a = 65536, EPS 0, whole on the
//            first circuit (a is not above 64 KiB: no stripe piece)
//   3145729  EPS 450560 (109.71: 110 pages); a = 2695169: 1347585 + 1347584 (329 pages)
constexpr size_t kSizes[6] = {1000, 1048576, 65535, 300000, 65536, 3145729};
constexpr int kRounds = 6;
// Per round: 3 parts split (those with an EPS piece), 897024 + 259040 +
// 2695169 bytes on the lane, 151552 + 40960 + 450560 on EPS, of the lane's
// 446464 + 126976 + 1347584 on the second circuit.
constexpr uint64_t kSplitParts = 3 * kRounds;
constexpr uint64_t kLaneBytes = 3851233ull * kRounds;
constexpr uint64_t kEpsBytes = 643072ull * kRounds;
constexpr uint64_t kStripeBytes = 1921024ull * kRounds;

StreamPlan MixedPlan() {
  StreamPlan p;
  for (int k = 0; k < 6 * kRounds; ++k) {
    p.sizes.push_back(kSizes[k % 6]);
    p.tags.push_back(1 + (k / 2) % 3);
  }
  p.send_window = p.recv_window = 16;
  return p;
}

// Until both comms of this rank run over a lane of both circuits
// (`striped`), or over one circuit alone.
absl::Status WaitOnCircuits(const Net& net, const Mesh& m, int me, Board* b, bool striped) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (int seq = 0;; ++seq) {
    RETURN_IF_ERROR(ExchangeAll(net, m, me, kWorld, 4096, seq));
    int on = 0;
    for (const std::string& l : LoggedLines()) {
      if (!absl::StrContains(l, "switched to ocs")) continue;
      on += striped ? absl::StrContains(l, "split from 65536 B) + ocs")
                    : !absl::StrContains(l, " + ocs") && !absl::StrContains(l, "split from");
    }
    ASSIGN_OR_RETURN(bool all, AllAgree(b, me, on == 2));
    if (all) return absl::OkStatus();
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": the comms never moved onto ",
               striped ? "both circuits" : "one circuit", "; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
  }
}

// Shuts down this process's connected sockets on its second OCS NIC: both
// ends of every connection over circuit 3-4 see it end (a cut, found at
// once); circuit 1-2 stays up.
int CutSecondCircuit(int me) { return ShutDownSocketsOn(Address("127.0.63.", me)); }

// "split N part(s): A bytes on their lanes, B on home (C on stripes)" of the send comm.
std::string SplitLine() {
  for (const std::string& l : LoggedLines()) {
    if (absl::StrContains(l, "send comm to") && absl::StrContains(l, " part(s): ")) return l;
  }
  return "";
}

class NcclNetStripeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    spec_ = dir_.path() + "/spec.yaml";
    std::ofstream(spec_) << SpecYaml();
    demand_ = dir_.path() + "/demand.json";
    std::ofstream(demand_) << R"({"hosts": ["h0", "h1"], "bytes": [0, 1e9, 1e9, 0]})";
  }

  absl::Status Run(const std::string& router, const std::function<absl::Status(int, Board*)>& fn) {
    return RunRanks(kWorld, fn, absl::Seconds(60), [&](int rank) {
      setenv("MIXNET_CLUSTER_SPEC", spec_.c_str(), 1);
      setenv("MIXNET_HOST", absl::StrCat("h", rank).c_str(), 1);
      setenv("MIXNET_NCCL_STATIC_DEMAND", demand_.c_str(), 1);
      setenv("MIXNET_ROUTER", router.c_str(), 1);
      unsetenv("MIXNET_CONTROLLER");
      unsetenv("MIXNET_NCCL_SPLIT_MIN_BYTES");
      setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
      return absl::OkStatus();
    });
  }

  TempDir dir_;
  std::string spec_, demand_;
};

TEST(StripeCutTest, HandWorkedCuts) {
  using V = std::vector<size_t>;
  // Halves by rate, the second rounded down to pages, the first the rest.
  EXPECT_EQ(nccl::StripeCut(897024, {3, 3}, 65536), (V{450560, 446464}));
  EXPECT_EQ(nccl::StripeCut(2695169, {3, 3}, 65536), (V{1347585, 1347584}));
  // Halving would leave the first 50848 < 64 KiB: the second gets what
  // lies above 64 KiB (34464), rounded down to 8 pages.
  EXPECT_EQ(nccl::StripeCut(100000, {3, 3}, 65536), (V{67232, 32768}));
  // Three circuits 4:2:2 of 1 MiB: 64 pages for each further one.
  EXPECT_EQ(nccl::StripeCut(1 << 20, {4, 2, 2}, 65536), (V{524288, 262144, 262144}));
  // Unknown rates count as equal.
  EXPECT_EQ(nccl::StripeCut(1 << 20, {0, 0}, 65536), (V{524288, 524288}));
  // Not above the threshold, or no stripes: whole.
  EXPECT_EQ(nccl::StripeCut(65536, {3, 3}, 65536), (V{65536, 0}));
  EXPECT_EQ(nccl::StripeCut(1 << 20, {3}, 65536), (V{1 << 20}));
  // A slow further circuit (1 of 7) of 1 MiB: 1048576 / 7 = 149796, 36 pages.
  EXPECT_EQ(nccl::StripeCut(1 << 20, {6, 1}, 65536), (V{901120, 147456}));
}

TEST_F(NcclNetStripeTest, MixedSizesStripedOverBothCircuitsInOrderPerTag) {
  absl::Status s = Run("v2", [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    RETURN_IF_ERROR(WaitOnCircuits(net, m, me, b, /*striped=*/true));
    RETURN_IF_ERROR(Stream(net, m, me, me ^ 1, MixedPlan()));
    RETURN_IF_ERROR(Barrier(b));
    NT_REQUIRE(CountLoggedLines("failed over") == 0, "rank ", me,
               ": a failover without a cut; log:\n", absl::StrJoin(LoggedLines(), "\n"));
    NT_REQUIRE(CountLoggedLines("EPS shares of split peers: h", " 0.142857") == 1, "rank ", me,
               ": router v2 should give EPS 1/7; log:\n", absl::StrJoin(LoggedLines(), "\n"));
    RETURN_IF_ERROR(CloseMesh(net, m));
    const std::string want =
        absl::StrCat("split ", kSplitParts, " part(s): ", kLaneBytes, " bytes on their lanes, ",
                     kEpsBytes, " on home (", kStripeBytes, " on stripes)");
    fprintf(stderr, "rank %d: %s\n", me, SplitLine().c_str());
    NT_REQUIRE(absl::StrContains(SplitLine(), want), "rank ", me, ": expected '", want, "'; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

// One of the two circuits dies under a stream of 1 MiB messages (and the
// mixed one, with the receiver behind): the striped lane is lost as a whole,
// both ends fail over to home, nothing is lost or duplicated.
TEST_F(NcclNetStripeTest, OneCircuitCutMidTransferLosesNothing) {
  StreamPlan big;
  for (int k = 0; k < 40; ++k) {
    big.sizes.push_back((1 << 20) + 4099 * k);
    big.tags.push_back(1 + k % 2);
  }
  StreamPlan behind = MixedPlan();
  behind.recv_window = 3;
  for (const StreamPlan& p : {big, behind}) {
    absl::Status s = Run("v2", [plan = p](int me, Board* b) mutable -> absl::Status {
      ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
      ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
      RETURN_IF_ERROR(WaitOnCircuits(net, m, me, b, /*striped=*/true));
      RETURN_IF_ERROR(Barrier(b));
      int cut = -1;
      plan.linger = absl::Milliseconds(300);  // a late write fails, not crashes
      if (me == 0) {
        plan.on_send_done = [&](int done) {
          if (done == 10 && cut < 0) cut = CutSecondCircuit(me);
        };
      }
      absl::Status streamed = Stream(net, m, me, me ^ 1, plan);
      if (!streamed.ok()) {
        fprintf(stderr, "rank %d: %s\n", me, streamed.ToString().c_str());
        return streamed;
      }
      if (me == 0) NT_REQUIRE(cut > 0, "rank 0 found no socket on its second circuit to cut");
      RETURN_IF_ERROR(Barrier(b));
      for (int i = 0; i < 3; ++i) {
        RETURN_IF_ERROR(ExchangeAll(net, m, me, kWorld, 300000, 100 + i));
      }
      RETURN_IF_ERROR(Barrier(b));
      RETURN_IF_ERROR(CloseMesh(net, m));
      for (const std::string& l : LoggedLines()) {
        if (absl::StrContains(l, "failed over") || absl::StrContains(l, " part(s): "))
          fprintf(stderr, "rank %d: %s\n", me, l.c_str());
      }
      NT_REQUIRE(CountLoggedLines("send comm to", "failed over to") > 0 &&
                     CountLoggedLines("recv comm from", "failed over to") > 0,
                 "rank ", me, ": both comms should have failed over; log:\n",
                 absl::StrJoin(LoggedLines(), "\n"));
      NT_REQUIRE(absl::StrContains(SplitLine(), "on stripes"), "rank ", me,
                 ": nothing went over the second circuit before the cut: ", SplitLine());
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST_F(NcclNetStripeTest, RouterV1KeepsOneCircuitPerComm) {
  absl::Status s = Run("v1", [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    RETURN_IF_ERROR(WaitOnCircuits(net, m, me, b, /*striped=*/false));
    RETURN_IF_ERROR(Stream(net, m, me, me ^ 1, MixedPlan()));
    RETURN_IF_ERROR(Barrier(b));
    RETURN_IF_ERROR(CloseMesh(net, m));
    NT_REQUIRE(SplitLine().empty() && CountLoggedLines(" + ocs") == 0, "rank ", me,
               ": router v1 striped or split parts; log:\n", absl::StrJoin(LoggedLines(), "\n"));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace mixnet::nccl_test
