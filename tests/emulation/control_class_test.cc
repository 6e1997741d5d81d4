// The control class on the emulated cluster (label netns, needs root; skips
// with the reason otherwise). Links built with EmulationOptions::control_tos
// have a strict-priority queue for that TOS (emulation/links.h, SetTbf), and
// the TCP transport marks each connection's control socket with
// DeviceOptions::control_tos (MIXNET_CONTROL_TC). Four hosts on one EPS
// bridge at 0.025 Gbit/s, where a 400-frame queue is 194 ms: h2 and h3
// stream bulk TCP into h0, so h0's bridge port holds a standing queue
// (incast), while h1 and h0 play ping-pong with small (eager) messages over
// two transport connections, one whose control socket carries the class and
// one whose does not. The unmarked round trips wait in h0's queue (the test
// fails if they do not: no queue, nothing shown); the marked ones pass it.
// Test thread, the bulk threads and the devices' progress threads.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "emulation/emulated_fabric.h"
#include "emulation/fabric_names.h"
#include "emulation/links.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/transport/transport.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::emulation {
namespace {

constexpr char kSpec[] = R"(
name: ctlclass
hosts:
  - {name: h0, nics: [{name: eps0, role: eps, address: 10.30.0.1/24, gbps: 0.025}]}
  - {name: h1, nics: [{name: eps0, role: eps, address: 10.30.0.2/24, gbps: 0.025}]}
  - {name: h2, nics: [{name: eps0, role: eps, address: 10.30.0.3/24, gbps: 0.025}]}
  - {name: h3, nics: [{name: eps0, role: eps, address: 10.30.0.4/24, gbps: 0.025}]}
regions:
  - {name: r0, hosts: [h0, h1, h2, h3]}
)";
constexpr int kControlTos = 0xb8;  // DSCP 46

std::string Ip(int host) { return absl::StrCat("10.30.0.", host + 1); }

class ControlClassTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    auto spec = cluster::ClusterSpec::Parse(kSpec, "control_class_test");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    prefix_ = testing::UniquePrefix("ctlc");
    EmulationOptions eo;
    eo.control_tos = kControlTos;
    auto fabric = EmulatedFabric::Up(*spec, prefix_, eo);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = std::move(*fabric);
  }
  void TearDown() override {
    stop_ = true;
    for (std::thread& t : bulk_) t.join();
    if (fabric_) {
      EXPECT_TRUE(fabric_->Down().ok());
      EXPECT_TRUE(netns::ListNamespaces(prefix_ + "-").value().empty());
    }
  }

  // h2 and h3 send to h0 as fast as TCP lets them until TearDown; h0 reads.
  void StartIncast() {
    auto l = testing::Listener::Open(fabric_->HostNamespace("h0"), Ip(0));
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = std::make_unique<testing::Listener>(std::move(*l));
    for (int h : {2, 3}) {
      bulk_.emplace_back([this, h] {
        (void)netns::RunInNamespace(fabric_->HostNamespace(absl::StrCat("h", h)), [&] {
          const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          sockaddr_in sa{};
          sa.sin_family = AF_INET;
          sa.sin_port = htons(static_cast<uint16_t>(listener_->port()));
          inet_pton(AF_INET, Ip(0).c_str(), &sa.sin_addr);
          if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
            const std::vector<char> data(1 << 16, 'x');
            while (!stop_) {
              pollfd p{fd, POLLOUT, 0};
              if (poll(&p, 1, 50) == 1 &&
                  send(fd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
                  errno != EAGAIN) {
                break;
              }
            }
          }
          close(fd);
          return absl::OkStatus();
        });
      });
    }
    bulk_.emplace_back([this] {
      std::vector<int> conns;
      std::vector<char> buf(1 << 16);
      while (!stop_) {
        std::vector<pollfd> ps{{listener_->fd(), POLLIN, 0}};
        for (int c : conns) ps.push_back({c, POLLIN, 0});
        if (poll(ps.data(), ps.size(), 50) <= 0) continue;
        if (ps[0].revents & POLLIN) conns.push_back(accept4(listener_->fd(), nullptr, nullptr, 0));
        for (size_t i = 1; i < ps.size(); ++i) {
          if (ps[i].revents & POLLIN) (void)read(ps[i].fd, buf.data(), buf.size());
        }
      }
      for (int c : conns) close(c);
    });
  }

  // A connected device pair h1 <-> h0 whose devices mark their control
  // sockets with `control_tos` (-1: unmarked).
  struct Pair {
    std::unique_ptr<transport::Device> dev[2];
    std::unique_ptr<transport::Connection> conn[2];
  };
  void Connect(int control_tos, Pair& p) {
    static std::atomic<uint64_t> next_id{1};
    const uint64_t id = next_id.fetch_add(1);
    const int hosts[2] = {1, 0};
    for (int i = 0; i < 2; ++i) {
      transport::DeviceOptions d;
      d.ifname = "eps0";
      d.bind_address = Ip(hosts[i]);
      d.control_tos = control_tos;
      ASSERT_TRUE(netns::RunInNamespace(fabric_->HostNamespace(absl::StrCat("h", hosts[i])),
                                        [&]() -> absl::Status {
                                          ASSIGN_OR_RETURN(p.dev[i],
                                                           transport::CreateDevice("tcp", d));
                                          return absl::OkStatus();
                                        })
                      .ok());
    }
    absl::Status cs[2];
    std::vector<std::thread> t;
    for (int i = 0; i < 2; ++i) {
      t.emplace_back([&, i] {
        cs[i] = netns::RunInNamespace(fabric_->HostNamespace(absl::StrCat("h", hosts[i])),
                                      [&]() -> absl::Status {
                                        transport::ConnectOptions c;
                                        c.remote_address = p.dev[1 - i]->address();
                                        c.connection_id = id;
                                        c.initiator = i == 0;
                                        c.peer_name = absl::StrCat("h", hosts[1 - i]);
                                        c.timeout = absl::Seconds(20);
                                        ASSIGN_OR_RETURN(p.conn[i], p.dev[i]->Connect(c));
                                        return absl::OkStatus();
                                      });
      });
    }
    for (std::thread& th : t) th.join();
    for (const absl::Status& s : cs) ASSERT_TRUE(s.ok()) << s;
  }

  // Median round trip (ms) of `n` 1 KiB messages h1 -> h0 -> h1.
  double PingPongMs(Pair& p, int n) {
    std::vector<char> out(1024, 'p'), in(1024), echo(1024);
    std::vector<double> ms;
    for (int k = 0; k < n; ++k) {
      const uint64_t tag = 100 + k;
      auto r0 = p.conn[1]->Irecv(echo.data(), echo.size(), tag);
      auto r1 = p.conn[0]->Irecv(in.data(), in.size(), tag);
      EXPECT_TRUE(r0.ok() && r1.ok());
      if (!r0.ok() || !r1.ok()) return -1;
      const absl::Time t0 = absl::Now();
      auto s1 = p.conn[0]->Isend(out.data(), out.size(), tag);
      EXPECT_TRUE(s1.ok() && (*r0)->Wait(absl::Seconds(10)).ok());
      auto s0 = p.conn[1]->Isend(echo.data(), echo.size(), tag);
      EXPECT_TRUE(s0.ok() && (*r1)->Wait(absl::Seconds(10)).ok());
      ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
      EXPECT_TRUE((*s1)->Wait(absl::Seconds(10)).ok() && (*s0)->Wait(absl::Seconds(10)).ok());
      absl::SleepFor(absl::Milliseconds(20));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  cluster::ClusterSpec spec_;
  std::string prefix_;
  std::unique_ptr<EmulatedFabric> fabric_;
  std::unique_ptr<testing::Listener> listener_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> bulk_;
};

TEST_F(ControlClassTest, EveryShapedLinkHasThePriorityQueue) {
  // Both ends of each host's link: its NIC, and its port on the bridge.
  for (const auto& [ns, link] : {std::pair{fabric_->HostNamespace("h0"), std::string("eps0")},
                                 {fabric_->HostNamespace("h3"), std::string("eps0")},
                                 {fabric_->EpsNamespace(), EpsPortName(spec_, 0, 0)}}) {
    auto sock = netns::NlSocket::Open(ns);
    ASSERT_TRUE(sock.ok()) << sock.status();
    absl::StatusOr<LinkInfo> l = ReadLink(**sock, link);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_TRUE(l->priority_queue) << ns << " " << link;
    EXPECT_EQ(l->tbf_rate_bytes_per_s, 3'125'000u) << ns << " " << link;
  }
}

TEST_F(ControlClassTest, MarkedControlSocketPassesTheStandingQueue) {
  Pair marked, plain;
  Connect(kControlTos, marked);
  Connect(-1, plain);
  StartIncast();
  absl::SleepFor(absl::Seconds(1));  // the queue at h0's bridge port fills
  const double plain_ms = PingPongMs(plain, 7);
  const double marked_ms = PingPongMs(marked, 7);
  std::printf("ping-pong through h0's full port: unmarked %.1f ms, control class %.1f ms\n",
              plain_ms, marked_ms);
  // 400 frames at 3.125 MB/s are 194 ms; TCP's losses drain it in part.
  EXPECT_GT(plain_ms, 40) << "no standing queue at h0's port: the test shows nothing";
  EXPECT_LT(marked_ms, 0.2 * plain_ms);
  EXPECT_LT(marked_ms, 20);
}

}  // namespace
}  // namespace mixnet::emulation
