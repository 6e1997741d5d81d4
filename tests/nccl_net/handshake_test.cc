// The plugin's connection handshake (plugins/nccl_net/handshake.h) in one
// process over loopback TCP: the connector (DialPeer, on a thread) and the
// listener (AnswerPeer) exchange identities (identity.h). Matching ends
// connect and learn each other's full host and NIC names, however long;
// ends whose plugin versions or cluster specs differ both fail with a
// message naming both sides' values; an older plugin (handshake version 2,
// its fixed 24-byte request, or a listener that drops our request unread) is
// named as such. Also: the spec fingerprint ignores YAML layout and sees
// every field. Label cpu. Threads: the test thread answers, a thread dials.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/nccl_net/handshake.h"
#include "plugins/nccl_net/identity.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {
namespace {

using ::testing::HasSubstr;

constexpr char kIp[] = "127.0.0.1";
const absl::Duration kTimeout = absl::Seconds(5);

std::unique_ptr<transport::Device> MakeDevice() {
  transport::DeviceOptions o = transport::DeviceOptionsFromSettings();
  o.ifname = "lo";
  o.bind_address = kIp;
  auto d = transport::CreateDevice("tcp", o);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

Identity Id(const std::string& host, const std::string& version, const std::string& spec) {
  Identity id;
  id.plugin_version = version;
  id.spec = spec;
  id.host = host;
  id.nic = "eps0";
  return id;
}

// Accepts one control dial on `l` (non-blocking listener), or -1.
int AcceptOne(const ControlListener& l) {
  pollfd p{l.fd, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return -1;
  return accept4(l.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

struct Outcome {
  std::unique_ptr<transport::Device> device;  // outlives the connections
  absl::StatusOr<PeerConnection> dialed = absl::UnknownError("not run");
  absl::StatusOr<PeerConnection> answered = absl::UnknownError("not run");
};

Outcome Handshake(const Identity& connector, const Identity& listener) {
  Outcome out;
  out.device = MakeDevice();
  transport::Device* device = out.device.get();
  if (device == nullptr) return out;
  absl::StatusOr<ControlListener> l = OpenControlListener(kIp);
  EXPECT_TRUE(l.ok()) << l.status();
  if (!l.ok()) return out;
  HandleInfo peer;
  peer.ip = l->ip;
  peer.port = l->port;
  peer.listen_id = 42;
  peer.host = listener.host.substr(0, 63);  // what the handle can hold
  std::atomic<bool> cancelled{false};
  std::thread dialer([&] {
    out.dialed =
        DialPeer(device, kIp, "lo", peer, 7001, connector, absl::Now() + kTimeout, cancelled);
  });
  const int fd = AcceptOne(*l);
  EXPECT_GE(fd, 0);
  if (fd >= 0)
    out.answered = AnswerPeer(device, fd, 42, listener, absl::Now() + kTimeout, cancelled);
  dialer.join();
  close(l->fd);
  return out;
}

TEST(Handshake, MatchingEndsConnectAndLearnFullNames) {
  const std::string long_a = "node-" + std::string(95, 'a') + ".example.org";
  const std::string long_b = "node-" + std::string(95, 'b') + ".example.org";
  Outcome o =
      Handshake(Id(long_a, "0.1.0", "00112233aabbccdd"), Id(long_b, "0.1.0", "00112233aabbccdd"));
  ASSERT_TRUE(o.dialed.ok()) << o.dialed.status();
  ASSERT_TRUE(o.answered.ok()) << o.answered.status();
  EXPECT_EQ(o.dialed->peer.host, long_b);  // not cut to the handle's 63 characters
  EXPECT_EQ(o.answered->peer.host, long_a);
  EXPECT_EQ(o.dialed->peer.nic, "eps0");
  // The connection works.
  char out[5] = "ping", in[5] = {};
  auto r = o.answered->connection->Irecv(in, sizeof(in), 1);
  auto s = o.dialed->connection->Isend(out, sizeof(out), 1);
  ASSERT_TRUE(r.ok() && s.ok());
  absl::Status w = (*r)->Wait(kTimeout);
  ASSERT_TRUE(w.ok()) << w;
  EXPECT_STREQ(in, "ping");
}

TEST(Handshake, DifferentPluginVersionsFailBothEndsNamingBoth) {
  Outcome o =
      Handshake(Id("h1", "0.1.0", "00112233aabbccdd"), Id("h0", "0.2.0", "00112233aabbccdd"));
  for (const absl::Status& s : {o.dialed.status(), o.answered.status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("plugin versions differ"));
    EXPECT_THAT(s.message(), HasSubstr("host h1, plugin 0.1.0"));
    EXPECT_THAT(s.message(), HasSubstr("host h0, plugin 0.2.0"));
  }
}

TEST(Handshake, DifferentClusterSpecsFailBothEndsNamingBoth) {
  Outcome o = Handshake(Id("h1", "0.1.0", "00112233aabbccdd"), Id("h0", "0.1.0", "none"));
  for (const absl::Status& s : {o.dialed.status(), o.answered.status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("cluster specs differ"));
    EXPECT_THAT(s.message(), HasSubstr("cluster spec 00112233aabbccdd"));
    EXPECT_THAT(s.message(), HasSubstr("cluster spec none"));
  }
}

TEST(Handshake, AnOlderConnectorIsNamed) {
  std::unique_ptr<transport::Device> device = MakeDevice();
  ASSERT_NE(device, nullptr);
  absl::StatusOr<ControlListener> l = OpenControlListener(kIp);
  ASSERT_TRUE(l.ok()) << l.status();
  // The version-2 request: magic "MXNQ", version 2, listen id, connection id.
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(l->port));
  inet_pton(AF_INET, kIp, &a.sin_addr);
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const uint32_t head[2] = {0x514E584Du, 2};
  const uint64_t ids[2] = {42, 7001};
  char req[24];
  std::memcpy(req, head, 8);
  std::memcpy(req + 8, ids, 16);
  ASSERT_EQ(write(c, req, sizeof(req)), 24);
  const int fd = AcceptOne(*l);
  ASSERT_GE(fd, 0);
  std::atomic<bool> cancelled{false};
  absl::StatusOr<PeerConnection> r = AnswerPeer(device.get(), fd, 42, Id("h0", "0.1.0", "none"),
                                                absl::Now() + kTimeout, cancelled);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("handshake version 2 (an older mixnet plugin)"));
  EXPECT_THAT(r.status().message(), HasSubstr("plugin 0.1.0"));
  close(c);
  close(l->fd);
}

TEST(Handshake, AnOlderListenerIsNamed) {
  std::unique_ptr<transport::Device> device = MakeDevice();
  ASSERT_NE(device, nullptr);
  absl::StatusOr<ControlListener> l = OpenControlListener(kIp);
  ASSERT_TRUE(l.ok()) << l.status();
  HandleInfo peer;
  peer.ip = l->ip;
  peer.port = l->port;
  peer.listen_id = 42;
  peer.host = "h0";
  std::atomic<bool> cancelled{false};
  absl::StatusOr<PeerConnection> dialed = absl::UnknownError("not run");
  std::thread dialer([&] {
    dialed = DialPeer(device.get(), kIp, "lo", peer, 7001, Id("h1", "0.1.0", "none"),
                      absl::Now() + kTimeout, cancelled);
  });
  // What a version-2 listener does with a request of another version: reads
  // its 24 bytes and closes without a reply.
  const int fd = AcceptOne(*l);
  ASSERT_GE(fd, 0);
  char buf[24];
  size_t got = 0;
  while (got < sizeof(buf)) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 5000), 1);
    const ssize_t n = read(fd, buf + got, sizeof(buf) - got);
    ASSERT_GT(n, 0);
    got += static_cast<size_t>(n);
  }
  close(fd);
  dialer.join();
  EXPECT_EQ(dialed.status().code(), absl::StatusCode::kFailedPrecondition) << dialed.status();
  EXPECT_THAT(dialed.status().message(), HasSubstr("older mixnet plugin"));
  close(l->fd);
}

