// The plugin's registrations (comm.h MemHandle, PinOnLane): a regMr'd buffer
// is registered once per lane's connection, again only on a lane it has not
// met (a new lane, or a lane that died and whose address was reused), and
// every registration is dropped with the handle (deregMr). Connections here
// count RegisterMemory calls and releases; the verbs transport's own test
// (verbs_fake_fabric_test: RegisteredMemoryIsRegisteredOnce) shows that a
// registered range costs no registration per message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "plugins/nccl_net/comm.h"
#include "plugins/nccl_net/nccl_net_abi.h"

namespace mixnet::nccl {
namespace {

using ::testing::HasSubstr;

struct Counts {
  int registered = 0;
  int released = 0;
  bool fail = false;
};

class CountingConnection : public transport::Connection {
 public:
  explicit CountingConnection(Counts* c) : c_(c) {}
  absl::StatusOr<std::unique_ptr<transport::Request>> Isend(const void*, size_t,
                                                            uint64_t) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<std::unique_ptr<transport::Request>> Irecv(void*, size_t, uint64_t) override {
    return absl::UnimplementedError("not in this test");
  }
  std::string peer_name() const override { return "counting peer"; }
  absl::Status health() const override { return absl::OkStatus(); }
  absl::StatusOr<std::shared_ptr<const void>> RegisterMemory(const void*, size_t) override {
    if (c_->fail) return absl::ResourceExhaustedError("ibv_reg_mr: Cannot allocate memory");
    ++c_->registered;
    Counts* c = c_;
    return std::shared_ptr<const void>(new int(0), [c](const void* p) {
      ++c->released;
      delete static_cast<const int*>(p);
    });
  }

 private:
  Counts* c_;
};

std::shared_ptr<Lane> MakeLane(Counts* c, const std::string& nic) {
  auto lane = std::make_shared<Lane>();
  lane->path.local_nic = nic;
  lane->path.remote_nic = nic;
  lane->connection = std::make_unique<CountingConnection>(c);
  return lane;
}

TEST(MemPin, OncePerLaneAndDroppedWithTheHandle) {
  Counts c;
  std::vector<char> buf(1 << 20);
  {
    MemHandle m(nullptr, buf.data(), buf.size(), nccl_abi::kPtrHost);
    std::shared_ptr<Lane> home = MakeLane(&c, "eps0"), circuit = MakeLane(&c, "ocs0");
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(PinOnLane(&m, home).ok());
      ASSERT_TRUE(PinOnLane(&m, circuit).ok());
    }
    EXPECT_EQ(c.registered, 2);
    // The circuit lane is gone (a move); its successor is registered with.
    circuit.reset();
    std::shared_ptr<Lane> next = MakeLane(&c, "ocs1");
    ASSERT_TRUE(PinOnLane(&m, next).ok());
    ASSERT_TRUE(PinOnLane(&m, next).ok());
    EXPECT_EQ(c.registered, 3);
    EXPECT_EQ(c.released, 0);  // a registration lives until deregMr
  }
  EXPECT_EQ(c.released, 3);
}

TEST(MemPin, NothingToRegisterAndFailuresNameTheLane) {
  Counts c;
  std::vector<char> buf(4096);
  std::shared_ptr<Lane> lane = MakeLane(&c, "eps0");
  MemHandle empty(nullptr, buf.data(), 0, nccl_abi::kPtrHost);
  EXPECT_TRUE(PinOnLane(&empty, lane).ok());
  EXPECT_TRUE(PinOnLane(nullptr, lane).ok());
  MemHandle m(nullptr, buf.data(), buf.size(), nccl_abi::kPtrHost);
  EXPECT_TRUE(PinOnLane(&m, nullptr).ok());
  EXPECT_EQ(c.registered, 0);
  c.fail = true;
  absl::Status st = PinOnLane(&m, lane);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(st.message()), HasSubstr("registering 4096 bytes"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("eps0"));
  c.fail = false;
  EXPECT_TRUE(PinOnLane(&m, lane).ok());  // tried again, not remembered as done
  EXPECT_EQ(c.registered, 1);
}

}  // namespace
}  // namespace mixnet::nccl
