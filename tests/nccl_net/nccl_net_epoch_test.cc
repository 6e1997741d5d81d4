// The NCCL net plugin following topology epochs (issue 6), end to end on
// loopback: a real mixnet-ocsd (sim backend) and a real mixnet-controller as
// processes, and 4 forked ranks, each a "host" of a cluster spec whose EPS
// and OCS NICs are distinct 127.x addresses. The plugin in each rank reads
// the spec, registers with the controller and reports its traffic; the
// ranks exchange skewed traffic (each rank's partner gets 1 MiB, the others
// 4 KiB) with every byte checked, posting and retrying as NCCL's proxy does,
// and between those rounds pipelined ones (16 requests in flight per comm,
// two tags, grouped receives), so moves happen with requests in flight.
//  1. Partners rank^1: the controller joins the partners by circuits and the
//     plugin moves their comms onto them: TCP connections appear between
//     the partners' OCS addresses.
//  2. Partners rank^2: the circuits are re-planned (PREPARE moves the comms
//     off the leaving circuits onto EPS, COMMIT onto the new ones): the new
//     partners' OCS addresses connect and the old partners' OCS connections
//     close, all while transfers run and with nothing lost.
// Also: the control-message codec and the switch point.
// Runs on the test thread; the daemons are child processes; the ranks are
// forked processes (plugin_harness.h).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/nccl_net/move_protocol.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::DaemonProcess;
using ::mixnet::testing::TempDir;

constexpr int kWorld = 4;

std::string EpsAddress(int host) { return absl::StrCat("127.0.31.", host + 1); }
std::string OcsAddress(int host) { return absl::StrCat("127.0.32.", host + 1); }

std::string SpecYaml() {
  std::string y = "name: nccl_epochs\nocs_switches:\n  - {name: ocs0, ports: 8, switch_ms: 1}\n";
  y += "hosts:\n";
  for (int h = 0; h < kWorld; ++h) {
    absl::StrAppend(&y, "  - name: h", h, "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: ", EpsAddress(h), "/32, gbps: 1}\n",
                    "      - {name: ocs0, role: ocs, address: ", OcsAddress(h),
                    "/32, gbps: 100, switch: ocs0, port: ", h + 1, "}\n");
  }
  y += "regions:\n  - {name: r0, hosts: [h0, h1, h2, h3]}\n";
  return y;
}

// IPv4 address as /proc/net/tcp prints it (the in-memory bytes as hex).
std::string ProcHex(const std::string& dotted) {
  std::vector<std::string> p = absl::StrSplit(dotted, '.');
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%02X%02X%02X%02X", std::stoi(p[3]), std::stoi(p[2]),
                std::stoi(p[1]), std::stoi(p[0]));
  return buf;
}

// Established TCP connections between two addresses (either direction).
int Established(const std::string& a, const std::string& b) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);
  const std::string ha = ProcHex(a), hb = ProcHex(b);
  int n = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 4 || f[3] != "01") continue;
    const std::string l = f[1].substr(0, 8), r = f[2].substr(0, 8);
    if ((l == ha && r == hb) || (l == hb && r == ha)) ++n;
  }
  return n;
}

