// PathMover with striped lanes (router v2 over a pair with two circuits,
// plugins/nccl_net/multipath.h) in one process, over the real TCP transport
// on loopback: two "hosts" (each a mover with an EPS device and two OCS
// devices on distinct 127.x addresses), a static v2 plan, one send comm /
// recv comm pair driven as the plugin drives it. A COMMIT of both circuits
// moves the pair onto one lane over both (a connection per circuit, the
// stripe's on its own NIC); a PREPARE of a topology keeping only one of them
// returns only once the pair has left the striped lane (for that circuit
// alone: no stripes), and the next COMMIT of both makes it striped again.
// Bytes on every lane checked, the stripes' own connections included.
// Also: a stripe piece whose connection fails while the proxy tests its
// request (the transport completes it on its progress thread between two
// looks) fails the comm over; it is never the request's completion. And a
// comm that fails (a malformed split header on home) while a split part's
// second piece is still posted there never completes that part OK, nor
// while the piece can still land in its buffer.
// Threads: the test thread posts and waits; each mover runs its own thread.
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugins/nccl_net/path_mover.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {
namespace {

constexpr char kSpec[] = R"(name: mover_stripes
ocs_switches:
  - {name: ocs0, ports: 4, switch_ms: 1}
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 127.0.65.1/32, gbps: 1}
      - {name: ocs0, role: ocs, address: 127.0.66.1/32, gbps: 3, switch: ocs0, port: 1}
      - {name: ocs1, role: ocs, address: 127.0.67.1/32, gbps: 3, switch: ocs0, port: 3}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 127.0.65.2/32, gbps: 1}
      - {name: ocs0, role: ocs, address: 127.0.66.2/32, gbps: 3, switch: ocs0, port: 2}
      - {name: ocs1, role: ocs, address: 127.0.67.2/32, gbps: 3, switch: ocs0, port: 4}
regions:
  - {name: r0, hosts: [h0, h1]}
)";

const cluster::CircuitSpec kFirst{"ocs0", 1, 2}, kSecond{"ocs0", 3, 4};

std::unique_ptr<transport::Device> MakeDevice(const std::string& address) {
  transport::DeviceOptions o = transport::DeviceOptionsFromSettings();
  o.ifname.clear();
  o.bind_address = address;
  auto d = transport::CreateDevice("tcp", o);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

std::vector<uint8_t> Payload(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed * 7 + 1);
  return v;
}

// A transport request with a fixed outcome: done from the `pending`+1-th
// look at Done() on, with `status` and `bytes` (OK and 0 until then).
class ScriptedRequest : public transport::Request {
 public:
  ScriptedRequest(int pending, absl::Status status, size_t bytes)
      : pending_(pending), status_(std::move(status)), bytes_(bytes) {}
  bool Done() const override { return ++looks_ > pending_; }
  absl::Status Wait(absl::Duration) override { return status(); }
  absl::Status status() const override { return looks_ > pending_ ? status_ : absl::OkStatus(); }
  size_t bytes() const override { return looks_ > pending_ ? bytes_ : 0; }

 private:
  const int pending_;
  const absl::Status status_;
  const size_t bytes_;
  mutable int looks_ = 0;
};

// A connection the test never sends on (a synthetic lane's).
class IdleConnection : public transport::Connection {
 public:
  absl::StatusOr<std::unique_ptr<transport::Request>> Isend(const void*, size_t,
                                                            uint64_t) override {
    return absl::UnavailableError("idle test connection");
  }
  absl::StatusOr<std::unique_ptr<transport::Request>> Irecv(void*, size_t, uint64_t) override {
    return absl::UnavailableError("idle test connection");
  }
  std::string peer_name() const override { return "idle"; }
  absl::Status health() const override { return absl::OkStatus(); }
};

class PathMoverStripeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = cluster::ClusterSpec::Parse(kSpec);
    ASSERT_TRUE(spec.ok()) << spec.status();
    for (int h = 0; h < 2; ++h) {
      auto& devices = devices_[h];
      devices["eps0"] = MakeDevice(absl::StrCat("127.0.65.", h + 1));
      devices["ocs0"] = MakeDevice(absl::StrCat("127.0.66.", h + 1));
      devices["ocs1"] = MakeDevice(absl::StrCat("127.0.67.", h + 1));
      PathMover::Options o;
      o.spec = *spec;
      o.host = absl::StrCat("h", h);
      o.initial = router::Topology{0, {}};
      o.device = [&devices](const std::string& nic) -> absl::StatusOr<transport::Device*> {
        auto it = devices.find(nic);
        if (it == devices.end()) return absl::NotFoundError(nic);
        return it->second.get();
      };
      o.connect_timeout = absl::Seconds(5);
      o.router = "v2";
      o.static_plan = router::RoutingPlan{.hosts = {"h0", "h1"}, .bytes = {0, 1e9, 1e9, 0}};
      auto m = PathMover::Create(std::move(o));
      ASSERT_TRUE(m.ok()) << m.status();
      movers_[h] = *std::move(m);
    }
    transport::ConnectOptions dial, wait;
    dial.remote_address = devices_[1]["eps0"]->address();
    dial.connection_id = wait.connection_id = 78;
    dial.initiator = true;
    dial.peer_name = "h1";
    wait.peer_name = "h0";
    absl::StatusOr<std::unique_ptr<transport::Connection>> accepted;
    std::thread t([&] { accepted = devices_[1]["eps0"]->Connect(wait); });
    auto dialed = devices_[0]["eps0"]->Connect(dial);
    t.join();
    ASSERT_TRUE(dialed.ok()) << dialed.status();
    ASSERT_TRUE(accepted.ok()) << accepted.status();
    send_.is_send = true;
    send_.peer_host = "h1";
    recv_.peer_host = "h0";
    for (auto [c, conn] : {std::pair{&send_, &*dialed}, std::pair{&recv_, &*accepted}}) {
      absl::MutexLock l(&c->mu);
      c->lane = std::make_shared<Lane>();
      c->lane->path.local_nic = c->lane->path.remote_nic = "eps0";
      c->lane->connection = std::move(*conn);
      c->home = c->lane;
    }
    movers_[0]->Add(&send_);
    movers_[1]->Add(&recv_);
  }

  void TearDown() override {
    if (movers_[0] != nullptr) movers_[0]->Remove(&send_);
    if (movers_[1] != nullptr) movers_[1]->Remove(&recv_);
    for (Comm* c : {&send_, &recv_}) {
      absl::MutexLock l(&c->mu);
      c->move.reset();
      c->lane.reset();
      c->home.reset();
    }
    for (auto& m : movers_) m.reset();
  }

  absl::Status CommitBoth(const router::Topology& t) {
    for (int h : {1, 0}) {
      absl::Status s = movers_[h]->Commit(t, absl::Now() + absl::Seconds(1));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Until neither comm moves and both run over `stripes` further circuits
  // on a direct lane.
  bool WaitOn(size_t stripes, absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      bool done = true;
      for (Comm* c : {&send_, &recv_}) {
        absl::MutexLock l(&c->mu);
        done &= c->move == nullptr && c->lane->path.direct &&
                c->lane->path.stripes.size() == stripes && c->lane->stripes.size() == stripes;
      }
      if (done) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  }

  // One message over connection `which` of each comm's lane (0: its own,
  // j: stripe j - 1), every byte checked.
  void Exchange(size_t which, int seed) {
    std::vector<uint8_t> out = Payload(300000, seed), in(out.size(), 0);
    std::unique_ptr<transport::Request> r, s;
    {
      absl::MutexLock l(&recv_.mu);
      transport::Connection* conn =
          which == 0 ? recv_.lane->connection.get() : recv_.lane->stripes[which - 1].get();
      auto p = conn->Irecv(in.data(), in.size(), 5);
      ASSERT_TRUE(p.ok()) << p.status();
      r = *std::move(p);
    }
    {
      absl::MutexLock l(&send_.mu);
      transport::Connection* conn =
          which == 0 ? send_.lane->connection.get() : send_.lane->stripes[which - 1].get();
      auto p = conn->Isend(out.data(), out.size(), 5);
      ASSERT_TRUE(p.ok()) << p.status();
      s = *std::move(p);
    }
    ASSERT_TRUE(s->Wait(absl::Seconds(10)).ok()) << s->status();
    ASSERT_TRUE(r->Wait(absl::Seconds(10)).ok()) << r->status();
    EXPECT_EQ(in, out) << "over connection " << which;
  }

  std::map<std::string, std::unique_ptr<transport::Device>> devices_[2];
  std::unique_ptr<PathMover> movers_[2];
  Comm send_, recv_;
};

TEST_F(PathMoverStripeTest, StripesFollowTheTopologyThroughPrepareAndCommit) {
  ASSERT_TRUE(CommitBoth(router::Topology{1, {kFirst, kSecond}}).ok());
  ASSERT_TRUE(WaitOn(1)) << "the pair never ran over both circuits";
  {
    absl::MutexLock l(&send_.mu);
    const LanePath& p = send_.lane->path;
    EXPECT_GT(p.split_min_bytes, 0u);
    EXPECT_EQ(p.gbps, 3);
    ASSERT_EQ(p.stripes.size(), 1u);
    EXPECT_EQ(p.stripes[0].gbps, 3);
    // One lane over both circuits, each on its own NIC.
    EXPECT_NE(p.local_nic, p.stripes[0].local_nic);
    EXPECT_NE(p.circuit.port_a, p.stripes[0].circuit.port_a);
  }
  {
    // The receiver's lane is the sender's seen from the other end.
    absl::MutexLock l(&recv_.mu);
    absl::MutexLock s(&send_.mu);
    EXPECT_EQ(recv_.lane->path.local_nic, send_.lane->path.remote_nic);
    EXPECT_EQ(recv_.lane->path.stripes[0].local_nic, send_.lane->path.stripes[0].remote_nic);
    EXPECT_EQ(recv_.lane->path.stripes[0].circuit.port_b,
              send_.lane->path.stripes[0].circuit.port_b);
  }
  Exchange(0, 1);
  Exchange(1, 2);

  // PREPARE of a topology without the second circuit: both movers return
  // only once the pair is off the striped lane.
  router::Topology first_only{2, {kFirst}};
  absl::Status p1;
  std::thread other([&] { p1 = movers_[1]->Prepare(first_only, absl::Now() + absl::Seconds(10)); });
  absl::Status p0 = movers_[0]->Prepare(first_only, absl::Now() + absl::Seconds(10));
  other.join();
  ASSERT_TRUE(p0.ok()) << p0;
  ASSERT_TRUE(p1.ok()) << p1;
  {
    absl::MutexLock l(&send_.mu);
    EXPECT_TRUE(send_.lane->path.stripes.empty());
    EXPECT_FALSE(send_.lane->path.direct && send_.lane->path.circuit.port_a == 3);
  }
  ASSERT_TRUE(CommitBoth(first_only).ok());
  ASSERT_TRUE(WaitOn(0)) << "the pair never settled on the first circuit alone";
  {
    absl::MutexLock l(&send_.mu);
    EXPECT_EQ(send_.lane->path.circuit.port_a, 1);
    EXPECT_EQ(send_.lane->path.local_nic, "ocs0");
  }
  Exchange(0, 3);

  // Both circuits again: striped again.
  ASSERT_TRUE(CommitBoth(router::Topology{3, {kFirst, kSecond}}).ok());
  ASSERT_TRUE(WaitOn(1)) << "the pair never came back onto both circuits";
  Exchange(1, 4);
  EXPECT_EQ(movers_[0]->stats().moves_abandoned, 0u);
}

// Part 0 of tag 7, the only part of `r`, guarded, on `lane`.
void DescribeOnePart(Request& r, Comm& c, std::shared_ptr<Lane> lane, void* data, size_t size) {
  r.comm = &c;
  r.n = 1;
  r.guarded = true;
  r.lanes[0] = std::move(lane);
  r.data[0] = data;
  r.sizes[0] = size;
  r.tags[0] = 7;
  r.seqs[0] = 0;
}

// A striped lane over both circuits (its own connection on the first,
// a stripe on the second) that the test never sends on.
std::shared_ptr<Lane> SyntheticStripedLane() {
  auto lane = std::make_shared<Lane>();
  lane->path.local_nic = lane->path.remote_nic = "ocs0";
  lane->path.direct = true;
  lane->path.circuit = kFirst;
  lane->path.gbps = 3;
  lane->path.split_min_bytes = 65536;
  StripePath stripe;
  stripe.local_nic = stripe.remote_nic = "ocs1";
  stripe.circuit = kSecond;
  stripe.gbps = 3;
  lane->path.stripes.push_back(stripe);
  lane->connection = std::make_unique<IdleConnection>();
  lane->stripes.push_back(std::make_unique<IdleConnection>());
  return lane;
}

// One part (tag 7, number 0) of `c` on a striped lane: its primary piece is
// over (600000 B on the lane's own connection, above the 64 KiB split
// threshold; a send's acknowledged by the receiver) with its header and no
// second piece; its stripe piece is still pending at the first look and
// has failed (circuit lost) from the second on: what a test sees when the
// stripe's connection fails on the transport's progress thread while it
// runs. Complete() must never report that as the request's completion: it
// fails the comm over, and the part goes (again) over home.
void StripeFailsWhileTested(PathMover& mover, Comm& c) {
  static std::vector<uint8_t> buf(1 << 20);  // outlives what a failover posts on home
  // The primary piece [0, a) of a split part: 600000 B on the lane's own
  // connection, 397312 on the stripe (PostSendPart's r.sizes, the header's a).
  constexpr size_t kOwn = 600000, kStripe = 397312, kPrimary = kOwn + kStripe;
  std::shared_ptr<Lane> lane = SyntheticStripedLane();
  Request r;
  // A send's size: what a failover re-sends.
  DescribeOnePart(r, c, lane, buf.data(), c.is_send ? kPrimary : buf.size());
  r.parts[0] = std::make_unique<ScriptedRequest>(0, absl::OkStatus(), kOwn);
  SplitPart& sp = r.split[0];
  sp.min_bytes = 65536;
  sp.header = SplitHeader{kSplitMagic, 7, 0, kPrimary, 0};
  sp.has_header = true;
  sp.stripes_posted = !c.is_send;
  sp.stripe_bytes = c.is_send ? kStripe : 0;
  sp.stripes.push_back(std::make_unique<ScriptedRequest>(
      1, absl::UnavailableError("lost connection to the peer (stripe ocs1): EOF"), 0));
  {
    absl::MutexLock l(&c.mu);
    c.live.insert(&r);
    c.posted[7] = 1;
    if (c.is_send) c.acked[7] = 1;
    ++lane->outstanding;
  }
  // A sender fails over once the receiver's RECOVER is in (its mover
  // answers the LOST); a receiver at once.
  bool on_home = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!on_home && absl::Now() < deadline) {
    absl::MutexLock l(&c.mu);
    ASSERT_FALSE(mover.Complete(c, r))
        << "the request completed with its stripe piece's error instead of failing over";
    on_home = r.lanes[0] == c.home;
    if (!on_home) {
      c.mu.Unlock();
      absl::SleepFor(absl::Milliseconds(1));
      c.mu.Lock();
    }
  }
  EXPECT_TRUE(on_home) << "the part never went over home";
  EXPECT_EQ(mover.stats().failovers, 1u);
  absl::MutexLock l(&c.mu);
  EXPECT_EQ(lane->connection, nullptr) << "the striped lane should be closed";
  EXPECT_TRUE(lane->stripes.empty());
  EXPECT_TRUE(r.split[0].stripes.empty())
      << "the stripe pieces of a part moved to home are dropped";
  c.live.erase(&r);
  --r.lanes[0]->outstanding;
}

