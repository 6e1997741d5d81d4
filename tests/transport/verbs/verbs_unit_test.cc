// Hardware-free tests of the verbs transport's pure parts: wire header,
// address blob, handshake, the registration cache (with a fake backend), and
// CreateVerbsDevice's answer on this machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/memory_registry.h"
#include "runtime/transport/verbs/nic_adapter.h"
#include "runtime/transport/verbs/queue_pair.h"
#include "runtime/transport/verbs/verbs_device.h"
#include "runtime/transport/verbs/wire.h"
#include "tests/transport/verbs/sysfs_tree.h"

namespace mixnet::transport::verbs {
namespace {

using ::testing::HasSubstr;

TEST(WireTest, HeaderRoundTrip) {
  WireHeader h;
  h.type = MsgType::kCts;
  h.reason = 2;
  h.credits = 0xdeadbeef;
  h.tag = 0x0102030405060708ull;
  h.length = 0;
  h.id = ~0ull;
  h.addr = 0x7fff12345678ull;
  h.rkey = 0x11223344;
  h.cookie = 99;
  uint8_t buf[kWireHeaderBytes];
  EncodeHeader(h, buf);
  absl::StatusOr<WireHeader> d = DecodeHeader(buf, sizeof(buf));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->type, MsgType::kCts);
  EXPECT_EQ(d->reason, 2);
  EXPECT_EQ(d->credits, 0xdeadbeefu);
  EXPECT_EQ(d->tag, h.tag);
  EXPECT_EQ(d->id, h.id);
  EXPECT_EQ(d->addr, h.addr);
  EXPECT_EQ(d->rkey, h.rkey);
  EXPECT_EQ(d->cookie, 99u);
  // Little-endian on the wire regardless of the host.
  EXPECT_EQ(buf[8], 0x08);
  EXPECT_EQ(buf[15], 0x01);
}

TEST(WireTest, EagerPayloadLengthMustMatch) {
  std::vector<uint8_t> buf(kWireHeaderBytes + 10);
  WireHeader h;
  h.type = MsgType::kEager;
  h.length = 10;
  EncodeHeader(h, buf.data());
  EXPECT_TRUE(DecodeHeader(buf.data(), buf.size()).ok());
  EXPECT_EQ(DecodeHeader(buf.data(), buf.size() - 1).status().code(), absl::StatusCode::kDataLoss);
  h.length = 0;  // zero-byte message
  EncodeHeader(h, buf.data());
  EXPECT_TRUE(DecodeHeader(buf.data(), kWireHeaderBytes).ok());
}

TEST(WireTest, RejectsGarbage) {
  uint8_t buf[kWireHeaderBytes] = {};
  EXPECT_THAT(std::string(DecodeHeader(buf, sizeof(buf)).status().message()), HasSubstr("magic"));
  EXPECT_THAT(std::string(DecodeHeader(buf, 10).status().message()), HasSubstr("shorter"));
  WireHeader h;
  EncodeHeader(h, buf);
  buf[2] = 77;
  EXPECT_THAT(std::string(DecodeHeader(buf, sizeof(buf)).status().message()),
              HasSubstr("unknown message type"));
  h.type = MsgType::kRts;
  EncodeHeader(h, buf);
  std::vector<uint8_t> longer(buf, buf + sizeof(buf));
  longer.push_back(0);
  EXPECT_FALSE(DecodeHeader(longer.data(), longer.size()).ok());  // RTS carries no payload
}

TEST(WireTest, OnlyCreditMessagesAreFree) {
  EXPECT_FALSE(ConsumesCredit(MsgType::kCredit));
  for (MsgType t : {MsgType::kEager, MsgType::kRts, MsgType::kCts, MsgType::kNack}) {
    EXPECT_TRUE(ConsumesCredit(t)) << MsgTypeName(t);
  }
}

TEST(AddressTest, RoundTrip) {
  VerbsAddress a;
  a.ip = "10.1.2.3";
  a.tcp_port = 4711;
  a.device = "mlx5_0";
  a.ib_port = 2;
  a.lid = 17;
  a.gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  const std::string blob = a.Encode();
  EXPECT_EQ(blob, "verbs1|10.1.2.3|4711|mlx5_0|2|17|fe80:0000:0000:0000:0211:22ff:fe33:4455");
  absl::StatusOr<VerbsAddress> d = VerbsAddress::Decode(blob);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->ip, a.ip);
  EXPECT_EQ(d->tcp_port, a.tcp_port);
  EXPECT_EQ(d->device, a.device);
  EXPECT_EQ(d->ib_port, a.ib_port);
  EXPECT_EQ(d->lid, a.lid);
  EXPECT_EQ(d->gid, a.gid);
  EXPECT_EQ(d->ToString(), "mlx5_0:2 (bootstrap 10.1.2.3:4711)");
}