// Many requests in flight per comm across moves: to and from every peer, 4
// rounds of two tags (a rendezvous-sized and an eager-sized message), received
// with grouped receives (n = 2), all posted before any is waited for, posts
// retried while the plugin asks for it. Every byte checked.
absl::Status Pipelined(const Net& net, const Mesh& m, int me, int seq) {
  constexpr int kRounds = 4;
  constexpr size_t kSizes[2] = {(64 << 10) + 1, 1000};
  struct Peer {
    std::vector<std::vector<uint8_t>> out, in;  // [round * 2 + t]
    std::vector<void*> sreq, rreq;
    int next_send = 0, next_recv = 0, done = 0;
  };
  std::vector<Peer> peers(kWorld);
  for (int p = 0; p < kWorld; ++p) {
    if (p == me) continue;
    Peer& q = peers[p];
    for (int k = 0; k < 2 * kRounds; ++k) {
      q.out.emplace_back(kSizes[k % 2]);
      Fill(q.out.back().data(), kSizes[k % 2], Seed(me, p, seq * 64 + k));
      q.in.emplace_back(kSizes[k % 2], 0xEE);
    }
    q.sreq.assign(2 * kRounds, nullptr);
    q.rreq.assign(kRounds, nullptr);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (bool all = false; !all;) {
    all = true;
    for (int p = 0; p < kWorld; ++p) {
      if (p == me) continue;
      Peer& q = peers[p];
      while (q.next_recv < kRounds) {
        const int r = q.next_recv;
        void* data[2] = {q.in[2 * r].data(), q.in[2 * r + 1].data()};
        size_t sizes[2] = {kSizes[0], kSizes[1]};
        int tags[2] = {1000 + p, 2000 + p};
        NT_NCCL_OK(net.api->irecv(m.recv[p], 2, data, sizes, tags, nullptr, nullptr, &q.rreq[r]));
        if (q.rreq[r] == nullptr) break;  // retry later
        ++q.next_recv;
      }
      while (q.next_send < 2 * kRounds) {
        const int k = q.next_send;
        NT_NCCL_OK(net.api->isend(m.send[p], q.out[k].data(), q.out[k].size(),
                                  (k % 2 == 0 ? 1000 : 2000) + me, nullptr, nullptr, &q.sreq[k]));
        if (q.sreq[k] == nullptr) break;
        ++q.next_send;
      }
      for (auto* reqs : {&q.sreq, &q.rreq}) {
        for (void*& req : *reqs) {
          if (req == nullptr) continue;
          int done = 0;
          int sizes[2] = {-1, -1};
          NT_NCCL_OK(net.api->test(req, &done, sizes));
          if (!done) continue;
          req = nullptr;
          ++q.done;
        }
      }
      all = all && q.done == 3 * kRounds;
    }
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": pipelined exchange ", seq, " timed out");
  }
  for (int p = 0; p < kWorld; ++p) {
    if (p == me) continue;
    for (int k = 0; k < 2 * kRounds; ++k) {
      NT_REQUIRE(Check(peers[p].in[k].data(), kSizes[k % 2], Seed(p, me, seq * 64 + k)), "rank ",
                 me, ": pipelined message ", k, " of exchange ", seq, " from rank ", p,
                 " is wrong");
    }
  }
  return absl::OkStatus();
}

// Exchanges skewed traffic (1 MiB to `partner`, 4 KiB to the others) until
// `until()` holds on every rank (voted after each round, so all ranks run
// the same rounds), then `extra` more rounds. Every byte is checked.
absl::Status SkewedUntil(const Net& net, const Mesh& m, Board* b, int me, int partner, int* seq,
                         const std::function<bool()>& until, int extra, absl::Duration timeout,
                         const std::string& what) {
  std::vector<size_t> sizes(kWorld, 4 << 10);
  sizes[partner] = 1 << 20;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    RETURN_IF_ERROR(Exchange(net, m, me, sizes, sizes, (*seq)++));
    RETURN_IF_ERROR(Pipelined(net, m, me, (*seq)++));
    ASSIGN_OR_RETURN(bool all, AllAgree(b, me, until()));
    if (all) break;
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": ", what, " did not happen within ",
               absl::FormatDuration(timeout), " (here: ", until() ? "yes" : "no", ")");
  }
  for (int i = 0; i < extra; ++i) {
    RETURN_IF_ERROR(Exchange(net, m, me, sizes, sizes, (*seq)++));
    RETURN_IF_ERROR(Pipelined(net, m, me, (*seq)++));
  }
  return absl::OkStatus();
}

