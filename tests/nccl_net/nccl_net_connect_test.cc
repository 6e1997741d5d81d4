// Connection set-up resources of the plugin, through the dlopened library in
// one forked rank on loopback (label cpu):
//  * connects NCCL abandons (polled once, never again) are dropped with
//    their connections once not polled for MIXNET_CONNECT_TIMEOUT_MS (1 s
//    here): the process's open descriptors return to what they were, and a
//    late poll of such a handle fails instead of dialing again;
//  * many connects pending at once (to a listener that never accepts) run
//    on at most 32 helper threads (the documented limit), and those threads
//    end once idle;
//  * NCCL's traffic class (init's CommConfig) marks the comms' TCP sockets
//    (IPv4 TOS byte), as it sets the GRH traffic class under verbs.
// Runs on the test thread; the rank is a forked process (plugin_harness.h).
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {
namespace {

using Handle = std::array<char, abi::kHandleMaxSize>;
constexpr int kHelperLimit = 32;  // README: connection set-ups per kind at once

int CountEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}
int OpenFds() { return CountEntries("/proc/self/fd"); }
int Threads() { return CountEntries("/proc/self/task"); }

absl::Status AbandonedRank(int, Board*) {
  ASSIGN_OR_RETURN(Net net, OpenNet());
  Handle handle{};
  void* listen = nullptr;
  NT_NCCL_OK(net.api->listen(net.ctx, 0, handle.data(), &listen));
  // One full connection first, so every lazily made resource exists.
  {
    Handle h = handle;
    void *send = nullptr, *recv = nullptr;
    RETURN_IF_ERROR(ConnectAccept(net, h.data(), &send, listen, &recv));
    NT_NCCL_OK(net.api->close_send(send));
    NT_NCCL_OK(net.api->close_recv(recv));
  }
  usleep(200 * 1000);
  const int fds_before = OpenFds();
  // 16 connects polled once each; the listener answers them all.
  constexpr int kAbandoned = 16;
  std::vector<Handle> abandoned(kAbandoned, handle);
  for (Handle& h : abandoned) {
    void* comm = nullptr;
    NT_NCCL_OK(net.api->connect(net.ctx, 0, h.data(), &comm, nullptr));
    NT_REQUIRE(comm == nullptr, "a connect finished on its first poll");
  }
  std::vector<void*> recvs;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (static_cast<int>(recvs.size()) < kAbandoned) {
    void* recv = nullptr;
    NT_NCCL_OK(net.api->accept(listen, &recv, nullptr));
    if (recv != nullptr) recvs.push_back(recv);
    NT_REQUIRE(absl::Now() < deadline, "only ", recvs.size(), " of ", kAbandoned, " accepted");
    usleep(100);
  }
  for (void* r : recvs) NT_NCCL_OK(net.api->close_recv(r));
  const int fds_pending = OpenFds();
  // Past MIXNET_CONNECT_TIMEOUT_MS; the next connect call sweeps.
  usleep(1600 * 1000);
  Handle fresh = handle;
  void *send = nullptr, *recv = nullptr;
  RETURN_IF_ERROR(ConnectAccept(net, fresh.data(), &send, listen, &recv));
  NT_NCCL_OK(net.api->close_send(send));
  NT_NCCL_OK(net.api->close_recv(recv));
  usleep(200 * 1000);
  const int fds_after = OpenFds();
  fprintf(stderr,
          "open descriptors: %d before the abandoned connects, %d with them pending, %d after\n",
          fds_before, fds_pending, fds_after);
  NT_REQUIRE(fds_after <= fds_before + 2, "abandoned connects still hold descriptors: ", fds_before,
             " before them, ", fds_pending, " while pending, ", fds_after,
             " after the connect timeout");
  void* late = nullptr;
  const int rc = net.api->connect(net.ctx, 0, abandoned[0].data(), &late, nullptr);
  NT_REQUIRE(rc != 0 && late == nullptr,
             "polling an abandoned connect's handle again gave ncclResult ", rc,
             late != nullptr ? " and a comm" : "");
  NT_NCCL_OK(net.api->close_listen(listen));
  return absl::OkStatus();
}

TEST(NcclNetConnectTest, AbandonedConnectsAreDroppedWithTheirConnections) {
  absl::Status s = RunRanks(1, AbandonedRank, absl::Seconds(40), [](int) {
    setenv("MIXNET_CONNECT_TIMEOUT_MS", "1000", 1);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

// Connected TCP sockets of this process, and how many have TOS `tos`.
std::pair<int, int> SocketsWithTos(int tos) {
  int tcp = 0, marked = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in peer{};
    socklen_t pl = sizeof(peer);
    int type = 0;
    socklen_t tl = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 ||
        peer.sin_family != AF_INET) {
      continue;
    }
    ++tcp;
    int v = -1;
    socklen_t vl = sizeof(v);
    if (getsockopt(fd, IPPROTO_IP, IP_TOS, &v, &vl) == 0 && v == tos) ++marked;
  }
  return {tcp, marked};
}

absl::Status TrafficClassRank(int, Board*) {
  constexpr int kTos = 0x60;  // DSCP 24 (CS3)
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/false, kTos));
  Handle handle{};
  void* listen = nullptr;
  NT_NCCL_OK(net.api->listen(net.ctx, 0, handle.data(), &listen));
  void* send = nullptr;
  void* recv = nullptr;
  RETURN_IF_ERROR(ConnectAccept(net, handle.data(), &send, listen, &recv));
  const auto [tcp, marked] = SocketsWithTos(kTos);
  fprintf(stderr, "%d connected TCP sockets, %d with TOS 0x%x\n", tcp, marked, kTos);
  // Both ends of the comm's connection: two sockets each (MIXNET_SOCKETS_PER_PATH).
  NT_REQUIRE(marked >= 4, "only ", marked, " of ", tcp, " sockets carry NCCL's traffic class");
  NT_NCCL_OK(net.api->close_send(send));
  NT_NCCL_OK(net.api->close_recv(recv));
  NT_NCCL_OK(net.api->close_listen(listen));
  return absl::OkStatus();
}

