// What the connection handshake checks and carries, end to end through the
// dlopened plugin (2 forked ranks on loopback, each a host of a cluster
// spec; label cpu):
//  * ranks whose cluster specs differ (here one NIC speed) fail connect and
//    accept instead of connecting silently, and the message names both
//    ranks' spec fingerprints (each rank logs its own at init);
//  * host names reach the peer in full, not cut to the 63 characters the
//    NCCL handle holds: with 100-character MIXNET_HOST names (no spec), the
//    error a send comm reports once its peer closed names the peer's whole
//    host name;
//  * names as long as the cluster spec allows (63-character hosts, 15-character
//    NICs) route: with a circuit between the two hosts each send comm moves
//    onto it exactly once (TCP connections appear between the hosts' OCS
//    addresses); every byte checked.
// Runs on the test thread; the ranks are forked processes (plugin_harness.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/nccl_net/epoch_traffic.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::TempDir;

std::string SpecYaml(const std::vector<std::string>& hosts, int eps_gbps, bool circuit,
                     const std::string& eps = "eps0", const std::string& ocs = "ocs0") {
  std::string y = "name: identity\nocs_switches:\n  - {name: ocs0, ports: 4, switch_ms: 1}\n";
  y += "hosts:\n";
  for (size_t h = 0; h < hosts.size(); ++h) {
    absl::StrAppend(&y, "  - name: ", hosts[h], "\n    nics:\n", "      - {name: ", eps,
                    ", role: eps, address: 127.0.46.", h + 1, "/32, gbps: ", eps_gbps, "}\n",
                    "      - {name: ", ocs, ", role: ocs, address: 127.0.47.", h + 1,
                    "/32, gbps: 100, switch: ocs0, port: ", h + 1, "}\n");
  }
  absl::StrAppend(&y, "regions:\n  - {name: r0, hosts: [", absl::StrJoin(hosts, ", "), "]}\n");
  if (circuit) y += "circuits:\n  - {switch: ocs0, ports: [1, 2]}\n";
  return y;
}

std::string OcsAddress(int rank) { return absl::StrCat("127.0.47.", rank + 1); }

void SetRankEnv(const std::string& spec, const std::string& host) {
  setenv("MIXNET_CLUSTER_SPEC", spec.c_str(), 1);
  setenv("MIXNET_HOST", host.c_str(), 1);
  unsetenv("MIXNET_CONTROLLER");
  setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
}

// The fingerprint a rank logged at init ("... (fingerprint <16 hex>) ...").
std::string LoggedFingerprint() {
  for (const std::string& l : LoggedLines()) {
    const size_t at = l.find("(fingerprint ");
    if (at != std::string::npos) return l.substr(at + 13, 16);
  }
  return "";
}

std::string Warnings() {
  std::vector<std::string> w;
  for (const std::string& l : LoggedLines()) {
    if (absl::StartsWith(l, "WARN ")) w.push_back(l);
  }
  return absl::StrJoin(w, "\n");
}

// Rank 0 listens, rank 1 connects; both must fail, naming both fingerprints.
absl::Status MismatchRank(int me, Board* b) {
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
  const std::string mine = LoggedFingerprint();
  char fp[abi::kHandleMaxSize] = {};
  std::memcpy(fp, mine.data(), std::min(mine.size(), sizeof(fp)));
  Publish(b, me, me, 3, fp);
  char theirs_buf[abi::kHandleMaxSize] = {};
  RETURN_IF_ERROR(Fetch(b, 1 - me, 1 - me, 3, theirs_buf));
  const std::string theirs(theirs_buf);
  char handle[abi::kHandleMaxSize] = {};
  void* listen = nullptr;
  if (me == 0) {
    NT_NCCL_OK(net.api->listen(net.ctx, 0, handle, &listen));
    Publish(b, 0, 1, 0, handle);
  } else {
    RETURN_IF_ERROR(Fetch(b, 0, 1, 0, handle));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int rc = 0;
  void* comm = nullptr;
  while (rc == 0 && comm == nullptr) {
    rc = me == 0 ? net.api->accept(listen, &comm, nullptr)
                 : net.api->connect(net.ctx, 0, handle, &comm, nullptr);
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": neither connected nor failed");
    usleep(200);
  }
  NT_REQUIRE(comm == nullptr, "rank ", me, ": ranks with different cluster specs connected");
  NT_REQUIRE(mine.size() == 16 && theirs.size() == 16 && mine != theirs, "rank ", me,
             ": the init logs name no distinct spec fingerprints ('", mine, "', '", theirs, "')");
  NT_REQUIRE(rc == abi::kInvalidUsage, "rank ", me, ": ncclResult ", rc, "; warnings:\n",
             Warnings());
  const std::string w = Warnings();
  NT_REQUIRE(absl::StrContains(w, "cluster specs differ") &&
                 absl::StrContains(w, "cluster spec " + mine) &&
                 absl::StrContains(w, "cluster spec " + theirs),
             "rank ", me, ": the failure does not name both fingerprints (", mine, ", ", theirs,
             "):\n", w);
  if (listen != nullptr) NT_NCCL_OK(net.api->close_listen(listen));
  return absl::OkStatus();
}

