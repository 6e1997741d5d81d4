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
#include "mixnet_build_paths.h"  // MIXNET_OCSD_BIN, MIXNET_CONTROLLER_BIN
#include "plugins/nccl_net/move_protocol.h"
#include "tests/nccl_net/epoch_traffic.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"
#include "tests/nccl_net/two_fabric_spec.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::DaemonProcess;
using ::mixnet::testing::TempDir;

constexpr int kWorld = kEpochWorld;

std::string OcsAddress(int host) { return HostAddress("127.0.32.", host); }

// Loopback is not shaped, so the rates are only what the controller plans
// with. They are low so that moving the circuits pays by far more than any
// switching time a loaded machine measures: the controller plans with the
// ocsd's measured median Apply (persist + switch + read back, switch_timing.h),
// which is 1 ms here when idle but was 36 ms under the sanitizer pass on a
// 2-core CI machine, while the gain of step 2 at 1 Gbit/s EPS was 16.7 ms (no
// move, test failed). At 0.05 Gbit/s every modelled time is 20 times longer
// (an ocsd with --switch-ms 80 no longer stops the move); the EPS:OCS ratio,
// and so every split share, is unchanged.
std::string SpecYaml() {
  return TwoFabricSpecYaml(TwoFabricSpec{.name = "nccl_epochs",
                                         .hosts = kWorld,
                                         .eps_prefix = "127.0.31.",
                                         .ocs_prefix = "127.0.32.",
                                         .eps_gbps = 0.05,
                                         .ocs_gbps = 5,
                                         .ports = 8,
                                         .circuits = {}});
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
      kWorld, [&](int me, Board* b) { return EpochRank(me, b, OcsAddress); }, absl::Seconds(150),
      [&](int me) -> absl::Status {
        setenv("MIXNET_CLUSTER_SPEC", spec.c_str(), 1);
        setenv("MIXNET_HOST", absl::StrCat("h", me).c_str(), 1);
        setenv("MIXNET_CONTROLLER", controller.c_str(), 1);
        setenv("MIXNET_NCCL_REPORT_MS", "100", 1);
        setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
        // No warm-up sweep: each pairing's first round makes its lanes.
        setenv("MIXNET_NCCL_WARM_PATHS_MS", "0", 1);
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
  m.target.split_min_bytes = 65536;  // a split lane (multipath.h)
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
  EXPECT_FALSE(back->onto_home);
  nccl::ControlMessage home = m;  // back onto the comm's home lane
  home.onto_home = true;
  auto hb = nccl::DecodeControl(nccl::EncodeControl(home).data(), nccl::EncodeControl(home).size());
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_TRUE(hb->onto_home);
  // Another split rule over the same connections: another path, but a kept
  // lane on it serves (path_mover.h, kept lanes).
  nccl::LanePath unsplit = m.target;
  unsplit.split_min_bytes = 0;
  EXPECT_FALSE(unsplit.SameAs(m.target));
  EXPECT_TRUE(unsplit.SameConnections(m.target));
  unsplit.circuit.port_b = 8;
  EXPECT_FALSE(unsplit.SameConnections(m.target));

  nccl::ControlMessage r;
  r.type = nccl::ControlType::kReady;
  r.move_id = 1;
  r.address = std::string("\0\x01tcp:10.0.0.1:5\xff", 16);
  auto rb = nccl::DecodeControl(nccl::EncodeControl(r).data(), nccl::EncodeControl(r).size());
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->address, r.address);
  EXPECT_TRUE(rb->stripe_addresses.empty());

  // A striped target (multipath.h): its further circuits, their rates and
  // the receiver's address on each.
  m.target.gbps = 3;
  m.target.stripes.resize(2);
  m.target.stripes[0].local_nic = "ocs2";
  m.target.stripes[0].remote_nic = "ocs1";
  m.target.stripes[0].circuit = {"ocs0", 4, 9};
  m.target.stripes[0].gbps = 2.5;
  m.target.stripes[1].local_nic = m.target.stripes[1].remote_nic = "ocs3";
  m.target.stripes[1].circuit = {"ocs1", 1, 2};
  const std::string sw2 = nccl::EncodeControl(m);
  auto sb = nccl::DecodeControl(sw2.data(), sw2.size());
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_TRUE(sb->target.SameAs(m.target));
  ASSERT_EQ(sb->target.stripes.size(), 2u);
  EXPECT_EQ(sb->target.gbps, 3);
  EXPECT_EQ(sb->target.stripes[0].gbps, 2.5);
  EXPECT_EQ(sb->target.stripes[1].circuit.port_b, 2);
  EXPECT_FALSE(sb->target.SameAs(back->target));  // one circuit is not two
  EXPECT_EQ(sb->target.Describe(),
            "ocs1 -> ocs0 (circuit ocs0:3-7, split from 65536 B) + ocs2 -> ocs1 (circuit "
            "ocs0:4-9) + ocs3 -> ocs3 (circuit ocs1:1-2)");
  // A lane on EPS with a relay stripe (path_mover_relay.cc): circuit to
  // relay host h1, EPS on to the peer; its weight travels with it.
  nccl::ControlMessage rm = m;
  rm.target.direct = false;
  rm.target.gbps = 0.25;
  rm.target.stripes.resize(1);
  nccl::StripePath& relay = rm.target.stripes[0];
  relay.local_nic = "ocs1";
  relay.remote_nic = "eps0";
  relay.gbps = 0.75;
  relay.relay_host = "h1";
  relay.relay_in_nic = "ocs0";
  relay.relay_out_nic = "eps1";
  relay.first_direct = true;
  relay.first_circuit = {"ocs0", 2, 5};
  relay.second_direct = false;
  relay.circuit = {};
  const std::string rmw = nccl::EncodeControl(rm);
  auto rmb = nccl::DecodeControl(rmw.data(), rmw.size());
  ASSERT_TRUE(rmb.ok()) << rmb.status();
  EXPECT_TRUE(rmb->target.SameAs(rm.target));
  EXPECT_EQ(rmb->target.gbps, 0.25);
  EXPECT_EQ(rmb->target.stripes[0].gbps, 0.75);
  EXPECT_EQ(rmb->target.stripes[0].first_circuit.port_b, 5);
  EXPECT_EQ(rmb->target.Describe(),
            "ocs1 -> ocs0 (EPS, split from 65536 B) + ocs1 -> h1 ocs0/eps1 -> eps0 (relay circuit "
            "ocs0:2-5 then EPS)");
  nccl::StripePath other_relay = relay;
  other_relay.relay_host = "h2";
  nccl::LanePath via_h2 = rm.target;
  via_h2.stripes[0] = other_relay;
  EXPECT_FALSE(via_h2.SameAs(rm.target));  // another relay host is another path
  // New weights: shares of the cut 0.25 / 0.75 against 0.25 / 0.70 (0.263 /
  // 0.737: within 0.05, the same lane) and 0.25 / 0.30 (0.455 / 0.545: not).
  nccl::LanePath reweighted = rm.target;
  reweighted.stripes[0].gbps = 0.70;
  EXPECT_TRUE(reweighted.SameAs(rm.target));
  reweighted.stripes[0].gbps = 0.30;
  EXPECT_FALSE(reweighted.SameAs(rm.target));
  // Its set-up messages.
  nccl::ControlMessage open;
  open.type = nccl::ControlType::kRelayOpen;
  open.move_id = 77;
  open.address = std::string("\0tcp:10.0.0.4:9", 15);
  open.relay_in_nic = "ocs0";
  open.relay_out_nic = "eps1";
  open.downstream_id = 0xabcdef0123ull;
  open.name = "h0 ocs1 -> h3 eps0";
  const std::string ow = nccl::EncodeControl(open);
  auto ob = nccl::DecodeControl(ow.data(), ow.size());
  ASSERT_TRUE(ob.ok()) << ob.status();
  EXPECT_EQ(ob->type, nccl::ControlType::kRelayOpen);
  EXPECT_EQ(ob->move_id, 77u);
  EXPECT_EQ(ob->address, open.address);
  EXPECT_EQ(ob->relay_in_nic, "ocs0");
  EXPECT_EQ(ob->relay_out_nic, "eps1");
  EXPECT_EQ(ob->downstream_id, open.downstream_id);
  EXPECT_EQ(ob->name, open.name);
  nccl::ControlMessage ready;
  ready.type = nccl::ControlType::kRelayReady;
  ready.move_id = 77;
  ready.reason = "host h1 cannot relay";
  const std::string yw = nccl::EncodeControl(ready);
  auto yb = nccl::DecodeControl(yw.data(), yw.size());
  ASSERT_TRUE(yb.ok()) << yb.status();
  EXPECT_EQ(yb->type, nccl::ControlType::kRelayReady);
  EXPECT_EQ(yb->reason, ready.reason);
  EXPECT_TRUE(yb->address.empty());

  r.stripe_addresses = {std::string("a\0b", 3), "tcp:10.0.0.2:6"};
  auto ra = nccl::DecodeControl(nccl::EncodeControl(r).data(), nccl::EncodeControl(r).size());
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->stripe_addresses, r.stripe_addresses);

  // The failover messages (lane_recovery.h).
  nccl::ControlMessage rec;
  rec.type = nccl::ControlType::kRecover;
  rec.generation = 3;
  rec.counts = {{1, 40}, {2, 38}};
  rec.missing = {{1, {31, 33, 39}}, {2, {}}};
  const std::string rw = nccl::EncodeControl(rec);
  auto rr = nccl::DecodeControl(rw.data(), rw.size());
  ASSERT_TRUE(rr.ok()) << rr.status();
  EXPECT_EQ(rr->type, nccl::ControlType::kRecover);
  EXPECT_EQ(rr->generation, 3u);
  EXPECT_EQ(rr->counts, rec.counts);
  EXPECT_EQ(rr->missing, rec.missing);
  nccl::ControlMessage lost;
  lost.type = nccl::ControlType::kLost;
  lost.generation = 4;
  lost.reason = "lane ocs0 -> ocs0 ended";
  const std::string lw = nccl::EncodeControl(lost);
  auto lr = nccl::DecodeControl(lw.data(), lw.size());
  ASSERT_TRUE(lr.ok()) << lr.status();
  EXPECT_EQ(lr->generation, 4u);
  EXPECT_EQ(lr->reason, lost.reason);
  // RESENT ends a failover of a comm with split lanes (multipath.h).
  nccl::ControlMessage resent;
  resent.type = nccl::ControlType::kResent;
  resent.generation = 2;
  resent.counts = {{1, 41}};
  resent.missing = {{1, {38, 40}}};
  const std::string sw = nccl::EncodeControl(resent);
  auto sr = nccl::DecodeControl(sw.data(), sw.size());
  ASSERT_TRUE(sr.ok()) << sr.status();
  EXPECT_EQ(sr->type, nccl::ControlType::kResent);
  EXPECT_EQ(sr->generation, 2u);
  EXPECT_EQ(sr->counts, resent.counts);
  EXPECT_EQ(sr->missing, resent.missing);
  nccl::ControlMessage ack;
  ack.type = nccl::ControlType::kAck;
  ack.counts = {{7, 12}};
  const std::string aw = nccl::EncodeControl(ack);
  auto ar = nccl::DecodeControl(aw.data(), aw.size());
  ASSERT_TRUE(ar.ok()) << ar.status();
  EXPECT_EQ(ar->type, nccl::ControlType::kAck);
  EXPECT_EQ(ar->counts, ack.counts);

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