TEST(NcclNetConnectTest, NcclsTrafficClassMarksTheSockets) {
  absl::Status s = RunRanks(1, TrafficClassRank, absl::Seconds(40), [](int) {
    setenv("MIXNET_SOCKETS_PER_PATH", "2", 1);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

absl::Status BoundedRank(int, Board*) {
  ASSIGN_OR_RETURN(Net net, OpenNet());
  Handle handle{};
  void* listen = nullptr;
  NT_NCCL_OK(net.api->listen(net.ctx, 0, handle.data(), &listen));
  usleep(100 * 1000);
  const int base = Threads();
  // 48 connects to a listener that never accepts: each waits for a reply.
  constexpr int kPending = 48;
  std::vector<Handle> handles(kPending, handle);
  for (Handle& h : handles) {
    void* comm = nullptr;
    NT_NCCL_OK(net.api->connect(net.ctx, 0, h.data(), &comm, nullptr));
  }
  int peak = 0;
  for (int i = 0; i < 20; ++i) {
    peak = std::max(peak, Threads() - base);
    usleep(25 * 1000);
  }
  fprintf(stderr, "%d connects pending: at most %d set-up threads at once\n", kPending, peak);
  NT_REQUIRE(peak <= kHelperLimit, "connection set-ups ran on ", peak, " threads at once (limit ",
             kHelperLimit, ")");
  NT_REQUIRE(peak >= kHelperLimit / 2, "only ", peak, " set-up threads: did the dials start?");
  // They time out (MIXNET_CONNECT_TIMEOUT_MS) and fail; then the threads end.
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  int failed = 0;
  std::vector<bool> done(kPending, false);
  while (failed < kPending) {
    for (int k = 0; k < kPending; ++k) {
      if (done[k]) continue;
      void* comm = nullptr;
      const int rc = net.api->connect(net.ctx, 0, handles[k].data(), &comm, nullptr);
      NT_REQUIRE(comm == nullptr, "a connect to a listener that never accepts succeeded");
      if (rc != 0) {
        done[k] = true;
        ++failed;
      }
    }
    NT_REQUIRE(absl::Now() < deadline, "only ", failed, " of ", kPending, " connects ended");
    usleep(10 * 1000);
  }
  usleep(3000 * 1000);  // helper threads end after 2 s idle
  const int left = Threads() - base;
  NT_REQUIRE(left <= 0, left, " set-up threads still alive after their work ended");
  NT_NCCL_OK(net.api->close_listen(listen));
  return absl::OkStatus();
}

TEST(NcclNetConnectTest, PendingConnectsRunOnABoundedNumberOfThreads) {
  absl::Status s = RunRanks(1, BoundedRank, absl::Seconds(40), [](int) {
    setenv("MIXNET_CONNECT_TIMEOUT_MS", "1500", 1);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace mixnet::nccl_test