TEST(NcclNetEpochTest, CommsFollowTheControllersCircuitsWithNothingLost) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string spec = dir.path() + "/spec.yaml";
  std::ofstream(spec) << SpecYaml();

  DaemonProcess::Options oo;
  oo.binary = MIXNET_OCSD_BIN;
  auto ocsd = DaemonProcess::Start({"--backend", "sim", "--ports", "8", "--switch-ms", "1",
                                    "--listen", "unix:" + dir.path() + "/ocs.sock"},
                                   oo);
  ASSERT_TRUE(ocsd.ok()) << ocsd.status();
  DaemonProcess::Options co;
  co.binary = MIXNET_CONTROLLER_BIN;
  auto ctl = DaemonProcess::Start(
      {"--spec", spec, "--listen", "unix:" + dir.path() + "/ctl.sock", "--ocs",
       "ocs0=" + (*ocsd)->address(), "--predictor", "last", "--report-timeout-ms", "400",
       "--prepare-deadline-ms", "5000", "--log-level", "info"},
      co);
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  const std::string controller = (*ctl)->address();

  absl::Status s = RunRanks(
      kWorld,
      [&](int me, Board* b) -> absl::Status {
        ASSIGN_OR_RETURN(Net net, OpenNet());
        ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
        int seq = 0;
        // Before any circuit: everything on EPS.
        RETURN_IF_ERROR(Exchange(net, m, me, std::vector<size_t>(kWorld, 12345),
                                 std::vector<size_t>(kWorld, 12345), seq++));
        const int p1 = me ^ 1, p2 = me ^ 2;
        RETURN_IF_ERROR(SkewedUntil(
            net, m, b, me, p1, &seq,
            [&] { return Established(OcsAddress(me), OcsAddress(p1)) > 0; }, 20, absl::Seconds(40),
            absl::StrCat("a circuit to partner rank ", p1)));
        RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
        RETURN_IF_ERROR(SkewedUntil(
            net, m, b, me, p2, &seq,
            [&] {
              return Established(OcsAddress(me), OcsAddress(p2)) > 0 &&
                     Established(OcsAddress(me), OcsAddress(p1)) == 0;
            },
            20, absl::Seconds(40),
            absl::StrCat("moving from partner ", p1, "'s circuit to partner ", p2, "'s")));
        RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
        return CloseMesh(net, m);
      },
      absl::Seconds(150),
      [&](int me) -> absl::Status {
        setenv("MIXNET_CLUSTER_SPEC", spec.c_str(), 1);
        setenv("MIXNET_HOST", absl::StrCat("h", me).c_str(), 1);
        setenv("MIXNET_CONTROLLER", controller.c_str(), 1);
        setenv("MIXNET_NCCL_REPORT_MS", "100", 1);
        setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s << "\ncontroller log:\n" << (*ctl)->Log();
}

TEST(MoveProtocolTest, ControlMessagesRoundTrip) {
  nccl::ControlMessage m;
  m.type = nccl::ControlType::kMove;
  m.move_id = 0xfeedface12345678ull;
  m.target.local_nic = "ocs1";
  m.target.remote_nic = "ocs0";
  m.target.direct = true;
  m.target.circuit = {"ocs0", 3, 7};
  m.epoch = 42;
  m.counts = {{0, 5}, {7, 1}, {0xffffffffu, 9}};
  const std::string wire = nccl::EncodeControl(m);
  auto back = nccl::DecodeControl(wire.data(), wire.size());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, nccl::ControlType::kMove);
  EXPECT_EQ(back->move_id, m.move_id);
  EXPECT_TRUE(back->target.SameAs(m.target));
  EXPECT_EQ(back->epoch, 42u);
  EXPECT_EQ(back->counts, m.counts);

  nccl::ControlMessage r;
  r.type = nccl::ControlType::kReady;
  r.move_id = 1;
  r.address = std::string("\0\x01tcp:10.0.0.1:5\xff", 16);
  auto rb = nccl::DecodeControl(nccl::EncodeControl(r).data(), nccl::EncodeControl(r).size());
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->address, r.address);

  EXPECT_FALSE(nccl::DecodeControl("garbage", 7).ok());
  const std::string cut = wire.substr(0, wire.size() / 2);
  EXPECT_FALSE(nccl::DecodeControl(cut.data(), cut.size()).ok());
}

TEST(MoveProtocolTest, SwitchPointIsThePerTagMaximum) {
  nccl::TagCounts a{{1, 5}, {2, 0}, {3, 7}};
  nccl::TagCounts b{{1, 6}, {3, 2}, {4, 1}};
  nccl::TagCounts m = nccl::SwitchPoint(a, b);
  EXPECT_EQ(m, (nccl::TagCounts{{1, 6}, {2, 0}, {3, 7}, {4, 1}}));
}

}  // namespace
}  // namespace mixnet::nccl_test
