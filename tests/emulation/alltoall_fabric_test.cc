// Traffic placement on the emulated cluster (label netns; needs root, skips
// with the reason otherwise). Four mixnet_alltoall_perf rank processes, one in
// each host namespace of a 4-host fabric, run a byte-checked alltoall; the
// tx_bytes counters of every host NIC then show that the bytes to a peer
// joined by OCS circuits left through the OCS NICs of those circuits (striped
// evenly over two circuits) and the bytes to every other peer through the EPS
// NIC, and nothing through a dark OCS NIC. A second case re-wires the OCS at
// run time (EmulatedFabric::ApplyCircuits) and checks that new ranks, given a
// spec with the new circuits, follow them. Bounds are counter deltas with
// margins for TCP/IP headers, ACKs and control messages, never timings.
//
// Runs on the test thread; the ranks are child processes it supervises.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "emulation/emulated_fabric.h"
#include "emulation/netns_exec.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/status.h"
#include "tests/emulation/fabric_test_util.h"
#include "tests/emulation/netns_test_util.h"

#include "mixnet_build_paths.h"  // MIXNET_ALLTOALL_PERF_BIN (tests/emulation/CMakeLists.txt)

namespace mixnet::emulation {
namespace {

using cluster::CircuitSpec;
using cluster::ClusterSpec;

const char* const kPerfBin = MIXNET_ALLTOALL_PERF_BIN;

// What every run does: per size one checked alltoall (no --no-check), then
// `kWarmup` untimed and `kIters` timed ones, plus barriers and an 8-byte
// allgather per timed iteration (small, inside kSlackBytes).
constexpr uint64_t kBytesPerPeer = 2 << 20;
constexpr char kSizeArg[] = "2M";
constexpr int kWarmup = 0;
constexpr int kIters = 1;
constexpr int kAlltoalls = 1 + kWarmup + kIters;
// Payload bytes each rank sends to each other rank in one run.
constexpr uint64_t kBytesToPeer = kBytesPerPeer * kAlltoalls;

// Margins. On the wire a NIC's tx_bytes exceed its payload by the Ethernet,
// IP and TCP headers (66 bytes per 1448-byte segment: 4.6%) plus the ACKs it
// sends for what it receives (the alltoall is symmetric: up to another 4.6%).
// kSlackBytes covers handshakes, count messages, barriers, the allgather and
// ARP. A stripe must carry at least kMinStripeShare of its even share.
constexpr double kOverheadFactor = 1.2;
constexpr uint64_t kSlackBytes = 64 << 10;
constexpr double kMinStripeShare = 0.8;

constexpr absl::Duration kRunDeadline = absl::Seconds(40);
// After one rank fails, how long the others get to report before being killed.
constexpr absl::Duration kFailureGrace = absl::Seconds(2);

// Four hosts, one EPS NIC and two OCS NICs each (ports 2i+1, 2i+2), one
// region; circuits are appended by SpecYaml.
constexpr char kSpecWithoutCircuits[] = R"(name: a2afabric
ocs_switches:
  - {name: ocs0, ports: 8, switch_ms: 10}
hosts:
  - name: h0
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.1/24, gbps: 0.5}
      - {name: ocs0, role: ocs, address: 10.20.0.1/24, gbps: 1, switch: ocs0, port: 1}
      - {name: ocs1, role: ocs, address: 10.20.0.2/24, gbps: 1, switch: ocs0, port: 2}
  - name: h1
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.2/24, gbps: 0.5}
      - {name: ocs0, role: ocs, address: 10.20.0.3/24, gbps: 1, switch: ocs0, port: 3}
      - {name: ocs1, role: ocs, address: 10.20.0.4/24, gbps: 1, switch: ocs0, port: 4}
  - name: h2
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.3/24, gbps: 0.5}
      - {name: ocs0, role: ocs, address: 10.20.0.5/24, gbps: 1, switch: ocs0, port: 5}
      - {name: ocs1, role: ocs, address: 10.20.0.6/24, gbps: 1, switch: ocs0, port: 6}
  - name: h3
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.4/24, gbps: 0.5}
      - {name: ocs0, role: ocs, address: 10.20.0.7/24, gbps: 1, switch: ocs0, port: 7}
      - {name: ocs1, role: ocs, address: 10.20.0.8/24, gbps: 1, switch: ocs0, port: 8}
