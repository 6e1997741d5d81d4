// PathMover (plugins/nccl_net/path_mover.h) in one process, over the real TCP
// transport on loopback: two "hosts" (each a mover with its own EPS and OCS
// devices on distinct 127.x addresses) and one send comm / recv comm pair,
// driven the way the plugin drives them (LanesFor, the transport's Isend /
// Irecv on the chosen lane, CountPosted). A COMMIT that adds a circuit moves
// the pair onto it while the two ends have posted different numbers of parts
// per tag, so the switch point makes the end that is behind keep posting on
// the old lane; a receiver that cannot use the target NIC refuses and the
// comm stays on EPS; a peer that goes away mid-move fails the comm (no
// endless retries); a send larger than its receive on the circuit is the
// request's size error at both ends, not a lost circuit. A grouped receive
// whose later part a lost circuit refuses fails over (its posted parts kept
// and counted); one whose later part home refuses fails the comm, its posted
// parts kept until the comm closes. Every byte checked.
// Threads: the test thread posts and waits; each mover runs its own thread.
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/nccl_net/path_mover.h"
#include "runtime/transport/request_state.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {
namespace {

constexpr char kSpec[] = R"(name: mover
ocs_switches:
  - {name: ocs0, ports: 4, switch_ms: 1}
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 127.0.41.1/32, gbps: 1}
      - {name: ocs0, role: ocs, address: 127.0.42.1/32, gbps: 100, switch: ocs0, port: 1}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 127.0.41.2/32, gbps: 1}
      - {name: ocs0, role: ocs, address: 127.0.42.2/32, gbps: 100, switch: ocs0, port: 2}
regions:
  - {name: r0, hosts: [h0, h1]}
)";

struct Host {
  std::map<std::string, std::unique_ptr<transport::Device>> devices;
  std::unique_ptr<PathMover> mover;
  bool refuse_ocs = false;
};

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

class PathMoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = cluster::ClusterSpec::Parse(kSpec);
    ASSERT_TRUE(spec.ok()) << spec.status();
    for (int h = 0; h < 2; ++h) {
      Host& host = hosts_[h];
      host.devices["eps0"] = MakeDevice(absl::StrCat("127.0.41.", h + 1));
      host.devices["ocs0"] = MakeDevice(absl::StrCat("127.0.42.", h + 1));
      PathMover::Options o;
      o.spec = *spec;
      o.host = absl::StrCat("h", h);
      o.initial = router::Topology{0, {}};
      o.device = [&host](const std::string& nic) -> absl::StatusOr<transport::Device*> {
        if (nic == "ocs0" && host.refuse_ocs) return absl::UnavailableError("ocs0 is down here");
        auto it = host.devices.find(nic);
        if (it == host.devices.end()) return absl::NotFoundError(nic);
        return it->second.get();
      };
      o.connect_timeout = absl::Seconds(5);
      auto m = PathMover::Create(std::move(o));
      ASSERT_TRUE(m.ok()) << m.status();
      host.mover = *std::move(m);
    }
    // The comm pair's first lane: EPS, h0 -> h1.
    transport::ConnectOptions dial, wait;
    dial.remote_address = hosts_[1].devices["eps0"]->address();
    dial.connection_id = wait.connection_id = 77;
    dial.initiator = true;
    dial.peer_name = "h1";
    wait.peer_name = "h0";
    absl::StatusOr<std::unique_ptr<transport::Connection>> accepted;
    std::thread t([&] { accepted = hosts_[1].devices["eps0"]->Connect(wait); });
    auto dialed = hosts_[0].devices["eps0"]->Connect(dial);
    t.join();
    ASSERT_TRUE(dialed.ok()) << dialed.status();
    ASSERT_TRUE(accepted.ok()) << accepted.status();
    send_.is_send = true;
    send_.peer_host = "h1";
    recv_.peer_host = "h0";
    {
      absl::MutexLock l(&send_.mu);
      send_.lane = std::make_shared<Lane>();
      send_.lane->path.local_nic = "eps0";
      send_.lane->path.remote_nic = "eps0";
      send_.lane->connection = *std::move(dialed);
      send_.home = send_.lane;  // as Plugin::AddComm does
    }
    {
      absl::MutexLock l(&recv_.mu);
      recv_.lane = std::make_shared<Lane>();
      recv_.lane->path.local_nic = "eps0";
      recv_.lane->connection = *std::move(accepted);
      recv_.home = recv_.lane;
    }
    hosts_[0].mover->Add(&send_);
    hosts_[1].mover->Add(&recv_);
  }

  void TearDown() override {
    if (hosts_[0].mover != nullptr) hosts_[0].mover->Remove(&send_);
    if (hosts_[1].mover != nullptr) hosts_[1].mover->Remove(&recv_);
    for (Comm* c : {&send_, &recv_}) {
      absl::MutexLock l(&c->mu);
      c->move.reset();
      c->lane.reset();
      c->home.reset();
    }
    for (Host& h : hosts_) h.mover.reset();
  }

  // Waits until `c` has a move in progress (the mover threads start them).
  bool WaitMoving(Comm& c, absl::Duration timeout = absl::Seconds(5)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      {
        absl::MutexLock l(&c.mu);
        if (c.move != nullptr) return true;
      }
      absl::SleepFor(absl::Microseconds(200));
    }
    return false;
  }

  struct Posted {
    std::unique_ptr<transport::Request> request;
    std::shared_ptr<Lane> lane;
  };

  // Calls `post(lane)` with the comm's mutex held once LanesFor gives the
  // lane for `tag`, retrying (and advancing the move) while it says "not
  // now"; nullopt when it never does.
  template <typename Post>
  auto OnLane(Comm& c, uint32_t tag, Post post)
      -> std::optional<decltype(post(std::shared_ptr<Lane>()))> {
    PathMover* mover = (&c == &send_ ? hosts_[0] : hosts_[1]).mover.get();
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      {
        absl::MutexLock l(&c.mu);
        std::shared_ptr<Lane> lane;
        if (LanesFor(c, &tag, 1, &lane)) return post(std::move(lane));
        mover->Advance(c);
      }
      absl::SleepFor(absl::Microseconds(200));
    }
    ADD_FAILURE() << "posting on " << (c.is_send ? "send" : "recv") << " comm never allowed";
    return std::nullopt;
  }

  // Posts one part as the plugin does, on the transport directly.
  Posted Post(Comm& c, uint32_t tag, void* buf, size_t size) {
    std::optional<Posted> p = OnLane(c, tag, [&](std::shared_ptr<Lane> lane) {
      auto r = c.is_send ? lane->connection->Isend(buf, size, tag)
                         : lane->connection->Irecv(buf, size, tag);
      EXPECT_TRUE(r.ok()) << r.status();
      CountPosted(c, &tag, 1, &lane);
      return Posted{r.ok() ? *std::move(r) : nullptr, lane};
    });
    return p.has_value() ? std::move(*p) : Posted{};
  }

  // Waits for a part and releases its lane reference as Test does.
  void Finish(Comm& c, Posted& p, size_t expect_bytes) {
    ASSERT_NE(p.request, nullptr);
    ASSERT_TRUE(p.request->Wait(absl::Seconds(10)).ok()) << p.request->status();
    EXPECT_EQ(p.request->bytes(), expect_bytes);
    absl::MutexLock l(&c.mu);
    --p.lane->outstanding;
  }

  // Posts a one-part request the way Plugin::Isend / Irecv do: on the lane
  // LanesFor picks, through PostSendPart / PostRecvPart, counted and live.
  std::unique_ptr<Request> PostRequest(Comm& c, uint32_t tag, void* buf, size_t size) {
    std::optional<std::unique_ptr<Request>> p =
        OnLane(c, tag, [&](std::shared_ptr<Lane> lane) -> std::unique_ptr<Request> {
          auto r = std::make_unique<Request>();
          r->comm = &c;
          r->n = 1;
          r->order = c.next_order++;
          r->lanes[0] = lane;
          r->data[0] = buf;
          r->sizes[0] = size;
          r->tags[0] = tag;
          auto it = c.posted.find(tag);
          r->seqs[0] = it == c.posted.end() ? 0 : it->second;
          r->guarded = lane != c.home;
          absl::Status st = c.is_send ? PostSendPart(c, *r, 0, 0.0) : PostRecvPart(c, *r, 0);
          EXPECT_TRUE(st.ok()) << st;
          if (!st.ok()) return nullptr;
          CountPosted(c, &tag, 1, &lane);
          c.live.insert(r.get());
          return r;
        });
    return p.has_value() ? std::move(*p) : nullptr;
  }

  // Tests a guarded request as Plugin::Test does until it is complete, and
  // returns what Test reports for it (RequestResult).
  absl::Status TestUntilDone(Comm& c, Request& r) {
    PathMover* mover = (&c == &send_ ? hosts_[0] : hosts_[1]).mover.get();
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      {
        absl::MutexLock l(&c.mu);
        if (mover->Complete(c, r)) {
          int size = -1;
          absl::Status st = RequestResult(c, r, &size);
          c.live.erase(&r);
          --r.lanes[0]->outstanding;
          return st;
        }
      }
      absl::SleepFor(absl::Microseconds(200));
    }
    return absl::DeadlineExceededError("the request never completed");
  }

  // The lanes one message used at each end.
  struct Sent {
    std::shared_ptr<Lane> send_lane, recv_lane;
  };
  // One message of `bytes` (Payload(bytes, seed)) from send_ to recv_ under
  // `tag`: both ends posted and finished, the bytes that arrived compared.
  Sent SendOne(uint32_t tag, size_t bytes, int seed) {
    std::vector<uint8_t> out = Payload(bytes, seed), in(bytes, 0);
    Posted r = Post(recv_, tag, in.data(), in.size());
    Posted s = Post(send_, tag, out.data(), out.size());
    Finish(send_, s, bytes);
    Finish(recv_, r, bytes);
    EXPECT_EQ(in, out) << "message of " << bytes << " bytes, tag " << tag;
    return Sent{s.lane, r.lane};
  }

  bool WaitIdle(Comm& c, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      {
        absl::MutexLock l(&c.mu);
        if (c.move == nullptr && c.moves > 0) return true;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  }

  Host hosts_[2];
  Comm send_, recv_;
};