TEST(AddressTest, RejectsBadBlobs) {
  const std::string gid = "fe80:0000:0000:0000:0000:0000:0000:0001";
  for (const std::string& bad : {
           std::string("10.0.0.1:4711"),  // a TCP device's address
           std::string(""),
           "verbs2|10.0.0.1|1|mlx5_0|1|1|" + gid,
           "verbs1|10.0.0.300|1|mlx5_0|1|1|" + gid,
           "verbs1|10.0.0.1|0|mlx5_0|1|1|" + gid,
           "verbs1|10.0.0.1|70000|mlx5_0|1|1|" + gid,
           "verbs1|10.0.0.1|1||1|1|" + gid,
           "verbs1|10.0.0.1|1|mlx5_0|300|1|" + gid,
           "verbs1|10.0.0.1|1|mlx5_0|1|x|" + gid,
           std::string("verbs1|10.0.0.1|1|mlx5_0|1|1|fe80::1"),
           std::string("verbs1|10.0.0.1|1|mlx5_0|1|1|fe80:0000:0000:0000:0000:0000:0000:00g1"),
       }) {
    absl::StatusOr<VerbsAddress> d = VerbsAddress::Decode(bad);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(VerbsAddress::Decode("10.0.0.1:4711").status().message()),
              HasSubstr("not a verbs device address"));
}

TEST(HandshakeTest, RoundTrip) {
  Handshake h;
  h.connection_id = 0x1234567890abcdefull;
  h.status = kHandshakeRefused;
  h.qp.qpn = 0xabcdef;
  h.qp.psn = 0x123456;
  h.qp.lid = 7;
  h.qp.mtu = 5;
  h.qp.link_layer = 2;
  h.qp.gid[15] = 9;
  h.qp.recv_window = 64;
  h.qp.slot_bytes = 8192;
  h.qp.name = std::string(100, 'n');  // truncated to 47
  const std::string bytes = h.Encode();
  ASSERT_EQ(bytes.size(), kHandshakeBytes);
  absl::StatusOr<Handshake> d = Handshake::Decode(bytes);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->connection_id, h.connection_id);
  EXPECT_EQ(d->status, kHandshakeRefused);
  EXPECT_EQ(d->qp.qpn, h.qp.qpn);
  EXPECT_EQ(d->qp.psn, h.qp.psn);
  EXPECT_EQ(d->qp.lid, 7);
  EXPECT_EQ(d->qp.mtu, 5);
  EXPECT_EQ(d->qp.link_layer, 2);
  EXPECT_EQ(d->qp.gid, h.qp.gid);
  EXPECT_EQ(d->qp.recv_window, 64u);
  EXPECT_EQ(d->qp.slot_bytes, 8192u);
  EXPECT_EQ(d->qp.name, std::string(47, 'n'));
}

TEST(HandshakeTest, RejectsForeignBytes) {
  EXPECT_EQ(Handshake::Decode("short").status().code(), absl::StatusCode::kDataLoss);
  std::string bytes = Handshake{}.Encode();
  bytes[0] ^= 1;
  EXPECT_THAT(std::string(Handshake::Decode(bytes).status().message()), HasSubstr("magic"));
  bytes = Handshake{}.Encode();
  bytes[4] = 9;  // version
  EXPECT_THAT(std::string(Handshake::Decode(bytes).status().message()), HasSubstr("version"));
}