// A receiver's split part (tag 7, number 0) on a split lane over the first
// circuit: its primary piece arrived (600000 B), its header is in, and its
// second piece (200000 B) is posted on home, where the sender has not sent
// it yet. Then a malformed split header (bad magic) arrives on home: the
// comm fails (so would a RESENT or RECOVER timeout, or a re-post failing).
// The request must not complete OK, nor complete while its second piece is
// still posted: the late piece the sender then sends must land nowhere
// (under ASan, a write into the freed buffer is a heap-use-after-free).
TEST_F(PathMoverStripeTest, AFailedCommNeverCompletesAPartWhosePieceIsStillPosted) {
  constexpr size_t kPrimary = 600000, kSecond = 200000, kBuf = kPrimary + kSecond + 4096;
  auto buf = std::make_unique<uint8_t[]>(kBuf);
  auto lane = std::make_shared<Lane>();  // never sent on: its piece is scripted
  lane->path.local_nic = lane->path.remote_nic = "ocs0";
  lane->path.direct = true;
  lane->path.circuit = kFirst;
  lane->path.gbps = 3;
  lane->path.split_min_bytes = 65536;
  lane->connection = std::make_unique<IdleConnection>();
  Request r;
  DescribeOnePart(r, recv_, lane, buf.get(), kBuf);
  r.parts[0] = std::make_unique<ScriptedRequest>(0, absl::OkStatus(), kPrimary);
  SplitPart& sp = r.split[0];
  sp.min_bytes = 65536;
  sp.header = SplitHeader{kSplitMagic, 7, 0, kPrimary, kSecond};
  sp.has_header = true;
  {
    absl::MutexLock l(&recv_.mu);
    auto second = recv_.home->connection->Irecv(buf.get() + kPrimary, kBuf - kPrimary,
                                                uint64_t{7} | kSecondPieceBit);
    ASSERT_TRUE(second.ok()) << second.status();
    sp.second = *std::move(second);
    recv_.live.insert(&r);
    recv_.posted[7] = 1;
    recv_.split_seen = true;  // it takes split headers on home
    ++lane->outstanding;
  }
  SplitHeader bad{0xBAD0BAD0u, 7, 1, 4096, 4096};
  std::unique_ptr<transport::Request> sent;
  {
    absl::MutexLock l(&send_.mu);
    auto p = send_.home->connection->Isend(&bad, sizeof(bad), kSplitHeaderTag);
    ASSERT_TRUE(p.ok()) << p.status();
    sent = *std::move(p);
  }
  ASSERT_TRUE(sent->Wait(absl::Seconds(5)).ok()) << sent->status();

  bool failed = false, done = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done && absl::Now() < deadline) {
    absl::MutexLock l(&recv_.mu);
    done = movers_[1]->Complete(recv_, r);
    failed = recv_.lane_failed;
    if (!done) {
      recv_.mu.Unlock();
      absl::SleepFor(absl::Milliseconds(1));
      recv_.mu.Lock();
    }
  }
  ASSERT_TRUE(failed) << "the malformed split header did not fail the comm";
  ASSERT_TRUE(done) << "a failed comm must end its requests (with an error), not keep them";
  {
    absl::MutexLock l(&recv_.mu);
    ASSERT_TRUE(sp.second->Done()) << "the request completed while its second piece was posted";
    EXPECT_FALSE(sp.second->status().ok());
    // What Plugin::Test reports.
    int size = -1;
    const absl::Status st = RequestResult(recv_, r, &size);
    EXPECT_FALSE(st.ok()) << "a part without its second piece completed OK (" << size << " B)";
    recv_.live.erase(&r);
    --lane->outstanding;
  }
  // The request is over, its buffer NCCL's again (here: freed); the second
  // piece the sender still sends must land nowhere.
  buf.reset();
  std::vector<uint8_t> late(kSecond, 0x5a);
  std::unique_ptr<transport::Request> late_send;
  {
    absl::MutexLock l(&send_.mu);
    auto p = send_.home->connection->Isend(late.data(), late.size(), uint64_t{7} | kSecondPieceBit);
    if (p.ok()) late_send = *std::move(p);  // the receiver closed home: it may fail
  }
  if (late_send != nullptr) (void)late_send->Wait(absl::Seconds(5));
  absl::SleepFor(absl::Milliseconds(200));
}

TEST_F(PathMoverStripeTest, AStripePieceFailingWhileTestedFailsTheReceiverOver) {
  StripeFailsWhileTested(*movers_[1], recv_);
}

TEST_F(PathMoverStripeTest, AStripePieceFailingWhileTestedFailsTheSenderOver) {
  StripeFailsWhileTested(*movers_[0], send_);
}

}  // namespace
}  // namespace mixnet::nccl
