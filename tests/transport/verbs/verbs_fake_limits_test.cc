// The verbs transport's limits and set-up against the fake libibverbs:
// registered memory registered once, the bound on what a receiver holds for
// absent receives, each NIC on its own adapter and GID, service level and
// traffic class, and stall detection (ACK timeouts, keepalives on a dark
// circuit). The protocol itself: verbs_fake_fabric_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/transport/transport.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/verbs_device.h"
#include "tests/transport/verbs/fake_fabric_util.h"
#include "tests/transport/verbs/fake_ibverbs.h"
#include "tests/transport/verbs/sysfs_tree.h"

namespace mixnet::transport::verbs {
namespace {

using ::testing::HasSubstr;

// Memory registered once (the NCCL plugin's regMr) serves every message
// inside it: 20 rendezvous messages of 1 MiB, one after another, cost one
// registration per message and side without it (40: the fake has no
// on-demand paging, so an idle pinned registration is dropped at once), and
// none once both 20 MiB buffers are registered (2 registrations, one each).
TEST_F(FakeFabricTest, RegisteredMemoryIsRegisteredOnce) {
  constexpr int kMsgs = 20;
  constexpr size_t kBytes = 1 << 20;
  std::vector<uint8_t> src = Pattern(kMsgs * kBytes, 9), dst(kMsgs * kBytes);
  auto run = [&] {
    std::fill(dst.begin(), dst.end(), 0);
    for (int i = 0; i < kMsgs; ++i) {
      auto r = *b_->Irecv(dst.data() + i * kBytes, kBytes, 4);
      auto s = *a_->Isend(src.data() + i * kBytes, kBytes, 4);
      ASSERT_TRUE(r->Wait(kWait).ok()) << r->status();
      ASSERT_TRUE(s->Wait(kWait).ok()) << s->status();
    }
    ASSERT_EQ(dst, src);
  };
  uint64_t before = fake_ibverbs_reg_mr_calls();
  run();
  EXPECT_EQ(fake_ibverbs_reg_mr_calls() - before, uint64_t{2 * kMsgs});
  before = fake_ibverbs_reg_mr_calls();
  absl::StatusOr<std::shared_ptr<const void>> pin_src = a_->RegisterMemory(src.data(), src.size());
  absl::StatusOr<std::shared_ptr<const void>> pin_dst = b_->RegisterMemory(dst.data(), dst.size());
  ASSERT_TRUE(pin_src.ok()) << pin_src.status();
  ASSERT_TRUE(pin_dst.ok()) << pin_dst.status();
  EXPECT_EQ(fake_ibverbs_reg_mr_calls() - before, 2u);
  const int64_t live = fake_ibverbs_live_mrs();
  before = fake_ibverbs_reg_mr_calls();
  run();
  EXPECT_EQ(fake_ibverbs_reg_mr_calls() - before, 0u) << "a message registered registered memory";
  EXPECT_EQ(fake_ibverbs_live_mrs(), live);
  pin_src->reset();
  pin_dst->reset();
  EXPECT_EQ(fake_ibverbs_live_mrs(), live - 2);
  EXPECT_THAT(std::string(a_->RegisterMemory(nullptr, 10).status().message()),
              HasSubstr("null buffer"));
}

// What a receiver holds for receives it has not posted stays within the
// bound (MIXNET_IB_UNEXPECTED_BYTES) plus its fixed receive slots, however
// much is sent first: 16 rendezvous messages of 1 MiB and 600 eager ones of
// 4000 bytes, all sent long before any receive, against a 256 KiB bound.
// Hand-worked: 65 eager messages fit in the copies (65 x 4000 <= 262144 <
// 66 x 4000), at most `window` = 64 more wait in receive slots (the sender
// has no credits beyond them), so at most 129 eager sends complete; the
// rendezvous sends complete only once their receives are posted.
TEST(FakeFabricBoundTest, UnexpectedMessagesStayWithinTheBound) {
  fake_ibverbs_configure(2, 0);
  constexpr int64_t kBound = 256 << 10;
  constexpr int kBig = 16, kSmall = 600;
  constexpr size_t kBigBytes = 1 << 20, kSmallBytes = 4000;
  std::unique_ptr<Device> da = MakeDevice(nullptr, kBound), db = MakeDevice(nullptr, kBound);
  ASSERT_NE(da, nullptr);
  ASSERT_NE(db, nullptr);
  auto [a, b] = Connect(da.get(), db.get());
  ASSERT_NE(a, nullptr);
  const uint64_t rnr_before = fake_ibverbs_rnr_events();
  std::vector<std::vector<uint8_t>> big(kBig), small(kSmall), big_dst(kBig), small_dst(kSmall);
  for (int i = 0; i < kBig; ++i) {
    big[i] = Pattern(kBigBytes, 100 + i);
    big_dst[i].assign(kBigBytes, 0);
  }
  for (int i = 0; i < kSmall; ++i) {
    small[i] = Pattern(kSmallBytes, 1000 + i);
    small_dst[i].assign(kSmallBytes, 0);
  }
  std::vector<std::unique_ptr<Request>> big_sends, small_sends, recvs;
  big_sends.reserve(kBig);
  small_sends.reserve(kSmall);
  recvs.reserve(kBig + kSmall);
  const size_t heap_before = HeapInUse();
  for (int i = 0; i < kSmall; ++i) {
    small_sends.push_back(*a->Isend(small[i].data(), kSmallBytes, 1));
    if (i % (kSmall / kBig) == 0 && i / (kSmall / kBig) < kBig) {
      const int k = i / (kSmall / kBig);
      big_sends.push_back(*a->Isend(big[k].data(), kBigBytes, 2));
    }
  }
  ASSERT_EQ(big_sends.size(), size_t{kBig});
  absl::SleepFor(absl::Milliseconds(300));  // everything that can arrive has
  const size_t heap_held = HeapInUse();
  // The receiver's copies, plus the transport's bookkeeping of 616 sends and
  // announcements (a few hundred bytes each).
  EXPECT_LT(heap_held, heap_before + kBound + (1 << 20))
      << "held " << heap_held - heap_before << " bytes for absent receives";
  int small_done = 0;
  for (auto& s : small_sends) small_done += s->Done() ? 1 : 0;
  EXPECT_GE(small_done, 65);
  EXPECT_LE(small_done, 65 + 64);
  for (auto& s : big_sends) EXPECT_FALSE(s->Done());
  // Receives posted now, the large ones first: every byte arrives, in order.
  for (int i = 0; i < kBig; ++i) recvs.push_back(*b->Irecv(big_dst[i].data(), kBigBytes, 2));
  for (int i = 0; i < kSmall; ++i) {
    recvs.push_back(*b->Irecv(small_dst[i].data(), kSmallBytes, 1));
  }
  for (auto& r : recvs) ASSERT_TRUE(r->Wait(kWait).ok()) << r->status();
  for (auto& s : big_sends) ASSERT_TRUE(s->Wait(kWait).ok()) << s->status();
  for (auto& s : small_sends) ASSERT_TRUE(s->Wait(kWait).ok()) << s->status();
  for (int i = 0; i < kBig; ++i) ASSERT_EQ(big_dst[i], big[i]) << "large message " << i;
  for (int i = 0; i < kSmall; ++i) ASSERT_EQ(small_dst[i], small[i]) << "small message " << i;
  EXPECT_EQ(fake_ibverbs_rnr_events(), rnr_before);
  recvs.clear();
  big_sends.clear();
  small_sends.clear();
  a.reset();
  b.reset();
  da.reset();
  db.reset();
  EXPECT_EQ(fake_ibverbs_live_mrs(), 0);
}

// Each NIC opens the adapter behind its interface (a sysfs tree of the
// test's): interface fakeif1 -> adapter fake1, whose RoCE v2 GID holds the
// NIC's address 127.0.0.2 (index 1); GID index 0 can be asked for; an
// interface without an adapter is an error naming it and the way out.
TEST(FakeFabricSetupTest, NicOpensItsOwnAdapterAndGid) {
  fake_ibverbs_configure(2, 1);
  verbs_test::SysfsTree t;
  ASSERT_FALSE(t.root().empty());
  t.Adapter("fakeif1", "fake1");
  t.GidNdev("fake1", 1, 1, "fakeif1");
  DeviceOptions o;
  o.ifname = "fakeif1";
  o.bind_address = "127.0.0.2";
  o.sysfs_root = t.root();
  absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT((*d)->address(), HasSubstr("|fake1|1|"));
  EXPECT_THAT((*d)->address(), HasSubstr("0000:0000:0000:0000:0000:ffff:7f00:0002"));
  o.ib_gid_index = 0;  // the link-local entry, by request
  d = CreateVerbsDevice(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT((*d)->address(), HasSubstr("fe80:0000:0000:0000:0000:0000:0000:0002"));
  o.ib_gid_index = -1;
  o.ifname = "nordma0";
  d = CreateVerbsDevice(o);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr("interface nordma0 has no RDMA adapter"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("MIXNET_IB_DEVICE"));
  // MIXNET_IB_DEVICE still overrides the mapping.
  o.ib_device = "fake0";
  d = CreateVerbsDevice(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT((*d)->address(), HasSubstr("|fake0|1|"));
  fake_ibverbs_configure(2, 0);
}

// MIXNET_IB_SL / MIXNET_IB_TC (DeviceOptions) reach the queue pairs'
// address vectors; a connection's own traffic class (NCCL's, through
// ConnectOptions) wins over the device's; values out of range are refused.
TEST(FakeFabricSetupTest, ServiceLevelAndTrafficClass) {
  fake_ibverbs_configure(2, 1);  // RoCE: every address vector has a GRH
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.ib_sl = 3;
  o.ib_tc = 106;
  auto a = CreateVerbsDevice(o);
  auto b = CreateVerbsDevice(o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  const int before = fake_ibverbs_rtr_count();
  // a dials with NCCL's class 184; b answers with the device's (106).
  const uint64_t id = NextId();
  absl::StatusOr<std::unique_ptr<Connection>> cb;
  std::thread t([&] {
    ConnectOptions co;
    co.remote_address = (*a)->address();
    co.connection_id = id;
    co.timeout = absl::Seconds(10);
    cb = (*b)->Connect(co);
  });
  ConnectOptions co;
  co.remote_address = (*b)->address();
  co.connection_id = id;
  co.initiator = true;
  co.timeout = absl::Seconds(10);
  co.traffic_class = 184;
  absl::StatusOr<std::unique_ptr<Connection>> ca = (*a)->Connect(co);
  t.join();
  ASSERT_TRUE(ca.ok() && cb.ok()) << ca.status() << " " << cb.status();
  ASSERT_EQ(fake_ibverbs_rtr_count(), before + 2);
  std::multiset<int> classes;
  for (int i = before; i < before + 2; ++i) {
    int sl = -1, global = -1, tc = -1;
    fake_ibverbs_rtr(i, &sl, &global, &tc);
    EXPECT_EQ(sl, 3);
    EXPECT_EQ(global, 1);
    classes.insert(tc);
  }
  EXPECT_EQ(classes, (std::multiset<int>{106, 184}));
  // No stall detection on these devices: NCCL's 18 and 7 retries.
  const int rts = fake_ibverbs_rts_count();
  ASSERT_GE(rts, 2);
  int timeout = -1, retries = -1;
  fake_ibverbs_rts(rts - 1, &timeout, &retries);
  EXPECT_EQ(timeout, 18);
  EXPECT_EQ(retries, 7);
  o.ib_tc = 256;
  EXPECT_EQ(CreateVerbsDevice(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.ib_tc = 0;
  o.ib_sl = 16;
  absl::StatusOr<std::unique_ptr<Device>> bad = CreateVerbsDevice(o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("MIXNET_IB_SL"));
  o.ib_sl = 0;
  o.ib_port = -1;
  EXPECT_EQ(CreateVerbsDevice(o).status().code(), absl::StatusCode::kInvalidArgument);
  fake_ibverbs_configure(2, 0);
}

// Stall detection (MIXNET_PATH_STALL_MS, set on OCS NICs) shortens the RC
// ACK timeout so a dark circuit's retries end within it: 200 ms -> 2^12 x
// 4.096 us (16.8 ms) a try, 8 tries 134 ms (hand-worked in verbs_unit_test).
TEST(FakeFabricSetupTest, StallTimeShortensTheAckTimeout) {
  fake_ibverbs_configure(1, 0);
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.stall_timeout = absl::Milliseconds(200);
  auto a = CreateVerbsDevice(o);
  auto b = CreateVerbsDevice(o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  const int before = fake_ibverbs_rts_count();
  auto [ca, cb] = Connect(a->get(), b->get());
  ASSERT_NE(ca, nullptr);
  ASSERT_EQ(fake_ibverbs_rts_count(), before + 2);
  for (int i = before; i < before + 2; ++i) {
    int timeout = -1, retries = -1;
    fake_ibverbs_rts(i, &timeout, &retries);
    EXPECT_EQ(timeout, 12);
    EXPECT_EQ(retries, 7);
  }
}

// A circuit goes dark under an idle connection. With stall detection (200 ms:
// ACK timeout exponent 12, 8 tries of 16.8 ms = 134 ms) each end's keepalive
// (every 50 ms) runs out of RC retries, so both ends report the loss within
// 50 + 50 + 134 ms plus polling, although nothing was posted. Without stall
// detection an idle connection sends nothing, so nothing fails.
TEST(FakeFabricStallTest, AnIdleConnectionOnADarkCircuitFails) {
  fake_ibverbs_configure(2, 0);
  for (bool detect : {true, false}) {
    SCOPED_TRACE(detect ? "stall detection 200 ms" : "no stall detection");
    Failures fa, fb;
    auto make = [&](Failures* f) -> std::unique_ptr<Device> {
      DeviceOptions o;
      o.bind_address = "127.0.0.1";
      o.on_failure = f->Callback();
      if (detect) o.stall_timeout = absl::Milliseconds(200);
      absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
      EXPECT_TRUE(d.ok()) << d.status();
      return d.ok() ? std::move(*d) : nullptr;
    };
    std::unique_ptr<Device> da = make(&fa), db = make(&fb);
    ASSERT_NE(da, nullptr);
    ASSERT_NE(db, nullptr);
    auto [a, b] = Connect(da.get(), db.get());
    ASSERT_NE(a, nullptr);
    {
      std::vector<uint8_t> src = Pattern(3000, 5), dst(3000);
      auto r = *b->Irecv(dst.data(), dst.size(), 1);
      auto s = *a->Isend(src.data(), src.size(), 1);
      ASSERT_TRUE(r->Wait(kWait).ok());
      ASSERT_TRUE(s->Wait(kWait).ok());
      ASSERT_EQ(dst, src);
    }
    absl::SleepFor(absl::Milliseconds(120));  // idle: a keepalive or two went through
    EXPECT_EQ(fa.count() + fb.count(), 0u);
    fake_ibverbs_set_dark(1);
    const absl::Time dark = absl::Now();
    const absl::Time give_up = dark + absl::Seconds(detect ? 5 : 1);
    while ((fa.count() == 0 || fb.count() == 0) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    const absl::Duration took = absl::Now() - dark;
    if (detect) {
      ASSERT_EQ(fa.count(), 1u);
      ASSERT_EQ(fb.count(), 1u);
      EXPECT_LT(took, absl::Seconds(1)) << "the stall time is 200 ms";
      for (Failures* f : {&fa, &fb}) {
        absl::MutexLock lock(&f->mu);
        EXPECT_EQ(f->seen[0].code(), absl::StatusCode::kUnavailable) << f->seen[0];
        EXPECT_THAT(std::string(f->seen[0].message()), HasSubstr("retry counter exceeded"));
      }
      EXPECT_FALSE(a->health().ok());
      EXPECT_FALSE(b->health().ok());
    } else {
      EXPECT_EQ(fa.count() + fb.count(), 0u) << "an idle connection sent something";
      EXPECT_TRUE(a->health().ok());
    }
    fake_ibverbs_set_dark(0);
    a.reset();
    b.reset();
    da.reset();
    db.reset();
  }
}

}  // namespace
}  // namespace mixnet::transport::verbs