// Counts registrations; "cacheable" decides whether idle entries are kept.
class FakeBackend : public RegistrationBackend {
 public:
  explicit FakeBackend(bool cacheable) : cacheable_(cacheable) {}
  absl::StatusOr<Registration> Register(uintptr_t addr, size_t len, bool remote_write) override {
    absl::MutexLock lock(&mu_);
    if (fail_next_) {
      fail_next_ = false;
      return absl::ResourceExhaustedError("no memory");
    }
    Registration r;
    r.addr = addr;
    r.len = len;
    r.lkey = r.rkey = next_key_++;
    r.remote_write = remote_write || grant_write_;
    r.cacheable = cacheable_;
    ++live_;
    ++registered_;
    return r;
  }
  void Deregister(const Registration&) override {
    absl::MutexLock lock(&mu_);
    --live_;
  }
  int live() {
    absl::MutexLock lock(&mu_);
    return live_;
  }
  int registered() {
    absl::MutexLock lock(&mu_);
    return registered_;
  }
  void FailNext() {
    absl::MutexLock lock(&mu_);
    fail_next_ = true;
  }
  void set_grant_write(bool v) {
    absl::MutexLock lock(&mu_);
    grant_write_ = v;
  }

 private:
  const bool cacheable_;
  absl::Mutex mu_;
  int live_ = 0;
  int registered_ = 0;
  uint32_t next_key_ = 1;
  bool fail_next_ = false;
  bool grant_write_ = false;
};

constexpr uintptr_t kPage = 4096;

const void* At(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(MemoryRegistryTest, PageHull) {
  uintptr_t s;
  size_t n;
  MemoryRegistry::PageHull(10 * kPage + 5, 1, &s, &n);
  EXPECT_EQ(s, 10 * kPage);
  EXPECT_EQ(n, kPage);
  MemoryRegistry::PageHull(10 * kPage + 5, kPage, &s, &n);
  EXPECT_EQ(n, 2 * kPage);
  MemoryRegistry::PageHull(10 * kPage, kPage, &s, &n);
  EXPECT_EQ(n, kPage);
}

TEST(MemoryRegistryTest, PinnedEntriesAreSharedOnlyWhileInUse) {
  auto* backend = new FakeBackend(/*cacheable=*/false);
  MemoryRegistry reg{std::unique_ptr<RegistrationBackend>(backend)};
  const uintptr_t base = 100 * kPage;
  {
    absl::StatusOr<MrRef> a = reg.Acquire(At(base + 10), 3 * kPage, false);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->registration().addr, base);
    EXPECT_EQ(a->registration().len, 4 * kPage);
    // Inside the hull while `a` is in flight: shared.
    absl::StatusOr<MrRef> b = reg.Acquire(At(base + kPage), kPage, false);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->lkey(), a->lkey());
    EXPECT_EQ(backend->registered(), 1);
    // Past the hull: a new registration.
    absl::StatusOr<MrRef> c = reg.Acquire(At(base + 3 * kPage), 2 * kPage, false);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(c->lkey(), a->lkey());
    EXPECT_EQ(backend->registered(), 2);
    // Needs remote write, the entry is local-only: a new registration.
    absl::StatusOr<MrRef> d = reg.Acquire(At(base + kPage), 16, true);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(backend->registered(), 3);
    EXPECT_EQ(reg.stats().hits, 1u);
  }
  // Nothing in use: pinned entries are gone (the memory may be freed now).
  EXPECT_EQ(backend->live(), 0);
  EXPECT_EQ(reg.stats().entries, 0u);
  absl::StatusOr<MrRef> again = reg.Acquire(At(base + 10), 3 * kPage, false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(backend->registered(), 4);
}

TEST(MemoryRegistryTest, CacheableEntriesStayIdleAndAreEvictedLru) {
  auto* backend = new FakeBackend(/*cacheable=*/true);
  MemoryRegistry reg{std::unique_ptr<RegistrationBackend>(backend),
                     MemoryRegistry::Limits{/*max_idle_entries=*/2,
                                            /*max_idle_bytes=*/size_t{1} << 40}};
  auto use = [&](uintptr_t page) {
    absl::StatusOr<MrRef> r = reg.Acquire(At(page * kPage), kPage, false);
    ASSERT_TRUE(r.ok());
  };
  use(1);
  use(1);
  EXPECT_EQ(backend->registered(), 1);  // idle entry reused
  use(3);
  use(5);  // three idle entries > 2: page 1 (least recent) goes
  EXPECT_EQ(backend->live(), 2);
  EXPECT_EQ(reg.stats().idle_entries, 2u);
  use(3);  // hit
  EXPECT_EQ(backend->registered(), 3);
  use(1);  // was evicted
  EXPECT_EQ(backend->registered(), 4);
  EXPECT_EQ(backend->live(), 2);  // 5 was least recent now
}

