// NCCL plugin multipath (router v2; plugins/nccl_net/multipath.h) on
// loopback, driven through the exported v11 API: two forked ranks, each a
// host of a spec whose EPS NICs (1 Gbit/s) and OCS NICs (3 Gbit/s) are
// distinct 127.x addresses, joined by the spec's circuit, no controller; a
// static demand (MIXNET_NCCL_STATIC_DEMAND) of equal bytes each way gives
// router v2's split. Hand-worked: one pair, EPS 1 and circuit 3 Gbit/s, so
// the fluid model finishes both at once with 1/4 of the bytes on EPS.
//  * Mixed sizes on three tags, 16 sends and 16 receives in flight, every
//    receive 64 bytes larger than its message: every byte and size checked
//    (FIFO per tag), and the sender's split counters equal the hand-worked
//    pieces (below).
//  * A lane cut mid-transfer: rank 0 shuts its circuit sockets down after
//    10 of 40 messages of 1 MiB (no PREPARE): both ends fail over to their
//    home EPS lanes, every message arrives once and in order, no NCCL call
//    fails, and the comms go on. Again with the mixed stream and only 3
//    receives posted ahead of 16 sends (parts only one end had posted at
//    the cut: RESENT, multipath.h).
//  * MIXNET_ROUTER=v1 with the same demand: the comms run over the circuit
//    alone, as before multipath (nothing split, no split lane).
// Runs on the test thread; the ranks are forked processes (plugin_harness.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

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
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::TempDir;

constexpr int kWorld = 2;

std::string OcsAddress(int host) { return absl::StrCat("127.0.52.", host + 1); }

std::string SpecYaml() {
  std::string y = "name: nccl_multipath\nocs_switches:\n  - {name: ocs0, ports: 2, switch_ms: 1}\n";
  y += "hosts:\n";
  for (int h = 0; h < kWorld; ++h) {
    absl::StrAppend(&y, "  - name: h", h, "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: 127.0.51.", h + 1, "/32, gbps: 1}\n",
                    "      - {name: ocs0, role: ocs, address: ", OcsAddress(h),
                    "/32, gbps: 3, switch: ocs0, port: ", h + 1, "}\n");
  }
  y += "regions:\n  - {name: r0, hosts: [h0, h1]}\n";
  y += "circuits:\n  - {switch: ocs0, ports: [1, 2]}\n";
  return y;
}

// The mixed stream: message k has size kSizes[k % 6] and tag 1 + (k / 2) % 3,
// so each tag carries small and split parts in turn. With share 1/4 and
// parts split from 64 KiB (EPS bytes: round(S / 4 / 4096) pages; the circuit
// keeps at least 64 KiB):
//   1000     whole (below 64 KiB)
//   1048576  circuit 786432, EPS 262144 (64 pages)
//   65535    whole
//   300000   circuit 226272, EPS 73728 (75000 / 4096 = 18.3: 18 pages)
//   65536    circuit 65536 (16384 on EPS would leave 49152 < 64 KiB), EPS 0
//   3145729  circuit 2359297, EPS 786432 (192.00006: 192 pages)
constexpr size_t kSizes[6] = {1000, 1048576, 65535, 300000, 65536, 3145729};
constexpr int kRounds = 6;
// Per round: 3 parts split, 786432 + 226272 + 2359297 bytes on the circuit
// and 262144 + 73728 + 786432 on EPS.
constexpr uint64_t kSplitParts = 3 * kRounds;
constexpr uint64_t kCircuitBytes = 3372001ull * kRounds;
constexpr uint64_t kEpsBytes = 1122304ull * kRounds;

StreamPlan MixedPlan() {
  StreamPlan p;
  for (int k = 0; k < 6 * kRounds; ++k) {
    p.sizes.push_back(kSizes[k % 6]);
    p.tags.push_back(1 + (k / 2) % 3);
  }
  p.send_window = p.recv_window = 16;
  return p;
}

int CountLines(const std::string& a, const std::string& b = "") {
  int n = 0;
  for (const std::string& l : LoggedLines())
    n += absl::StrContains(l, a) && absl::StrContains(l, b);
  return n;
}

// Until both comms of this rank (send to and receive from the partner) run
// over the circuit; `split`: a split lane.
absl::Status WaitOnCircuit(const Net& net, const Mesh& m, int me, Board* b, bool split) {
  const std::string lane = split ? "(circuit ocs0:1-2, split from 65536 B)" : "(circuit ocs0:1-2)";
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (int seq = 0;; ++seq) {
    RETURN_IF_ERROR(ExchangeAll(net, m, me, kWorld, 4096, seq));
    ASSIGN_OR_RETURN(bool all, AllAgree(b, me, CountLines("switched to ocs0 -> ocs0", lane) == 2));
    if (all) return absl::OkStatus();
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": the comms never moved onto ", lane,
               "; log:\n", absl::StrJoin(LoggedLines(), "\n"));
  }
}

// Shuts down this process's connected sockets on its OCS address: both ends
// of every circuit lane see the connection end (a cut, found at once).
int CutCircuitSockets(int me) {
  int cut = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in local{}, peer{};
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        local.sin_family != AF_INET ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) {
      continue;
    }
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &local.sin_addr, ip, sizeof(ip));
    if (OcsAddress(me) != ip) continue;
    if (shutdown(fd, SHUT_RDWR) == 0) ++cut;
  }
  return cut;
}

