// An unplanned circuit loss under the NCCL plugin on the emulated cluster
// (label netns; needs root, skips with the reason otherwise). Four hosts,
// each with an EPS NIC (1 Gbit/s) and an OCS NIC (0.5 Gbit/s) on one
// emulated optical switch holding the spec's circuits h0-h1 and h2-h3; one
// forked rank per host in its namespace, the plugin configured from the
// spec (no controller: the spec's circuits are the topology). The comms
// between partners (rank^1) move onto the circuits; each rank streams once
// uncut (timed: the circuit's rate with sends acknowledged), then streams
// 40 messages of about 1 MiB on two tags to its partner (8 in flight; a
// second case: 600 eager-sized ones, 16 sends but 3 receives ahead; a third
// cuts while idle, before the stream) while the test cuts h0-h1's circuit
// (EmulatedFabric::ApplyCircuits, no PREPARE) once 4 MiB crossed it. Stall detection
// (MIXNET_PATH_STALL_MS = 500) errors the dead connections, the plugin fails the h0-h1 comms over
// to EPS and re-sends what was not acknowledged: every message must arrive once, in order per tag,
// every byte checked, with no NCCL error; the comms then go on (more checked exchanges among all
// ranks). h2-h3 must not fail over. The fabric is removed whatever happens. Runs on the test thread
// (and a cutter thread); the ranks are forked processes (plugin_harness.h).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "tests/emulation/fabric_test_util.h"
#include "tests/emulation/netns_test_util.h"
#include "tests/nccl_net/enter_host.h"
#include "tests/nccl_net/epoch_traffic.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::TempDir;

constexpr int kWorld = 4;
constexpr uint64_t kCutAfter = 4 << 20;  // bytes over h0.ocs0 before the cut

// What each rank streams to its partner.
struct Shape {
  int messages = 40;
  size_t size = 1 << 20;  // about; each message has a size of its own
  int send_window = 8;    // sends posted ahead
  int recv_window = 8;    // receives posted ahead
  // Cut while the comms are idle (after the uncut stream), then wait 2 s
  // before streaming: keepalives find the dead circuit, nothing is re-sent.
  bool idle_cut = false;
};

std::string OcsAddress(int host) { return absl::StrCat("10.45.0.", host + 1); }

std::string SpecYaml() {
  std::string y =
      "name: nccl_cut\nocs_switches:\n  - {name: ocs0, ports: 4, switch_ms: 5}\nhosts:\n";
  for (int h = 0; h < kWorld; ++h) {
    absl::StrAppend(&y, "  - name: h", h, "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: 10.44.0.", h + 1, "/24, gbps: 1}\n",
                    "      - {name: ocs0, role: ocs, address: ", OcsAddress(h),
                    "/24, gbps: 0.5, switch: ocs0, port: ", h + 1, "}\n");
  }
  y += "regions:\n  - {name: r0, hosts: [h0, h1, h2, h3]}\n";
  y += "circuits:\n  - {switch: ocs0, ports: [1, 2]}\n  - {switch: ocs0, ports: [3, 4]}\n";
  return y;
}

// Message k to the partner: tag 1 or 2 alternately, a size of its own.
size_t MessageSize(const Shape& s, int k) { return s.size + 4099 * (k % 64) + (k % 2); }
int MessageTag(int k) { return 1 + k % 2; }