TEST(MemoryRegistryTest, IdleBytesBound) {
  auto* backend = new FakeBackend(/*cacheable=*/true);
  MemoryRegistry reg{std::unique_ptr<RegistrationBackend>(backend),
                     MemoryRegistry::Limits{100, 3 * kPage}};
  for (uintptr_t p : {10, 20, 30, 40}) {
    ASSERT_TRUE(reg.Acquire(At(p * kPage), kPage, false).ok());
  }
  EXPECT_EQ(reg.stats().idle_bytes, 3 * kPage);
  EXPECT_EQ(backend->live(), 3);
}

TEST(MemoryRegistryTest, ErrorsPropagate) {
  auto* backend = new FakeBackend(false);
  MemoryRegistry reg{std::unique_ptr<RegistrationBackend>(backend)};
  backend->FailNext();
  EXPECT_EQ(reg.Acquire(At(kPage), 10, false).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reg.Acquire(nullptr, 10, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Acquire(At(kPage), 0, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.stats().entries, 0u);
}

TEST(MemoryRegistryTest, LargeEntryFoundFromFarRight) {
  auto* backend = new FakeBackend(false);
  MemoryRegistry reg{std::unique_ptr<RegistrationBackend>(backend)};
  absl::StatusOr<MrRef> big = reg.Acquire(At(kPage), 1000 * kPage, false);
  ASSERT_TRUE(big.ok());
  std::vector<MrRef> small;
  for (uintptr_t p = 2; p < 50; ++p) {  // many entries starting between
    absl::StatusOr<MrRef> s = reg.Acquire(At(2000 * kPage + p * kPage), kPage, false);
    ASSERT_TRUE(s.ok());
    small.push_back(std::move(*s));
  }
  absl::StatusOr<MrRef> inner = reg.Acquire(At(900 * kPage), 10 * kPage, false);
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(inner->lkey(), big->lkey());
}

TEST(MemoryRegistryTest, ConcurrentUse) {
  auto* backend = new FakeBackend(false);
  {
    MemoryRegistry reg{std::unique_ptr<RegistrationBackend>(backend)};
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 2000; ++i) {
          uintptr_t page = 1 + (i * 7 + t) % 13;
          absl::StatusOr<MrRef> a = reg.Acquire(At(page * kPage + 8), kPage, i % 3 == 0);
          absl::StatusOr<MrRef> b = reg.Acquire(At(page * kPage + 16), 64, false);
          if (!a.ok() || !b.ok()) ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(reg.stats().entries, 0u);
  }
}

// On a machine without RDMA hardware (like the development machines) the
// device must refuse with Unavailable and say what is missing; with hardware
// it must open.
TEST(CreateVerbsDeviceTest, ClearAnswerOnThisMachine) {
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
  if (d.ok()) {
    EXPECT_EQ((*d)->kind(), "verbs");
    EXPECT_TRUE(VerbsAddress::Decode((*d)->address()).ok());
    GTEST_SKIP() << "an RDMA device exists here: " << (*d)->name();
  }
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("verbs:"));
  std::cout << "CreateVerbsDevice here: " << d.status() << "\n";
}

TEST(CreateVerbsDeviceTest, UnknownDeviceIsUnavailable) {
  DeviceOptions o;
  o.ib_device = "no_such_hca9";
  absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  const std::string msg(d.status().message());
  EXPECT_TRUE(msg.find("no RDMA device") != std::string::npos ||
              msg.find("'no_such_hca9' not found") != std::string::npos)
      << msg;
}

// The adapter and port behind an interface, from a sysfs tree: RoCE (a GID
// of port 2 names the interface), IPoIB (dev_port 1 -> port 2), none, several.
TEST(NicAdapterTest, AdapterAndPortFromSysfs) {
  verbs_test::SysfsTree t;
  ASSERT_FALSE(t.root().empty());
  t.Adapter("ens1f1", "mlx5_1");
  t.GidNdev("mlx5_1", 1, 0, "ens1f0");
  t.GidNdev("mlx5_1", 2, 3, "ens1f1");
  absl::StatusOr<AdapterPort> a = AdapterOfInterface(t.root(), "ens1f1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->adapter, "mlx5_1");
  EXPECT_EQ(a->port, 2);
  t.Adapter("ib0", "mlx5_4");
  t.DevPort("ib0", 1);
  a = AdapterOfInterface(t.root(), "ib0");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->adapter, "mlx5_4");
  EXPECT_EQ(a->port, 2);
  a = AdapterOfInterface(t.root(), "eth9");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("class/net/eth9/device/infiniband"));
  t.Adapter("bond0", "mlx5_0");
  t.Adapter("bond0", "mlx5_2");
  a = AdapterOfInterface(t.root(), "bond0");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("mlx5_0, mlx5_2"));
}