TEST(NcclNetIdentityTest, RanksWithDifferentClusterSpecsFailToConnectNamingBoth) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::vector<std::string> hosts = {"h0", "h1"};
  const std::string a = dir.path() + "/a.yaml", b = dir.path() + "/b.yaml";
  std::ofstream(a) << SpecYaml(hosts, 1, false);
  std::ofstream(b) << SpecYaml(hosts, 2, false);  // one rank has an edited copy
  absl::Status s = RunRanks(2, MismatchRank, absl::Seconds(30), [&](int rank) {
    SetRankEnv(rank == 0 ? a : b, hosts[rank]);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

// Both ranks exchange; with `circuit`, until the circuit carries their comms.
absl::Status LongNameRank(int me, Board* b, bool circuit) {
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
  ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  int seq = 0;
  for (bool done = false; !done;) {
    RETURN_IF_ERROR(ExchangeAll(net, m, me, 2, 100000, seq++));
    ASSIGN_OR_RETURN(done,
                     AllAgree(b, me, !circuit || Established(OcsAddress(0), OcsAddress(1)) > 0));
    NT_REQUIRE(absl::Now() < deadline, "rank ", me,
               ": the comms never moved onto the spec's circuit; log:\n",
               absl::StrJoin(LoggedLines(), "\n"));
  }
  for (int i = 0; i < 10; ++i) RETURN_IF_ERROR(ExchangeAll(net, m, me, 2, 300000, seq++));
  RETURN_IF_ERROR(Barrier(b));
  const std::string log = absl::StrJoin(LoggedLines(), "\n");
  int moves = 0;
  for (const std::string& l : LoggedLines()) moves += absl::StrContains(l, ": moving from ");
  NT_REQUIRE(moves == (circuit ? 1 : 0), "rank ", me, ": ", moves, " moves; expected ",
             circuit ? "one, onto the circuit" : "none", "; log:\n", log);
  return CloseMesh(net, m);
}

// The longest names the spec allows: 63-character hosts, 15-character NICs.
TEST(NcclNetIdentityTest, NamesAsLongAsTheSpecAllowsRouteOntoItsCircuit) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string stem = "gpu-node." + std::string(53, 'x');
  const std::vector<std::string> hosts = {stem + "a", stem + "b"};
  ASSERT_EQ(hosts[0].size(), 63u);
  const std::string spec = dir.path() + "/spec.yaml";
  std::ofstream(spec) << SpecYaml(hosts, 1, true, "eps-nic-0000000", "ocs-nic-0000000");
  absl::Status s = RunRanks(
      2, [&](int me, Board* b) { return LongNameRank(me, b, true); }, absl::Seconds(40),
      [&](int rank) {
        SetRankEnv(spec, hosts[rank]);
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
}

// Rank 0 (the listener) closes its recv comm; rank 1's sends then fail, and
// the failure must name rank 0's whole host name.
absl::Status FullNameRank(int me, Board* b, const std::vector<std::string>& hosts) {
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
  char handle[abi::kHandleMaxSize] = {};
  void *listen = nullptr, *comm = nullptr;
  if (me == 0) {
    NT_NCCL_OK(net.api->listen(net.ctx, 0, handle, &listen));
    Publish(b, 0, 1, 0, handle);
    RETURN_IF_ERROR(ConnectAccept(net, nullptr, nullptr, listen, &comm));
    NT_NCCL_OK(net.api->close_listen(listen));
    NT_NCCL_OK(net.api->close_recv(comm));
    return Barrier(b);
  }
  RETURN_IF_ERROR(Fetch(b, 0, 1, 0, handle));
  RETURN_IF_ERROR(ConnectAccept(net, handle, &comm, nullptr, nullptr));
  RETURN_IF_ERROR(Barrier(b));  // rank 0 closed its end
  std::vector<uint8_t> buf(1 << 20, 7);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int rc = 0;
  while (rc == 0) {
    void* req = nullptr;
    rc = net.api->isend(comm, buf.data(), buf.size(), 1, nullptr, nullptr, &req);
    if (rc == 0 && req != nullptr) {
      int done = 0;
      while (rc == 0 && !done && absl::Now() < deadline) rc = net.api->test(req, &done, nullptr);
    }
    NT_REQUIRE(absl::Now() < deadline, "sends to a closed peer never failed");
  }
  const std::string w = Warnings();
  NT_REQUIRE(absl::StrContains(w, "nccl peer " + hosts[0] + " "), "the failure does not name the ",
             "peer's whole host name ", hosts[0], ":\n", w);
  return absl::OkStatus();
}

TEST(NcclNetIdentityTest, FailuresNameThePeersWholeHostName) {
  const std::vector<std::string> hosts = {"node-" + std::string(90, 'p') + ".example",
                                          "node-" + std::string(90, 'q') + ".example"};
  ASSERT_GT(hosts[0].size(), 63u);
  absl::Status s = RunRanks(
      2, [&](int me, Board* b) { return FullNameRank(me, b, hosts); }, absl::Seconds(30),
      [&](int rank) {
        unsetenv("MIXNET_CLUSTER_SPEC");
        setenv("MIXNET_HOST", hosts[rank].c_str(), 1);
        setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace mixnet::nccl_test