regions:
  - {name: r0, hosts: [h0, h1, h2, h3]}
)";

// h0-h1 twice (h0.ocs0-h1.ocs0, h0.ocs1-h1.ocs1), h2-h3 once (the ocs0s).
const std::vector<CircuitSpec>& InitialCircuits() {
  static const auto* c =
      new std::vector<CircuitSpec>{{"ocs0", 1, 3}, {"ocs0", 2, 4}, {"ocs0", 5, 7}};
  return *c;
}
// Re-wired: h0-h2 twice, h1-h3 once (the ocs0s).
const std::vector<CircuitSpec>& MovedCircuits() {
  static const auto* c =
      new std::vector<CircuitSpec>{{"ocs0", 1, 5}, {"ocs0", 2, 6}, {"ocs0", 3, 7}};
  return *c;
}

std::string SpecYaml(const std::vector<CircuitSpec>& circuits) {
  std::string yaml = kSpecWithoutCircuits;
  if (!circuits.empty()) yaml += "circuits:\n";
  for (const CircuitSpec& c : circuits) {
    absl::StrAppend(&yaml, "  - {switch: ", c.ocs_switch, ", ports: [", c.port_a, ", ", c.port_b,
                    "]}\n");
  }
  return yaml;
}

// Per host, per NIC: tx_bytes.
using TxBytes = std::map<std::string, std::map<std::string, uint64_t>>;

// What one host NIC must carry in one run.
struct NicExpectation {
  uint64_t payload = 0;    // payload bytes routed through it
  uint64_t min_bytes = 0;  // lower bound of its tx delta
  std::string peers;       // "h1/2 h2" : whose bytes (a stripe shows as /k)
  uint64_t max_bytes() const {
    return static_cast<uint64_t>(static_cast<double>(payload) * kOverheadFactor) + kSlackBytes;
  }
};
using Expectations = std::map<std::string, std::map<std::string, NicExpectation>>;

// Router v1 as seen from the wire: a peer joined by k circuits gets its bytes
// over the k local OCS NICs of those circuits (1/k each, all OCS NICs have one
// speed), any other peer over the host's EPS NIC.
Expectations Expect(const ClusterSpec& spec, const std::vector<CircuitSpec>& circuits,
                    uint64_t bytes_to_peer) {
  struct PortEnd {
    std::string host, nic;
  };
  std::map<int, PortEnd> port_end;
  Expectations e;
  for (const cluster::HostSpec& h : spec.hosts) {
    for (const cluster::NicSpec& n : h.nics) {
      e[h.name][n.name];  // every NIC is checked, most against zero
      if (n.role == cluster::NicRole::kOcs) port_end[n.ocs_port] = {h.name, n.name};
    }
  }
  // (host, peer) -> the host's NICs of the circuits joining them.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> via;
  for (const CircuitSpec& c : circuits) {
    const PortEnd& a = port_end.at(c.port_a);
    const PortEnd& b = port_end.at(c.port_b);
    via[{a.host, b.host}].push_back(a.nic);
    via[{b.host, a.host}].push_back(b.nic);
  }
  for (const cluster::HostSpec& h : spec.hosts) {
    std::string eps_nic;
    for (const cluster::NicSpec& n : h.nics) {
      if (n.role == cluster::NicRole::kEps && eps_nic.empty()) eps_nic = n.name;
    }
    for (const cluster::HostSpec& p : spec.hosts) {
      if (p.name == h.name) continue;
      const std::vector<std::string>& nics = via[{h.name, p.name}];
      if (nics.empty()) {
        NicExpectation& x = e[h.name][eps_nic];
        x.payload += bytes_to_peer;
        x.min_bytes += bytes_to_peer;
        absl::StrAppend(&x.peers, x.peers.empty() ? "" : " ", p.name);
        continue;
      }
      const uint64_t share = bytes_to_peer / nics.size();
      for (const std::string& nic : nics) {
        NicExpectation& x = e[h.name][nic];
        x.payload += share;
        x.min_bytes += nics.size() == 1 ? share : static_cast<uint64_t>(share * kMinStripeShare);
        absl::StrAppend(&x.peers, x.peers.empty() ? "" : " ", p.name,
                        nics.size() == 1 ? "" : absl::StrCat("/", nics.size()));
      }
    }
  }
  return e;
}