constexpr char kSpecA[] = R"(name: fp
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 10.0.0.1/24, gbps: 100}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 10.0.0.2/24, gbps: 100}
)";
// The same spec in block style, with comments and keys in another order.
constexpr char kSpecALayout[] = R"(# the same cluster
name: fp
hosts:
  - nics:
      - name: eps0
        gbps: 100   # link speed
        address: 10.0.0.1/24
        role: eps
    name: h0
  - name: h1
    nics:
      - role: eps
        name: eps0
        address: 10.0.0.2/24
        gbps: 100
)";

TEST(SpecFingerprint, IgnoresLayoutAndSeesEveryField) {
  auto a = cluster::ClusterSpec::Parse(kSpecA);
  auto b = cluster::ClusterSpec::Parse(kSpecALayout);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string fa = SpecFingerprint(*a);
  EXPECT_EQ(fa.size(), 16u);
  EXPECT_EQ(fa, SpecFingerprint(*b));
  cluster::ClusterSpec c = *a;
  c.hosts[1].nics[0].address = "10.0.0.3";
  EXPECT_NE(SpecFingerprint(c), fa);
  c = *a;
  c.hosts[0].nics[0].gbps = 200;
  EXPECT_NE(SpecFingerprint(c), fa);
  c = *a;
  std::swap(c.hosts[0].name, c.hosts[1].name);
  EXPECT_NE(SpecFingerprint(c), fa);
}

}  // namespace
}  // namespace mixnet::nccl
