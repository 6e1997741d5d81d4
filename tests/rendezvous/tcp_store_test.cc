// TCP-store-specific tests: a dead, stopped or late server, garbage on the wire,
// and server shutdown while clients wait. Servers run in this process (a
// background thread) or in a forked child that can be killed.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/rendezvous/store.h"
#include "tests/rendezvous/test_util.h"

namespace mixnet::rendezvous {
namespace {

using ::testing::AnyOf;
using testing::ForkChild;
using ::testing::HasSubstr;
using testing::Stopwatch;
using testing::WaitChildren;

// A TcpStoreServer in a forked child; the port comes back through a pipe.
struct ChildServer {
  pid_t pid = -1;
  int port = 0;

  static ChildServer Start() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    ChildServer c;
    c.pid = ForkChild([&]() -> int {
      ::close(fds[0]);
      auto server = TcpStoreServer::Start("127.0.0.1", 0);
      if (!server.ok()) return 2;
      int port = (*server)->port();
      if (::write(fds[1], &port, sizeof(port)) != sizeof(port)) return 3;
      while (true) ::pause();  // killed by the test
    });
    ::close(fds[1]);
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 10000) == 1) {
      EXPECT_EQ(::read(fds[0], &c.port, sizeof(c.port)), static_cast<ssize_t>(sizeof(c.port)));
    }
    ::close(fds[0]);
    EXPECT_GT(c.port, 0) << "child server did not start";
    return c;
  }

  void Kill(int sig = SIGKILL) { ::kill(pid, sig); }
  ~ChildServer() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      WaitChildren({pid}, absl::Seconds(10));
    }
  }
};

TEST(TcpStoreTest, ServerKilledGivesUnavailableNotHang) {
  ChildServer server = ChildServer::Start();
  ASSERT_GT(server.port, 0);
  auto client = ConnectTcpStore("127.0.0.1", server.port, absl::Seconds(5));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());

  // One Get is parked on the server when it dies.
  absl::Status parked_status;
  absl::Duration parked_took;
  std::thread waiter([&] {
    Stopwatch sw;
    parked_status = (*client)->Get("never", absl::Seconds(60)).status();
    parked_took = sw.Elapsed();
  });
  absl::SleepFor(absl::Milliseconds(200));
  server.Kill();
  waiter.join();
  std::string where = absl::StrCat("127.0.0.1:", server.port);
  EXPECT_EQ(parked_status.code(), absl::StatusCode::kUnavailable) << parked_status;
  EXPECT_THAT(parked_status.message(), HasSubstr(where));
  EXPECT_LT(parked_took, absl::Seconds(5));

  // Later calls fail at once too.
  Stopwatch sw;
  absl::Status s = (*client)->Set("k2", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr(where));
  s = (*client)->Get("k", absl::Seconds(30)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(sw.Elapsed(), absl::Seconds(5));
}

TEST(TcpStoreTest, StoppedServerTimesOutNotHang) {
  ChildServer server = ChildServer::Start();
  ASSERT_GT(server.port, 0);
  auto client = ConnectTcpStore("127.0.0.1", server.port, absl::Seconds(1));
  ASSERT_TRUE(client.ok()) << client.status();
  server.Kill(SIGSTOP);  // alive but silent: only the client's timeouts help
  Stopwatch sw;
  absl::Status s = (*client)->Get("k", absl::Milliseconds(200)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("127.0.0.1:", server.port)));
  EXPECT_GE(sw.Elapsed(), absl::Milliseconds(1100));
  EXPECT_LT(sw.Elapsed(), absl::Seconds(4));
  sw = Stopwatch();
  s = (*client)->Set("k", "v");  // a new connection: the kernel accepts, nobody answers
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(sw.Elapsed(), absl::Seconds(4));
}

TEST(TcpStoreTest, ServerDestroyedWhileGetParked) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto client = ConnectTcpStore("127.0.0.1", (*server)->port(), absl::Seconds(5));
  ASSERT_TRUE(client.ok());
  absl::Status status;
  std::thread waiter([&] { status = (*client)->Get("never", absl::Seconds(60)).status(); });
  absl::SleepFor(absl::Milliseconds(100));
  Stopwatch sw;
  server->reset();  // stops the thread, closes every connection
  waiter.join();
  EXPECT_LT(sw.Elapsed(), absl::Seconds(5));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

TEST(TcpStoreTest, ClientConnectsBeforeServerStarts) {
  int port = testing::FreePort();
  absl::StatusOr<std::unique_ptr<Store>> client;
  std::thread connector([&] { client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(20)); });
  absl::SleepFor(absl::Milliseconds(300));
  auto server = TcpStoreServer::Start("127.0.0.1", port);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), port);
  connector.join();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("a", "b").ok());
  EXPECT_EQ(*(*client)->Get("a", absl::Seconds(1)), "b");
}