// Streams s.messages to `partner` and receives as many from it, at most a
// window of each posted at once, receives on tag t posted in message order;
// checks every byte and size (a message lost, duplicated or out of order per
// tag lands in the wrong buffer and fails the check).
absl::Status Stream(const Net& net, const Mesh& m, int me, int partner, const Shape& shape) {
  const int kMessages = shape.messages;
  std::vector<std::vector<uint8_t>> out(kMessages), in(kMessages);
  for (int k = 0; k < kMessages; ++k) {
    out[k].resize(MessageSize(shape, k));
    Fill(out[k].data(), out[k].size(), Seed(me, partner, 1000 + k));
    in[k].assign(MessageSize(shape, k) + 64, 0xEE);
  }
  std::vector<void*> sreq(kMessages, nullptr), rreq(kMessages, nullptr);
  int next_send = 0, next_recv = 0, sends_done = 0, recvs_done = 0;
  std::vector<char> sdone(kMessages, 0), rdone(kMessages, 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (sends_done < kMessages || recvs_done < kMessages) {
    while (next_recv < kMessages && next_recv - recvs_done < shape.recv_window) {
      void* data = in[next_recv].data();
      size_t size = in[next_recv].size();
      int tag = MessageTag(next_recv);
      NT_NCCL_OK(net.api->irecv(m.recv[partner], 1, &data, &size, &tag, nullptr, nullptr,
                                &rreq[next_recv]));
      if (rreq[next_recv] == nullptr) break;  // retry later (the plugin asks for it)
      ++next_recv;
    }
    while (next_send < kMessages && next_send - sends_done < shape.send_window) {
      NT_NCCL_OK(net.api->isend(m.send[partner], out[next_send].data(), out[next_send].size(),
                                MessageTag(next_send), nullptr, nullptr, &sreq[next_send]));
      if (sreq[next_send] == nullptr) break;
      ++next_send;
    }
    for (int k = 0; k < kMessages; ++k) {
      for (auto [req, flag, count, is_recv] :
           {std::tuple{&sreq[k], &sdone[k], &sends_done, false},
            std::tuple{&rreq[k], &rdone[k], &recvs_done, true}}) {
        if (*req == nullptr) continue;
        int done = 0, size = -1;
        NT_NCCL_OK(net.api->test(*req, &done, &size));
        if (!done) continue;
        *req = nullptr;
        *flag = 1;
        ++*count;
        if (!is_recv) continue;
        const size_t want = MessageSize(shape, k);
        NT_REQUIRE(size == static_cast<int>(want), "rank ", me, ": message ", k, " from rank ",
                   partner, " reported ", size, " bytes, sent ", want);
        NT_REQUIRE(Check(in[k].data(), want, Seed(partner, me, 1000 + k)), "rank ", me,
                   ": message ", k, " (tag ", MessageTag(k), ") from rank ", partner,
                   " is wrong: lost, duplicated or out of order");
        for (size_t b = want; b < in[k].size(); ++b) {
          NT_REQUIRE(in[k][b] == 0xEE, "rank ", me, ": message ", k, " wrote past its end");
        }
      }
    }
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": stream timed out (", sends_done,
               " sends and ", recvs_done, " receives done)");
  }
  return absl::OkStatus();
}

// "re-sent <n> part(s)" from the plugin's failover log line, summed.
int ResentParts() {
  int total = 0;
  for (const std::string& l : LoggedLines()) {
    const size_t at = l.find("re-sent ");
    if (at == std::string::npos) continue;
    int n = 0;
    const std::string rest = l.substr(at + 8);
    if (absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &n)) total += n;
  }
  return total;
}

bool FailedOver() {
  for (const std::string& l : LoggedLines()) {
    if (absl::StrContains(l, "failed over to")) return true;
  }
  return false;
}

absl::Status CutRank(int me, Board* b, const std::string& phase_file, const Shape& shape) {
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
  ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
  const int partner = me ^ 1;
  // Until every rank's partner comms run over the circuit.
  int seq = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (bool all = false; !all;) {
    std::vector<size_t> sizes(kWorld, 4096);
    sizes[partner] = 256 << 10;
    RETURN_IF_ERROR(Exchange(net, m, me, sizes, sizes, seq++));
    ASSIGN_OR_RETURN(all, AllAgree(b, me, Established(OcsAddress(me), OcsAddress(partner)) > 0));
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": the comms never moved onto the circuit");
  }
  RETURN_IF_ERROR(Barrier(b));
  // Once uncut, timed (what the circuit carries with sends acknowledged).
  const absl::Time t0 = absl::Now();
  RETURN_IF_ERROR(Stream(net, m, me, partner, shape));
  const absl::Duration uncut = absl::Now() - t0;
  uint64_t bytes = 0;
  for (int k = 0; k < shape.messages; ++k) bytes += MessageSize(shape, k);
  fprintf(stderr, "rank %d: uncut stream %.1f Mbit/s each way\n", me,
          bytes * 8 / absl::ToDoubleMicroseconds(uncut));
  RETURN_IF_ERROR(Barrier(b));
  if (me == 0) std::ofstream(phase_file) << "streaming\n";  // the cutter waits for it
  if (shape.idle_cut) absl::SleepFor(absl::Seconds(2));
  RETURN_IF_ERROR(Stream(net, m, me, partner, shape));
  RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
  // The comms go on (every pair; h0-h1 now over EPS).
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(ExchangeAll(net, m, me, kWorld, 200000 + i, seq++));
  RETURN_IF_ERROR(Barrier(b));
  const std::string log = absl::StrJoin(LoggedLines(), "\n");
  const int resent = ResentParts();
  fprintf(stderr, "rank %d: failed over %s, re-sent %d part(s)\n", me, FailedOver() ? "yes" : "no",
          resent);
  for (const std::string& l : LoggedLines()) {
    if (absl::StrContains(l, "failed over")) fprintf(stderr, "rank %d: %s\n", me, l.c_str());
  }
  if (me < 2) {
    NT_REQUIRE(FailedOver(), "rank ", me, ": no failover after its circuit was cut; log:\n", log);
    if (shape.idle_cut) {
      NT_REQUIRE(resent == 0, "rank ", me, ": re-sent ", resent,
                 " part(s) though the circuit was cut while idle; log:\n", log);
    } else {
      NT_REQUIRE(resent > 0, "rank ", me, ": the cut lost nothing it sent (cut too late?); log:\n",
                 log);
    }
  } else {
    NT_REQUIRE(!FailedOver(), "rank ", me, ": failed over though its circuit stayed; log:\n", log);
  }
  return CloseMesh(net, m);
}

class NcclNetFabricCutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    ASSERT_FALSE(dir_.path().empty());
    spec_path_ = dir_.path() + "/spec.yaml";
    std::ofstream(spec_path_) << SpecYaml();
    absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::LoadFile(spec_path_);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *std::move(spec);
    prefix_ = testing::UniquePrefix("cut");
    absl::StatusOr<std::unique_ptr<emulation::EmulatedFabric>> fabric =
        emulation::EmulatedFabric::Up(spec_, prefix_);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = *std::move(fabric);
  }
  void TearDown() override { testing::DownFabric(fabric_, prefix_); }

  TempDir dir_;
  std::string spec_path_;
  cluster::ClusterSpec spec_;
  std::string prefix_;
  std::unique_ptr<emulation::EmulatedFabric> fabric_;

  void CutMidStream(const Shape& shape);
};

// About 1 MiB messages (rendezvous), as many receives as sends posted.
TEST_F(NcclNetFabricCutTest, CutMidTransferFailsOverToEpsWithEveryByteOnceAndInOrder) {
  CutMidStream(Shape{});
}

// Small (eager) messages, 16 sends but only 3 receives posted ahead: at the
// cut the receiver's transport holds messages nobody asked for yet, lost
// with the connection, and the sender must re-send parts the receiver has
// not even posted.
TEST_F(NcclNetFabricCutTest, CutWithTheReceiverBehindResendsWhatItHadNotPosted) {
  CutMidStream(Shape{600, 24 << 10, 16, 3});
}

// The circuit cut while nothing is in flight: found by keepalives alone.
TEST_F(NcclNetFabricCutTest, IdleCutFailsOverWithNothingToResend) {
  Shape idle;
  idle.idle_cut = true;
  CutMidStream(idle);
}

void NcclNetFabricCutTest::CutMidStream(const Shape& shape) {
  if (fabric_ == nullptr) return;  // skipped
  const std::string phase = dir_.path() + "/streaming";
  std::atomic<bool> stop{false};
  absl::Status cut_status = absl::UnknownError("not cut");
  uint64_t cut_at_bytes = 0;
  std::thread cutter([&] {
    struct stat st;
    while (!stop.load() && stat(phase.c_str(), &st) != 0) absl::SleepFor(absl::Milliseconds(2));
    absl::StatusOr<emulation::LinkCounters> base = fabric_->ReadCounters("h0", "ocs0");
    while (!stop.load() && base.ok()) {
      absl::StatusOr<emulation::LinkCounters> now = fabric_->ReadCounters("h0", "ocs0");
      if (now.ok() && (shape.idle_cut || now->tx_bytes - base->tx_bytes > kCutAfter)) {
        cut_at_bytes = now->tx_bytes - base->tx_bytes;
        cut_status = fabric_->ApplyCircuits({cluster::CircuitSpec{"ocs0", 3, 4}});
        return;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  absl::Status ranks = RunRanks(
      kWorld, [&](int me, Board* b) { return CutRank(me, b, phase, shape); }, absl::Seconds(90),
      [&](int rank) {
        const std::string host = absl::StrCat("h", rank);
        RETURN_IF_ERROR(EnterHostNamespace(fabric_->HostNamespace(host)));
        setenv("MIXNET_CLUSTER_SPEC", spec_path_.c_str(), 1);
        setenv("MIXNET_HOST", host.c_str(), 1);
        unsetenv("MIXNET_CONTROLLER");
        setenv("MIXNET_PATH_STALL_MS", "500", 1);
        setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
        setenv("MIXNET_TRANSPORT", "tcp", 1);
        return absl::OkStatus();
      });
  stop = true;
  cutter.join();
  EXPECT_TRUE(cut_status.ok()) << cut_status;
  std::cout << "cut h0-h1 after " << cut_at_bytes << " bytes of the stream crossed h0.ocs0\n";
  EXPECT_TRUE(ranks.ok()) << ranks;
}

}  // namespace
}  // namespace mixnet::nccl_test
