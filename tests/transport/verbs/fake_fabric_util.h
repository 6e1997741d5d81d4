// Helpers of the verbs tests against the fake libibverbs (fake_ibverbs.cc):
// payload patterns, failure callbacks, devices on 127.0.0.1, a connected
// pair, the heap in use, and the fixture of two connected devices. Used by
// verbs_fake_fabric_test.cc (the protocol) and verbs_fake_limits_test.cc
// (bounds, registration, adapters, stall detection); test threads only.
#pragma once

#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/transport/transport.h"
#include "runtime/transport/verbs/verbs_device.h"
#include "runtime/transport/verbs/wire.h"
#include "tests/transport/verbs/fake_ibverbs.h"

#if defined(__SANITIZE_ADDRESS__)
// From the sanitizer runtime (GCC ships no header declaring it).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace mixnet::transport::verbs {

inline constexpr size_t kEagerMax = 8192 - kWireHeaderBytes;
inline const absl::Duration kWait = absl::Seconds(20);

inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>(x >> 16);
  }
  return v;
}

// memcmp that accepts empty (possibly null) buffers.
inline bool Same(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

struct Failures {
  absl::Mutex mu;
  std::vector<absl::Status> seen;
  FailureCallback Callback() {
    return [this](const absl::Status& s) {
      absl::MutexLock lock(&mu);
      seen.push_back(s);
    };
  }
  size_t count() {
    absl::MutexLock lock(&mu);
    return seen.size();
  }
};

// Heap bytes the process has allocated now (every thread, mmapped blocks too).
inline size_t HeapInUse() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

inline std::unique_ptr<Device> MakeDevice(Failures* f = nullptr, int64_t unexpected_bytes = -1) {
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  if (unexpected_bytes >= 0) o.ib_unexpected_bytes = unexpected_bytes;
  if (f != nullptr) o.on_failure = f->Callback();
  absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

inline uint64_t NextId() {
  static std::atomic<uint64_t> id{1};
  return id++;
}

// Connects a (initiator) and b; returns {a's connection, b's connection}.
// `*_device_receives`: that end's receives may be GPU memory.
inline std::pair<std::unique_ptr<Connection>, std::unique_ptr<Connection>> Connect(
    Device* a, Device* b, bool a_device_receives = false, bool b_device_receives = false) {
  const uint64_t id = NextId();
  absl::StatusOr<std::unique_ptr<Connection>> cb;
  std::thread t([&] {
    ConnectOptions o;
    o.remote_address = a->address();
    o.connection_id = id;
    o.initiator = false;
    o.peer_name = "rank A";
    o.timeout = absl::Seconds(10);
    o.device_receives = b_device_receives;
    cb = b->Connect(o);
  });
  ConnectOptions o;
  o.remote_address = b->address();
  o.connection_id = id;
  o.initiator = true;
  o.peer_name = "rank B";
  o.timeout = absl::Seconds(10);
  o.device_receives = a_device_receives;
  absl::StatusOr<std::unique_ptr<Connection>> ca = a->Connect(o);
  t.join();
  EXPECT_TRUE(ca.ok()) << ca.status();
  EXPECT_TRUE(cb.ok()) << cb.status();
  if (!ca.ok() || !cb.ok()) return {};
  return {std::move(*ca), std::move(*cb)};
}

class FakeFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ibverbs_configure(2, 0);
    rnr_before_ = fake_ibverbs_rnr_events();
    errors_before_ = fake_ibverbs_error_completions();
    da_ = MakeDevice(&fa_);
    db_ = MakeDevice(&fb_);
    ASSERT_NE(da_, nullptr);
    ASSERT_NE(db_, nullptr);
    std::tie(a_, b_) = Connect(da_.get(), db_.get());
    ASSERT_NE(a_, nullptr);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    da_.reset();
    db_.reset();
    EXPECT_EQ(fake_ibverbs_live_qps(), 0);
    EXPECT_EQ(fake_ibverbs_live_mrs(), 0);
  }
  void ExpectNoRnr() { EXPECT_EQ(fake_ibverbs_rnr_events(), rnr_before_); }
  void ExpectNoErrors() { EXPECT_EQ(fake_ibverbs_error_completions(), errors_before_); }

  void SendRecv(Connection* from, Connection* to, size_t len, size_t cap, uint64_t tag,
                bool recv_first) {
    std::vector<uint8_t> src = Pattern(len, static_cast<uint32_t>(len + tag));
    std::vector<uint8_t> dst(cap + 1, 0xee);
    std::unique_ptr<Request> r, s;
    if (recv_first) r = *to->Irecv(dst.data(), cap, tag);
    absl::StatusOr<std::unique_ptr<Request>> sent = from->Isend(src.data(), len, tag);
    ASSERT_TRUE(sent.ok()) << sent.status();
    s = std::move(*sent);
    if (!recv_first) r = *to->Irecv(dst.data(), cap, tag);
    ASSERT_TRUE(r->Wait(kWait).ok()) << r->status() << " len " << len;
    ASSERT_TRUE(s->Wait(kWait).ok()) << s->status() << " len " << len;
    EXPECT_EQ(r->bytes(), len);
    EXPECT_EQ(s->bytes(), len);
    ASSERT_TRUE(Same(dst.data(), src.data(), len)) << "len " << len;
    for (size_t i = len; i <= cap; ++i) ASSERT_EQ(dst[i], 0xee) << "wrote past the message";
  }

  Failures fa_, fb_;
  std::unique_ptr<Device> da_, db_;
  std::unique_ptr<Connection> a_, b_;
  uint64_t rnr_before_ = 0, errors_before_ = 0;
};

}  // namespace mixnet::transport::verbs