// "split N part(s): A bytes on their lanes, B on home" of the send comm.
std::string SplitLine() {
  for (const std::string& l : LoggedLines()) {
    if (absl::StrContains(l, "send comm to") && absl::StrContains(l, " part(s): ")) return l;
  }
  return "";
}

class NcclNetMultipathTest : public ::testing::Test {
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

  // Streams `plan` both ways; rank 0 cuts its circuit sockets once 10 of
  // its sends completed. Both comms of each rank must fail over and the
  // comms go on.
  absl::Status CutMidStream(StreamPlan plan);

  TempDir dir_;
  std::string spec_, demand_;
};

TEST_F(NcclNetMultipathTest, MixedSizesSplitByTheRoutingInOrderPerTag) {
  absl::Status s = Run("v2", [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    RETURN_IF_ERROR(WaitOnCircuit(net, m, me, b, /*split=*/true));
    RETURN_IF_ERROR(Stream(net, m, me, me ^ 1, MixedPlan()));
    RETURN_IF_ERROR(Barrier(b));
    // (Before closing: a peer's close ends the lanes.)
    NT_REQUIRE(CountLines("failed over") == 0, "rank ", me, ": a failover without a cut; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
    RETURN_IF_ERROR(CloseMesh(net, m));
    const std::string want = absl::StrCat("split ", kSplitParts, " part(s): ", kCircuitBytes,
                                          " bytes on their lanes, ", kEpsBytes, " on home");
    fprintf(stderr, "rank %d: %s\n", me, SplitLine().c_str());
    NT_REQUIRE(absl::StrContains(SplitLine(), want), "rank ", me, ": expected '", want, "'; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
    for (const std::string& l : LoggedLines()) {
      if (absl::StrContains(l, "failed over")) fprintf(stderr, "rank %d: %s\n", me, l.c_str());
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(NcclNetMultipathTest, ALaneCutMidTransferLosesNothing) {
  StreamPlan plan;
  for (int k = 0; k < 40; ++k) {
    plan.sizes.push_back((1 << 20) + 4099 * k);
    plan.tags.push_back(1 + k % 2);
  }
  absl::Status s = CutMidStream(plan);
  EXPECT_TRUE(s.ok()) << s;
}

// The mixed stream with 16 sends but 3 receives posted ahead: at the cut
// the sender has split parts the receiver has not posted (it posts them
// later on home, told by RESENT to expect their headers), and the receiver
// re-posts parts the sender has yet to send (whole, on home).
TEST_F(NcclNetMultipathTest, ACutWithTheReceiverBehindLosesNothing) {
  StreamPlan plan = MixedPlan();
  plan.recv_window = 3;
  absl::Status s = CutMidStream(plan);
  EXPECT_TRUE(s.ok()) << s;
}

absl::Status NcclNetMultipathTest::CutMidStream(StreamPlan plan) {
  return Run("v2", [plan](int me, Board* b) mutable -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    RETURN_IF_ERROR(WaitOnCircuit(net, m, me, b, /*split=*/true));
    RETURN_IF_ERROR(Barrier(b));
    int cut = -1;
    if (me == 0) {
      plan.on_send_done = [&](int done) {
        if (done == 10 && cut < 0) cut = CutCircuitSockets(me);
      };
    }
    RETURN_IF_ERROR(Stream(net, m, me, me ^ 1, plan));
    if (me == 0) NT_REQUIRE(cut > 0, "rank 0 found no circuit socket to cut");
    RETURN_IF_ERROR(Barrier(b));
    // The comms go on (over EPS).
    for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(ExchangeAll(net, m, me, kWorld, 300000, 100 + i));
    RETURN_IF_ERROR(Barrier(b));
    RETURN_IF_ERROR(CloseMesh(net, m));
    for (const std::string& l : LoggedLines()) {
      if (absl::StrContains(l, "failed over") || absl::StrContains(l, " part(s): "))
        fprintf(stderr, "rank %d: %s\n", me, l.c_str());
    }
    NT_REQUIRE(CountLines("send comm to", "failed over to") > 0 &&
                   CountLines("recv comm from", "failed over to") > 0,
               "rank ", me, ": both comms should have failed over; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
    NT_REQUIRE(!SplitLine().empty(), "rank ", me, ": nothing was split before the cut");
    return absl::OkStatus();
  });
}

TEST_F(NcclNetMultipathTest, RouterV1KeepsOneLane) {
  absl::Status s = Run("v1", [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    RETURN_IF_ERROR(WaitOnCircuit(net, m, me, b, /*split=*/false));
    RETURN_IF_ERROR(Stream(net, m, me, me ^ 1, MixedPlan()));
    RETURN_IF_ERROR(Barrier(b));
    RETURN_IF_ERROR(CloseMesh(net, m));
    NT_REQUIRE(SplitLine().empty() && CountLines("split from") == 0, "rank ", me,
               ": router v1 split parts; log:\n", absl::StrJoin(LoggedLines(), "\n"));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace mixnet::nccl_test