// Calls a RefusingConnection took (kept outside it: a failover closes it).
struct Calls {
  int sends = 0, recvs = 0;
};

// A connection whose requests stay pending (nothing completes unseen) and
// that refuses its `refuse_recv`-th receive (from 1; 0: none) as a lost
// connection would.
class RefusingConnection : public transport::Connection {
 public:
  RefusingConnection(Calls* calls, int refuse_recv) : calls_(calls), refuse_recv_(refuse_recv) {}
  absl::StatusOr<std::unique_ptr<transport::Request>> Isend(const void*, size_t,
                                                            uint64_t) override {
    ++calls_->sends;
    return Pending();
  }
  absl::StatusOr<std::unique_ptr<transport::Request>> Irecv(void*, size_t, uint64_t) override {
    if (++calls_->recvs == refuse_recv_) {
      return absl::UnavailableError("recv: Connection reset by peer");
    }
    return Pending();
  }
  std::string peer_name() const override { return "h0 (refusing test connection)"; }
  absl::Status health() const override { return absl::OkStatus(); }

 private:
  static std::unique_ptr<transport::Request> Pending() {
    return std::make_unique<transport::StateRequest>(std::make_shared<transport::RequestState>());
  }
  Calls* const calls_;
  const int refuse_recv_;
};