// A scratch directory under the test temp dir, removed on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = ::testing::TempDir() + "/mixnet-a2afab-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }  // empty when mkdtemp failed

 private:
  std::string path_;
};

// Child processes that are killed (SIGKILL) and reaped when this goes away,
// whatever happened to the test.
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() { KillRemaining(); }

  void Add(std::string name, pid_t pid) { procs_.push_back({std::move(name), pid, -1, false}); }

  // Waits until every child exited or `deadline`; after the first non-zero
  // exit the others get kFailureGrace. Returns one line per child that did not
  // exit 0 (empty when all succeeded).
  std::vector<std::string> WaitAll(absl::Time deadline) {
    absl::Time give_up = deadline;
    while (true) {
      bool all_done = true;
      for (Proc& p : procs_) {
        if (p.done) continue;
        int ws = 0;
        pid_t r = waitpid(p.pid, &ws, WNOHANG);
        if (r == p.pid && (WIFEXITED(ws) || WIFSIGNALED(ws))) {
          p.done = true;
          p.code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
          if (p.code != 0) give_up = std::min(give_up, absl::Now() + kFailureGrace);
        } else if (r < 0 && errno != EINTR) {
          p.done = true;  // not ours any more; reported below
        } else {
          all_done = false;
        }
      }
      if (all_done || absl::Now() >= give_up) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    std::vector<std::string> failures;
    for (Proc& p : procs_) {
      if (!p.done) {
        failures.push_back(absl::StrCat(p.name, ": still running at the deadline; killed"));
      } else if (p.code != 0) {
        failures.push_back(absl::StrCat(p.name, ": exit code ", p.code));
      }
    }
    KillRemaining();
    return failures;
  }

 private:
  struct Proc {
    std::string name;
    pid_t pid;
    int code;
    bool done;
  };
  void KillRemaining() {
    for (Proc& p : procs_) {
      if (p.done) continue;
      kill(p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
      p.done = true;
      p.code = 128 + SIGKILL;
    }
  }
  std::vector<Proc> procs_;
};

class AlltoallFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    ASSERT_EQ(access(kPerfBin, X_OK), 0) << "benchmark binary missing: " << kPerfBin;
    absl::StatusOr<ClusterSpec> spec =
        ClusterSpec::Parse(SpecYaml(InitialCircuits()), "alltoall_fabric_test");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *std::move(spec);
    prefix_ = testing::UniquePrefix("a2af");
    absl::StatusOr<std::unique_ptr<EmulatedFabric>> fabric = EmulatedFabric::Up(spec_, prefix_);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = *std::move(fabric);
  }

  void TearDown() override { testing::DownFabric(fabric_, prefix_); }

  absl::StatusOr<TxBytes> ReadTx() const {
    TxBytes tx;
    for (const cluster::HostSpec& h : spec_.hosts) {
      for (const cluster::NicSpec& n : h.nics) {
        ASSIGN_OR_RETURN(LinkCounters c, fabric_->ReadCounters(h.name, n.name));
        tx[h.name][n.name] = c.tx_bytes;
      }
    }
    return tx;
  }

  // One rank per host (rank i on the i-th host), each inside its host's
  // namespace, all reading `spec_path`; every rank must exit 0.
  void RunRanks(const std::string& spec_path, const std::string& store_dir) {
    const std::vector<std::string> env = {
        "MIXNET_TIMEOUT_MS=10000",
        "MIXNET_CONNECT_TIMEOUT_MS=15000",
        "MIXNET_LOG_LEVEL=warn",
        "MIXNET_CLUSTER_SPEC=",
        "MIXNET_HOST=",
        "MIXNET_TRANSPORT=tcp",
    };
    const int world = static_cast<int>(spec_.hosts.size());
    Children ranks;
    for (int r = 0; r < world; ++r) {
      const std::string& host = spec_.hosts[r].name;
      const std::vector<std::string> argv = {kPerfBin,
                                             "--rank",
                                             std::to_string(r),
                                             "--world",
                                             std::to_string(world),
                                             "--store",
                                             "file:" + store_dir,
                                             "--spec",
                                             spec_path,
                                             "--host",
                                             host,
                                             "--sizes",
                                             kSizeArg,
                                             "--warmup",
                                             std::to_string(kWarmup),
                                             "--iters",
                                             std::to_string(kIters)};
      absl::StatusOr<pid_t> pid = SpawnCommandInNamespace(fabric_->HostNamespace(host), argv, env);
      ASSERT_TRUE(pid.ok()) << "rank " << r << " on " << host << ": " << pid.status();
      ranks.Add(absl::StrCat("rank ", r, " (", host, ")"), *pid);
    }
    for (const std::string& f : ranks.WaitAll(absl::Now() + kRunDeadline)) ADD_FAILURE() << f;
  }

  // Wires the OCS as `circuits`, runs the ranks with a spec naming them, and
  // checks every host NIC's tx delta against Expect().
  void RunAndCheck(const std::vector<CircuitSpec>& circuits) {
    absl::Status applied = fabric_->ApplyCircuits(circuits);
    ASSERT_TRUE(applied.ok()) << applied;
    ScratchDir dir;
    ASSERT_FALSE(dir.path().empty()) << "mkdtemp under " << ::testing::TempDir() << " failed";
    const std::string spec_path = dir.path() + "/cluster.yaml";
    {
      std::ofstream out(spec_path);
      out << SpecYaml(circuits);
      ASSERT_TRUE(out.good()) << "writing " << spec_path;
    }

    absl::StatusOr<TxBytes> before = ReadTx();
    ASSERT_TRUE(before.ok()) << before.status();
    const absl::Time t0 = absl::Now();
    ASSERT_NO_FATAL_FAILURE(RunRanks(spec_path, dir.path() + "/store"));
    const absl::Duration took = absl::Now() - t0;
    ASSERT_FALSE(HasFailure()) << "the ranks failed; counters not checked";
    absl::StatusOr<TxBytes> after = ReadTx();
    ASSERT_TRUE(after.ok()) << after.status();

    const Expectations expect = Expect(spec_, circuits, kBytesToPeer);
    std::cout << absl::StrFormat(
        "alltoall of %d x %d bytes per peer in %s; %d payload bytes to each peer\n", kAlltoalls,
        kBytesPerPeer, absl::FormatDuration(took), kBytesToPeer);
    std::cout << absl::StrFormat("  %-4s %-5s %10s %10s %10s %10s  %s\n", "host", "nic", "tx delta",
                                 "payload", "min", "max", "carries");
    for (const auto& [host, nics] : expect) {
      for (const auto& [nic, x] : nics) {
        const uint64_t delta = (*after)[host][nic] - (*before)[host][nic];
        std::cout << absl::StrFormat("  %-4s %-5s %10d %10d %10d %10d  %s\n", host, nic, delta,
                                     x.payload, x.min_bytes, x.max_bytes(),
                                     x.peers.empty() ? "-" : x.peers);
        EXPECT_GE(delta, x.min_bytes)
            << host << "." << nic << " sent too little: it should carry the bytes to [" << x.peers
            << "] (" << x.payload << " payload bytes)";
        EXPECT_LE(delta, x.max_bytes())
            << host << "." << nic << " sent too much: it should carry only the bytes to ["
            << x.peers << "] (" << x.payload << " payload bytes; bound allows headers, ACKs and "
            << kSlackBytes << " bytes of control traffic)";
      }
    }
  }

  ClusterSpec spec_;
  std::string prefix_;
  std::unique_ptr<EmulatedFabric> fabric_;
};

// The spec's circuits: h0->h1 striped over h0.ocs0 and h0.ocs1 (each about
// half), h0->h2,h3 over h0.eps0 and only those; h2->h3 over h2.ocs0, h2.ocs1
// dark, h2->h0,h1 over h2.eps0.
TEST_F(AlltoallFabricTest, CircuitPeersLeaveThroughOcsNicsOthersThroughEps) {
  RunAndCheck(InitialCircuits());
}

// Re-wired at run time to h0-h2 (twice) and h1-h3: now h0->h2 is striped over
// h0's OCS NICs and h0->h1 crosses the EPS; h1->h3 over h1.ocs0.
TEST_F(AlltoallFabricTest, TrafficFollowsCircuitsAppliedAtRunTime) { RunAndCheck(MovedCircuits()); }

}  // namespace
}  // namespace mixnet::emulation
