// The plugin's default interface on a host that looks like a cluster node
// (label netns; needs root, skips with the reason otherwise). One network
// namespace holds, in this order: lo, a docker0 bridge (172.17.0.1, as
// docker gives every host), a container veth end (vethc0ffee, up, with an
// address), its peer eth9 (down, with an address), then ens7 (up,
// 10.77.0.1). With MIXNET_SOCKET_IFNAME unset, a rank in the namespace must
// get one NCCL device on ens7, logged at INFO with what was passed over,
// and a connection over it must carry a checked message; a second rank with
// MIXNET_SOCKET_IFNAME=lo keeps loopback. The namespace is removed whatever
// happens. Runs on the test thread; the ranks are forked processes.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "emulation/links.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "ocs_driver/netns/nl_socket.h"
#include "tests/emulation/netns_test_util.h"
#include "tests/nccl_net/enter_host.h"
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {
namespace {

bool Logged(const std::string& what) {
  std::vector<std::string> lines = LoggedLines();
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return absl::StrContains(l, what); });
}

// Builds the node's interfaces in `ns` (see the file comment).
absl::Status BuildNode(const std::string& ns) {
  ASSIGN_OR_RETURN(std::unique_ptr<netns::NlSocket> s, netns::NlSocket::Open(ns));
  RETURN_IF_ERROR(emulation::SetLinkUp(*s, "lo"));
  RETURN_IF_ERROR(emulation::CreateBridge(*s, "docker0"));
  RETURN_IF_ERROR(emulation::AddAddress(*s, "docker0", "172.17.0.1", 16));
  RETURN_IF_ERROR(emulation::SetLinkUp(*s, "docker0"));
  RETURN_IF_ERROR(emulation::CreateVeth(*s, "vethc0ffee", ns, "eth9"));
  RETURN_IF_ERROR(emulation::AddAddress(*s, "vethc0ffee", "169.254.7.1", 16));
  RETURN_IF_ERROR(emulation::AddAddress(*s, "eth9", "10.77.1.1", 24));
  RETURN_IF_ERROR(emulation::SetLinkUp(*s, "vethc0ffee"));  // eth9 stays down
  RETURN_IF_ERROR(emulation::CreateVeth(*s, "ens7", ns, "ens7p"));
  RETURN_IF_ERROR(emulation::AddAddress(*s, "ens7", "10.77.0.1", 24));
  RETURN_IF_ERROR(emulation::SetLinkUp(*s, "ens7p"));
  return emulation::SetLinkUp(*s, "ens7");
}

// One message from the rank to itself over the plugin's device.
absl::Status SelfMessage(const Net& net) {
  char handle[abi::kHandleMaxSize] = {};
  void* listen = nullptr;
  NT_NCCL_OK(net.api->listen(net.ctx, 0, handle, &listen));
  void *send = nullptr, *recv = nullptr;
  RETURN_IF_ERROR(ConnectAccept(net, handle, &send, listen, &recv));
  std::vector<uint8_t> out(100000), in(100000, 0);
  Fill(out.data(), out.size(), 77);
  void *sreq = nullptr, *rreq = nullptr;
  void* data[1] = {in.data()};
  size_t sizes[1] = {in.size()};
  int tags[1] = {5};
  NT_NCCL_OK(net.api->irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &rreq));
  NT_NCCL_OK(net.api->isend(send, out.data(), out.size(), 5, nullptr, nullptr, &sreq));
  NT_REQUIRE(sreq != nullptr && rreq != nullptr, "posts refused");
  int got[1] = {-1};
  ASSIGN_OR_RETURN(int rs, WaitRequest(net, sreq, nullptr));
  ASSIGN_OR_RETURN(int rr, WaitRequest(net, rreq, got));
  NT_REQUIRE(rs == 0 && rr == 0, "test returned ", rs, " / ", rr);
  NT_REQUIRE(got[0] == static_cast<int>(out.size()) && Check(in.data(), in.size(), 77),
             "message damaged");
  NT_NCCL_OK(net.api->close_send(send));
  NT_NCCL_OK(net.api->close_recv(recv));
  NT_NCCL_OK(net.api->close_listen(listen));
  return absl::OkStatus();
}

absl::Status RunRank(int me, Board*) {
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
  int ndev = 0;
  NT_NCCL_OK(net.api->devices(&ndev));
  const std::string log = absl::StrJoin(LoggedLines(), "\n");
  NT_REQUIRE(ndev == 1, "rank ", me, ": ", ndev, " devices; log:\n", log);
  if (me == 0) {
    NT_REQUIRE(Logged("1 device(s): mixnet=ens7(10.77.0.1)"),
               "MIXNET_SOCKET_IFNAME unset did not give ens7; log:\n", log);
    NT_REQUIRE(Logged("INFO NET/mixnet: MIXNET_SOCKET_IFNAME is not set: using ens7 (10.77.0.1)"),
               "the choice was not logged at INFO; log:\n", log);
    for (const char* passed :
         {"lo (loopback)", "docker0 (docker-style)", "vethc0ffee (docker-style)", "eth9 (down)"}) {
      NT_REQUIRE(Logged(passed), "the log does not say it passed over ", passed, "; log:\n", log);
    }
  } else {
    NT_REQUIRE(Logged("1 device(s): mixnet=lo(127.0.0.1)"),
               "MIXNET_SOCKET_IFNAME=lo not honoured; log:\n", log);
  }
  RETURN_IF_ERROR(SelfMessage(net));
  NT_NCCL_OK(net.api->finalize(net.ctx));
  return absl::OkStatus();
}

TEST(NcclNetIfnameTest, UnsetPicksTheFirstUpNonLoopbackNonDockerInterface) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::string ns = testing::UniquePrefix("ncclf") + "-if";
  absl::Status made = netns::CreateNamespace(ns);
  ASSERT_TRUE(made.ok()) << made;
  absl::Status built = BuildNode(ns);
  absl::Status ranks;
  if (built.ok()) {
    ranks = RunRanks(2, RunRank, absl::Seconds(30), [&](int rank) -> absl::Status {
      RETURN_IF_ERROR(EnterHostNamespace(ns));
      if (rank == 0) {
        unsetenv("MIXNET_SOCKET_IFNAME");
      } else {
        setenv("MIXNET_SOCKET_IFNAME", "lo", 1);
      }
      return absl::OkStatus();
    });
  }
  absl::Status removed = netns::DeleteNamespace(ns);
  EXPECT_TRUE(built.ok()) << built;
  EXPECT_TRUE(ranks.ok()) << ranks;
  EXPECT_TRUE(removed.ok()) << removed;
  EXPECT_FALSE(netns::NamespaceExists(ns)) << ns << " left behind";
}

}  // namespace
}  // namespace mixnet::nccl_test