// A receive comm on a circuit lane whose connection refuses its second
// receive (`circuit_refuses`), or on home refusing its second receive; the
// calls each lane's connection took.
struct GroupedReceive {
  explicit GroupedReceive(bool circuit_refuses) {
    auto h = std::make_unique<RefusingConnection>(&home, circuit_refuses ? 0 : 2);
    auto o = std::make_unique<RefusingConnection>(&circuit, circuit_refuses ? 2 : 0);
    absl::MutexLock l(&comm.mu);
    comm.peer_host = "h0";
    comm.home = std::make_shared<Lane>();
    comm.home->path.local_nic = comm.home->path.remote_nic = "eps0";
    comm.home->connection = std::move(h);
    auto lane = std::make_shared<Lane>();
    lane->path.local_nic = lane->path.remote_nic = "ocs0";
    lane->path.direct = true;
    lane->path.circuit = cluster::CircuitSpec{"ocs0", 1, 2};
    lane->connection = std::move(o);
    comm.lane = circuit_refuses ? lane : comm.home;
  }
  // An n = 2 irecv of tag 4 as Plugin::Irecv describes it, on comm.lane.
  std::unique_ptr<Request> Describe() {
    auto r = std::make_unique<Request>();
    r->comm = &comm;
    r->n = 2;
    for (int i = 0; i < 2; ++i) {
      r->lanes[i] = comm.lane;
      r->data[i] = bufs[i].data();
      r->sizes[i] = bufs[i].size();
      r->tags[i] = 4;
      r->seqs[i] = i;
      r->guarded |= comm.lane != comm.home;
    }
    return r;
  }
  Calls home, circuit;
  Comm comm;
  std::vector<uint8_t> bufs[2] = {std::vector<uint8_t>(4096), std::vector<uint8_t>(4096)};
};