TEST(TcpStoreTest, ConnectWithoutServerFailsAfterTimeout) {
  int port = testing::FreePort();
  Stopwatch sw;
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Milliseconds(300));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(client.status().message(), HasSubstr("connect"));
  EXPECT_GE(sw.Elapsed(), absl::Milliseconds(290));
  EXPECT_LT(sw.Elapsed(), absl::Seconds(3));
  EXPECT_EQ(ConnectTcpStore("", port, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConnectTcpStore("127.0.0.1", 0, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpStoreTest, BindFailureIsAnError) {
  auto first = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = TcpStoreServer::Start("127.0.0.1", (*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("bind"));
  EXPECT_EQ(TcpStoreServer::Start("127.0.0.1", 70000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Sends raw bytes, shuts down the sending side and returns what the server
// sends back before closing.
std::string RawExchange(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  ::shutdown(fd, SHUT_WR);
  std::string got;
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) break;  // the server should close; 5 s is a failure
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return got;
}

std::string Header(uint8_t op, uint32_t key_len, uint32_t value_len) {
  std::string h(24, '\0');
  std::memcpy(h.data(), "MXRV", 4);
  h[4] = static_cast<char>(op);
  for (int i = 0; i < 4; ++i) h[8 + i] = static_cast<char>((key_len >> (8 * i)) & 0xff);
  for (int i = 0; i < 4; ++i) h[12 + i] = static_cast<char>((value_len >> (8 * i)) & 0xff);
  return h;
}

TEST(TcpStoreTest, GarbageIsRejectedAndServerKeepsServing) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  int port = (*server)->port();
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(5));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Set("before", "1").ok());

  const std::string kGarbage[] = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",  // wrong protocol
      Header(9, 1, 0) + "k",                // unknown op
      Header(1, 1, 0xffffffffu),            // 4 GiB value
      Header(1, 0, 0),                      // empty key
      Header(1, 1 << 30, 0),                // 1 GiB key
      Header(2, 1, 5) + "k" + "value",      // Get with a value
      std::string(24, '\0'),                // zeros
  };
  for (const std::string& g : kGarbage) {
    std::string reply = RawExchange(port, g);
    // An error frame (magic, non-zero code, message), then the server closed.
    ASSERT_GE(reply.size(), 24u) << absl::CHexEscape(g);
    EXPECT_EQ(reply.substr(0, 4), "MXRV");
    EXPECT_EQ(static_cast<int>(reply[4]), static_cast<int>(absl::StatusCode::kInvalidArgument));
  }
  // Half a frame, then hang up.
  EXPECT_EQ(RawExchange(port, Header(1, 3, 100).substr(0, 10)).size(), 0u);
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    std::string partial = Header(1, 3, 100) + "key" + "only part of the value";
    ::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  // Still serving, state intact.
  EXPECT_EQ(*(*client)->Get("before", absl::Seconds(1)), "1");
  ASSERT_TRUE((*client)->Set("after", "2").ok());
  EXPECT_EQ(*(*client)->Get("after", absl::Seconds(1)), "2");
  EXPECT_EQ((*client)->Get("key", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(TcpStoreTest, ClientDisconnectWhileParkedIsCleanedUp) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  int port = (*server)->port();
  {
    // A raw Get with a 60 s timeout, then the client vanishes.
    std::string get = Header(2, 1, 0) + "w";
    get[16] = static_cast<char>(0x60);  // 0xea60 ms = 60 s
    get[17] = static_cast<char>(0xea);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ::send(fd, get.data(), get.size(), MSG_NOSIGNAL);
    absl::SleepFor(absl::Milliseconds(50));
    ::close(fd);
  }
  absl::SleepFor(absl::Milliseconds(50));
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(5));
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->Set("w", "x").ok());  // wakes nobody; must not touch the dead conn
  EXPECT_EQ(*(*client)->Get("w", absl::Seconds(1)), "x");
}

TEST(TcpStoreTest, ServeOnWildcardAndIpv6Loopback) {
  auto any = OpenStore("tcp://0.0.0.0:0", /*serve=*/true, absl::Seconds(5));
  ASSERT_TRUE(any.ok()) << any.status();
  ASSERT_TRUE((*any)->Set("k", "v").ok());
  EXPECT_EQ(*(*any)->Get("k", absl::Seconds(1)), "v");

  auto v6 = TcpStoreServer::Start("::1", 0);
  if (!v6.ok()) GTEST_SKIP() << "no IPv6 loopback: " << v6.status();
  auto c = OpenStore(absl::StrCat("tcp://[::1]:", (*v6)->port()), false, absl::Seconds(5));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Set("k6", "v6").ok());
  EXPECT_EQ(*(*c)->Get("k6", absl::Seconds(1)), "v6");
}

}  // namespace
}  // namespace mixnet::rendezvous