GidEntry Gid(int index, bool v2, const std::string& v4, uint32_t ifindex = 0) {
  GidEntry e;
  e.index = index;
  e.roce_v2 = v2;
  e.ndev_ifindex = ifindex;
  if (v4.empty()) {  // link-local fe80::<index>
    e.raw[0] = 0xfe;
    e.raw[1] = 0x80;
    e.raw[15] = static_cast<uint8_t>(index);
    return e;
  }
  e.raw[10] = e.raw[11] = 0xff;
  int a, b, c, d;
  sscanf(v4.c_str(), "%d.%d.%d.%d", &a, &b, &c, &d);
  e.raw[12] = a, e.raw[13] = b, e.raw[14] = c, e.raw[15] = d;
  return e;
}

// Hand-worked GID tables: a two-address port (v1 and v2 of each), the NIC's
// own address wins over the first v2 entry; without it the interface's
// entry, then the first v2 IPv4 one; an explicit index (0 included) as given.
TEST(NicAdapterTest, ChooseGid) {
  const std::vector<GidEntry> t = {Gid(0, false, ""),
                                   Gid(1, true, ""),
                                   Gid(2, false, "10.0.0.5", 7),
                                   Gid(3, true, "10.0.0.5", 7),
                                   Gid(4, false, "10.1.0.5", 8),
                                   Gid(5, true, "10.1.0.5", 8)};
  EXPECT_EQ(*ChooseGid(t, 16, true, -1, "10.1.0.5", 0, "x"), 5);
  EXPECT_EQ(*ChooseGid(t, 16, true, -1, "10.0.0.5", 0, "x"), 3);
  EXPECT_EQ(*ChooseGid(t, 16, true, -1, "", 8, "x"), 5);           // by interface
  EXPECT_EQ(*ChooseGid(t, 16, true, -1, "192.0.2.1", 0, "x"), 3);  // first v2 IPv4
  EXPECT_EQ(*ChooseGid(t, 16, true, 0, "10.1.0.5", 0, "x"), 0);    // 0 is an index now
  EXPECT_EQ(*ChooseGid(t, 16, true, 4, "", 0, "x"), 4);
  absl::StatusOr<int> bad = ChooseGid(t, 16, true, 9, "", 0, "mlx5_0 port 1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("GID index 9 is empty"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("3: RoCE v2 10.0.0.5 (ifindex 7)"));
  bad = ChooseGid(t, 16, true, 16, "", 0, "x");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("out of range"));
  // No v2 IPv4 entry at all: an error that shows the table.
  bad = ChooseGid({Gid(0, false, ""), Gid(1, false, "10.0.0.5")}, 16, true, -1, "10.0.0.5", 0,
                  "mlx5_0 port 1 (interface eth1)");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("no RoCE v2 GID"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("interface eth1"));
  // InfiniBand: index 0 unless told.
  EXPECT_EQ(*ChooseGid({}, 128, false, -1, "", 0, "x"), 0);
  EXPECT_EQ(*ChooseGid({}, 128, false, 2, "", 0, "x"), 2);
}

// The RC ACK timeout from the stall time, hand-worked: 8 tries of
// 4.096 us x 2^t within the stall. 1000 ms: 125 ms a try, 2^14 x 4.096 us =
// 67 ms (2^15 = 134 ms is too long); 200 ms: 25 ms a try, t = 12 (16.8 ms);
// 1 ms: floored at 8; none: 18, NCCL's.
TEST(QueuePairTest, AckTimeoutFollowsTheStallTime) {
  EXPECT_EQ(AckTimeoutFor(absl::Milliseconds(1000)), 14);
  EXPECT_EQ(AckTimeoutFor(absl::Milliseconds(200)), 12);
  EXPECT_EQ(AckTimeoutFor(absl::Milliseconds(1)), 8);
  EXPECT_EQ(AckTimeoutFor(absl::ZeroDuration()), 18);
  EXPECT_EQ(AckTimeoutFor(absl::Seconds(100)), 18);  // never above NCCL's
}

}  // namespace
}  // namespace mixnet::transport::verbs