// The circuit refuses part 1 after part 0 was posted on it (the lane died
// in between): a lost circuit, not the comm's failure. The request stands
// with both parts counted, and the failover re-posts both on home (part 0
// never arrived over the lane it closed) and tells the sender (RECOVER).
TEST_F(PathMoverTest, AGroupedReceiveWhoseLaterPartALostCircuitRefusesFailsOver) {
  GroupedReceive g(/*circuit_refuses=*/true);
  absl::MutexLock l(&g.comm.mu);
  std::shared_ptr<Lane> circuit = g.comm.lane;
  absl::StatusOr<std::unique_ptr<Request>> posted =
      PostReceive(hosts_[1].mover.get(), g.comm, g.Describe());
  ASSERT_TRUE(posted.ok()) << "a lost circuit failed the irecv: " << posted.status();
  ASSERT_NE(*posted, nullptr) << "part 0 was out: the request cannot be retried";
  Request& r = **posted;
  EXPECT_EQ(g.circuit.recvs, 2);
  EXPECT_EQ(g.comm.posted[4], 2u);
  EXPECT_TRUE(g.comm.live.contains(&r));
  EXPECT_FALSE(g.comm.lane_failed);
  EXPECT_EQ(hosts_[1].mover->stats().failovers, 1u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(r.lanes[i], g.comm.home) << "part " << i;
  EXPECT_EQ(g.home.recvs, 2) << "both parts re-posted on home";
  EXPECT_EQ(g.home.sends, 1) << "RECOVER not sent";
  EXPECT_EQ(circuit->outstanding, 0);
  EXPECT_EQ(g.comm.home->outstanding, 2);
  EXPECT_EQ(circuit->connection, nullptr) << "the lost circuit's lane should be closed";
  g.comm.live.erase(&r);
}

// Home refuses part 1: the comm failed, and the irecv fails. Part 0 is
// posted into NCCL's buffer, so its request is kept (not destroyed with the
// receive still posted) until the comm closes, counted so both ends still
// number alike, and no lane holds an outstanding part nobody will test.
TEST_F(PathMoverTest, AGroupedReceiveWhoseLaterPartHomeRefusesFailsTheComm) {
  GroupedReceive g(/*circuit_refuses=*/false);
  absl::MutexLock l(&g.comm.mu);
  absl::StatusOr<std::unique_ptr<Request>> posted =
      PostReceive(hosts_[1].mover.get(), g.comm, g.Describe());
  ASSERT_FALSE(posted.ok());
  EXPECT_TRUE(absl::IsUnavailable(posted.status())) << posted.status();
  EXPECT_TRUE(g.comm.lane_failed);
  EXPECT_EQ(g.comm.posted[4], 1u);
  ASSERT_EQ(g.comm.failed_posts.size(), 1u) << "the request with part 0 posted was not kept";
  EXPECT_NE(g.comm.failed_posts[0]->parts[0], nullptr);
  EXPECT_EQ(g.comm.home->outstanding, 0);
  EXPECT_TRUE(g.comm.live.empty());
  EXPECT_EQ(hosts_[1].mover->stats().failovers, 0u);
}

TEST_F(PathMoverTest, MovesOntoANewCircuitWhileTheEndsAreAtDifferentCounts) {
  constexpr size_t kBig = 200 << 10, kSmall = 512;  // rendezvous and eager
  // Tag 7: the receiver is 4 parts ahead. Tag 9: the sender is 1 part ahead.
  std::vector<std::vector<uint8_t>> out7, in7(8), out9, in9(2);
  for (int i = 0; i < 8; ++i) out7.push_back(Payload(i % 2 ? kSmall : kBig, i));
  for (int i = 0; i < 2; ++i) out9.push_back(Payload(kSmall, 100 + i));
  for (int i = 0; i < 8; ++i) in7[i].assign(out7[i].size(), 0);
  for (int i = 0; i < 2; ++i) in9[i].assign(kSmall, 0);

  std::vector<Posted> r7, s7, r9, s9;
  for (int i = 0; i < 6; ++i) r7.push_back(Post(recv_, 7, in7[i].data(), in7[i].size()));
  for (int i = 0; i < 2; ++i) s7.push_back(Post(send_, 7, out7[i].data(), out7[i].size()));
  s9.push_back(Post(send_, 9, out9[0].data(), kSmall));

  // The controller commits a circuit between the hosts' OCS NICs.
  router::Topology t{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  ASSERT_TRUE(hosts_[1].mover->Commit(t, absl::Now() + absl::Seconds(1)).ok());
  ASSERT_TRUE(hosts_[0].mover->Commit(t, absl::Now() + absl::Seconds(1)).ok());
  // The sender's MOVE is out and the receiver has answered it (neither move
  // can finish before the parts below the switch point are posted).
  ASSERT_TRUE(WaitMoving(send_));
  ASSERT_TRUE(WaitMoving(recv_));

  // Sends 3..6 of tag 7 are below the switch point (the receiver posted 6):
  // they go on EPS; the 7th and 8th go on the circuit. Receive 1 of tag 9 is
  // below the sender's count: EPS; receive 2 of tag 9: the circuit.
  for (int i = 2; i < 8; ++i) s7.push_back(Post(send_, 7, out7[i].data(), out7[i].size()));
  r9.push_back(Post(recv_, 9, in9[0].data(), kSmall));
  for (int i = 6; i < 8; ++i) r7.push_back(Post(recv_, 7, in7[i].data(), in7[i].size()));
  s9.push_back(Post(send_, 9, out9[1].data(), kSmall));
  r9.push_back(Post(recv_, 9, in9[1].data(), kSmall));

  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(s7[i].lane->path.direct, i >= 6) << "send " << i << " of tag 7";
    EXPECT_EQ(r7[i].lane->path.direct, i >= 6) << "recv " << i << " of tag 7";
  }
  EXPECT_FALSE(s9[0].lane->path.direct);
  EXPECT_FALSE(r9[0].lane->path.direct);
  EXPECT_TRUE(s9[1].lane->path.direct);
  EXPECT_TRUE(r9[1].lane->path.direct);
  for (int i = 0; i < 8; ++i) {
    Finish(send_, s7[i], out7[i].size());
    Finish(recv_, r7[i], out7[i].size());
    EXPECT_EQ(in7[i], out7[i]) << "tag 7 message " << i;
  }
  for (int i = 0; i < 2; ++i) {
    Finish(send_, s9[i], kSmall);
    Finish(recv_, r9[i], kSmall);
    EXPECT_EQ(in9[i], out9[i]) << "tag 9 message " << i;
  }
  ASSERT_TRUE(WaitIdle(send_, absl::Seconds(10)));
  ASSERT_TRUE(WaitIdle(recv_, absl::Seconds(10)));
  std::shared_ptr<Lane> circuit_lane[2];
  {
    absl::MutexLock l(&send_.mu);
    EXPECT_TRUE(send_.lane->path.direct);
    EXPECT_EQ(send_.lane->path.local_nic, "ocs0");
    circuit_lane[0] = send_.lane;
  }
  {
    absl::MutexLock l(&recv_.mu);
    circuit_lane[1] = recv_.lane;
  }
  EXPECT_EQ(hosts_[0].mover->stats().moves_done, 1u);
  EXPECT_EQ(hosts_[1].mover->stats().moves_done, 1u);

  // PREPARE of a topology without the circuit (both hosts at once, as the
  // controller sends it) moves the pair back to EPS before it returns; the
  // receiver's PREPARE waits for its sender to move it.
  router::Topology none{3, {}};
  absl::Status p1;
  std::thread other([&] { p1 = hosts_[1].mover->Prepare(none, absl::Now() + absl::Seconds(5)); });
  absl::Status p0 = hosts_[0].mover->Prepare(none, absl::Now() + absl::Seconds(5));
  other.join();
  ASSERT_TRUE(p0.ok()) << p0;
  ASSERT_TRUE(p1.ok()) << p1;
  {
    absl::MutexLock l(&send_.mu);
    EXPECT_FALSE(send_.lane->path.direct);
  }
  const Sent back = SendOne(7, kBig, 9);
  EXPECT_FALSE(back.send_lane->path.direct);
  // Back on EPS means back on each end's home lane: the move made no
  // connection (MOVE and READY agreed on home).
  ASSERT_TRUE(WaitIdle(send_, absl::Seconds(10)));
  ASSERT_TRUE(WaitIdle(recv_, absl::Seconds(10)));
  for (auto [c, used] : {std::pair{&send_, back.send_lane}, std::pair{&recv_, back.recv_lane}}) {
    absl::MutexLock l(&c->mu);
    EXPECT_EQ(c->lane, c->home) << (c->is_send ? "sender" : "receiver");
    EXPECT_EQ(used, c->home) << (c->is_send ? "sender" : "receiver");
  }
  // Both ends kept the circuit's lane (suspended). The circuit back: the
  // pair moves onto that same lane, with no new connection.
  for (int h : {0, 1}) EXPECT_EQ(hosts_[h].mover->stats().lanes_kept, 1);
  router::Topology again{4, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  ASSERT_TRUE(hosts_[1].mover->Commit(again, absl::Now() + absl::Seconds(1)).ok());
  ASSERT_TRUE(hosts_[0].mover->Commit(again, absl::Now() + absl::Seconds(1)).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (bool on = false; !on && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(1));
    absl::MutexLock l(&send_.mu);
    on = send_.move == nullptr && send_.lane->path.direct;
  }
  const Sent third = SendOne(7, kBig, 11);
  ASSERT_TRUE(WaitIdle(send_, absl::Seconds(10)));
  ASSERT_TRUE(WaitIdle(recv_, absl::Seconds(10)));
  EXPECT_EQ(third.send_lane, circuit_lane[0]);
  EXPECT_EQ(third.recv_lane, circuit_lane[1]);
  for (int h : {0, 1}) {
    // Onto home, then onto the kept lane; nothing kept now (home never is).
    EXPECT_EQ(hosts_[h].mover->stats().lanes_reused, 2u) << "host " << h;
    EXPECT_EQ(hosts_[h].mover->stats().lanes_kept, 0) << "host " << h;
  }
}

// Settle (what the worker agent waits for in a warm-up sweep round) returns
// once the pair runs on the committed circuit, with nothing posted: the
// mover threads make the lane on their own. The next sweep round (PREPARE
// and COMMIT of a topology without the circuit) brings the pair back home,
// and Settle returns with the circuit's lane kept at both ends.
TEST_F(PathMoverTest, SettleWaitsUntilTheCommsRunOnTheInstalledPaths) {
  auto both = [&](auto call) {
    absl::Status s1;
    std::thread other([&] { s1 = call(*hosts_[1].mover); });
    absl::Status s0 = call(*hosts_[0].mover);
    other.join();
    EXPECT_TRUE(s0.ok()) << "h0: " << s0;
    EXPECT_TRUE(s1.ok()) << "h1: " << s1;
  };
  auto settle = [](PathMover& m) { return m.Settle(absl::Now() + absl::Seconds(10)); };
  const router::Topology lit{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  both([&](PathMover& m) { return m.Commit(lit, absl::Now() + absl::Seconds(1)); });
  both(settle);
  {
    absl::MutexLock l(&send_.mu);
    EXPECT_EQ(send_.move, nullptr);
    EXPECT_TRUE(send_.lane->path.direct);
    EXPECT_EQ(send_.lane->path.local_nic, "ocs0");
  }
  {
    absl::MutexLock l(&recv_.mu);
    EXPECT_EQ(recv_.move, nullptr);
    EXPECT_NE(recv_.lane, recv_.home);
  }
  for (int h : {0, 1}) EXPECT_EQ(hosts_[h].mover->stats().moves_done, 1u) << "host " << h;

  const router::Topology dark{3, {}};
  both([&](PathMover& m) { return m.Prepare(dark, absl::Now() + absl::Seconds(5)); });
  both([&](PathMover& m) { return m.Commit(dark, absl::Now() + absl::Seconds(1)); });
  both(settle);
  for (Comm* c : {&send_, &recv_}) {
    absl::MutexLock l(&c->mu);
    EXPECT_EQ(c->move, nullptr);
    EXPECT_EQ(c->lane, c->home) << (c->is_send ? "sender" : "receiver");
  }
  for (int h : {0, 1}) EXPECT_EQ(hosts_[h].mover->stats().lanes_kept, 1) << "host " << h;
}

// The sender's COMMIT comes first: the receiver, whose topology lacks the
// circuit yet, refuses the move, which the sender abandons with a 50 ms
// backoff. Settle waits through that backoff (it ends before the deadline)
// and for the retried move once the receiver has committed too.
TEST_F(PathMoverTest, SettleRetriesAMoveThePeerRefusedBeforeItsCommit) {
  const router::Topology lit{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  ASSERT_TRUE(hosts_[0].mover->Commit(lit, absl::Now() + absl::Seconds(1)).ok());
  absl::Status settled;
  std::thread waiter([&] { settled = hosts_[0].mover->Settle(absl::Now() + absl::Seconds(10)); });
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (hosts_[0].mover->stats().moves_abandoned == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_GE(hosts_[0].mover->stats().moves_abandoned, 1u) << "the receiver did not refuse";
  ASSERT_TRUE(hosts_[1].mover->Commit(lit, absl::Now() + absl::Seconds(1)).ok());
  waiter.join();
  EXPECT_TRUE(settled.ok()) << settled;
  absl::MutexLock l(&send_.mu);
  EXPECT_EQ(send_.move, nullptr);
  EXPECT_TRUE(send_.lane->path.direct) << "Settle returned with the pair still on EPS";
}

// A COMMIT with router v2 weights that split the pair (EPS 1 Gbit/s beside a
// 100 Gbit/s circuit): CommitWithRouting installs both before any move, so
// the comm moves once, straight onto the split lane, instead of onto the
// circuit under v1's paths and then again (a second connection) onto its
// split.
TEST_F(PathMoverTest, ACommitWithItsRoutingMovesOnceOntoTheSplitLane) {
  router::RoutingPlan plan;
  plan.hosts = {"h0", "h1"};
  plan.bytes = {0, 1e9, 1e9, 0};
  const router::Topology lit{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  for (int h : {1, 0}) {
    absl::Status routed;
    ASSERT_TRUE(hosts_[h]
                    .mover->CommitWithRouting(lit, &plan, absl::Now() + absl::Seconds(1), &routed)
                    .ok());
    ASSERT_TRUE(routed.ok()) << routed;
  }
  ASSERT_TRUE(hosts_[0].mover->Settle(absl::Now() + absl::Seconds(10)).ok());
  {
    absl::MutexLock l(&send_.mu);
    EXPECT_TRUE(send_.lane->path.direct);
    EXPECT_GT(send_.lane->path.split_min_bytes, 0u) << "not on a split lane";
  }
  EXPECT_GT(hosts_[0].mover->EpsShare(send_), 0);
  EXPECT_EQ(hosts_[0].mover->stats().moves_started, 1u);
}

// A receiver that never answers (its comm is not in its host's mover):
// Settle gives up at its deadline and names the send comm still moving.
TEST_F(PathMoverTest, SettleNamesTheCommStillMovingAtItsDeadline) {
  hosts_[1].mover->Remove(&recv_);
  const router::Topology lit{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  ASSERT_TRUE(hosts_[0].mover->Commit(lit, absl::Now() + absl::Seconds(1)).ok());
  const absl::Time start = absl::Now();
  const absl::Status s = hosts_[0].mover->Settle(start + absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("send comm to h1"), std::string::npos) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

// A send on the circuit larger than the receive it meets (128 KiB into
// 64 KiB, above the transport's eager limit): the transport refuses it
// (InvalidArgument) at both ends. That is the request's size error at both
// ends, not a lost circuit: no failover, the comm stays on its circuit, and
// neither end reports success.
TEST_F(PathMoverTest, ASizeRefusalOnACircuitIsTheRequestsErrorNotAFailover) {
  router::Topology t{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  ASSERT_TRUE(hosts_[1].mover->Commit(t, absl::Now() + absl::Seconds(1)).ok());
  ASSERT_TRUE(hosts_[0].mover->Commit(t, absl::Now() + absl::Seconds(1)).ok());
  ASSERT_TRUE(WaitIdle(send_, absl::Seconds(10)));
  ASSERT_TRUE(WaitIdle(recv_, absl::Seconds(10)));
  std::vector<uint8_t> out = Payload(128 << 10, 1), in(64 << 10, 0);
  std::unique_ptr<Request> r = PostRequest(recv_, 5, in.data(), in.size());
  std::unique_ptr<Request> s = PostRequest(send_, 5, out.data(), out.size());
  ASSERT_NE(r, nullptr);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(r->guarded && s->guarded) << "the pair is not on the circuit";
  const absl::Status got = TestUntilDone(recv_, *r);
  const absl::Status sent = TestUntilDone(send_, *s);
  EXPECT_TRUE(absl::IsOutOfRange(got)) << got;
  EXPECT_TRUE(absl::IsOutOfRange(sent)) << sent;
  EXPECT_EQ(hosts_[0].mover->stats().failovers, 0u);
  EXPECT_EQ(hosts_[1].mover->stats().failovers, 0u);
  for (Comm* c : {&send_, &recv_}) {
    absl::MutexLock l(&c->mu);
    EXPECT_TRUE(c->lane->path.direct)
        << (c->is_send ? "sender" : "receiver") << " left the circuit";
    EXPECT_FALSE(c->lane_failed);
  }
  // The comm goes on over the circuit.
  EXPECT_TRUE(SendOne(5, 128 << 10, 2).send_lane->path.direct);
}

TEST_F(PathMoverTest, AReceiverThatCannotUseTheTargetRefusesAndTheCommStays) {
  hosts_[1].refuse_ocs = true;
  router::Topology t{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  ASSERT_TRUE(hosts_[1].mover->Commit(t, absl::Now() + absl::Seconds(1)).ok());
  ASSERT_TRUE(hosts_[0].mover->Commit(t, absl::Now() + absl::Seconds(1)).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (hosts_[0].mover->stats().moves_abandoned == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_GE(hosts_[0].mover->stats().moves_abandoned, 1u);
  // Data still flows, on EPS (the mover may try again; every try is refused).
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE(absl::StrCat("message ", i));
    EXPECT_FALSE(SendOne(3, 4096, i).send_lane->path.direct);
  }
  EXPECT_EQ(hosts_[0].mover->stats().moves_done, 0u);
}

}  // namespace
}  // namespace mixnet::nccl

namespace mixnet::nccl {
namespace {

TEST_F(PathMoverTest, APeerThatGoesAwayMidMoveFailsTheCommInsteadOfStallingIt) {
  router::Topology t{2, {cluster::CircuitSpec{"ocs0", 1, 2}}};
  ASSERT_TRUE(hosts_[0].mover->Commit(t, absl::Now() + absl::Seconds(1)).ok());
  ASSERT_TRUE(WaitMoving(send_));  // MOVE sent; the receiver's host never follows
  hosts_[1].mover->Remove(&recv_);
  {
    absl::MutexLock l(&recv_.mu);
    recv_.move.reset();
    recv_.lane.reset();  // the receiving end closes
    recv_.home.reset();
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool failed = false;
  while (!failed && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
    absl::MutexLock l(&send_.mu);
    failed = send_.lane_failed;
  }
  // The plugin turns this into an Unavailable error on the next isend
  // instead of NULL requests forever (a move that cannot finish).
  EXPECT_TRUE(failed);
}

}  // namespace
}  // namespace mixnet::nccl
