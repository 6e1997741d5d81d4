// mixnet_ocs_bench: control overhead of OcsDriver.ApplyCrossConnects beyond
// the configured switching time, measured from the client's call to the
// reply, over full re-wirings (every call alternates between two disjoint
// perfect matchings, so the circuit of every port changes).
//   --backend sim   : starts mixnet-ocsd --backend sim --ports N itself;
//   --backend netns : (root) builds an emulated OCS of N ports (N/2 hosts with
//                     two OCS NICs each), starts mixnet-ocsd --backend netns
//                     on it, and removes every namespace again at the end;
//   --target ADDR   : measures an already running daemon instead.
// Prints a table, or with --json one object per line: backend, ports,
// iterations, switch_ms, p50_us, p99_us (overhead = latency - switching time)
// and the plain latency and daemon-side backend time percentiles.
// Main thread only.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/ocs_bench/daemon_child.h"
#include "bench/ocs_bench/emulated_ocs.h"
#include "bench/ocs_bench/matchings.h"
#include "nlohmann/json.hpp"
#include "ocs_driver/client/client_flags.h"
#include "ocs_driver/client/ocs_client.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/status.h"

namespace mixnet::ocs::bench {
namespace {

// Set by SIGINT/SIGTERM: the loop stops and everything is cleaned up normally.
std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop.store(true); }

struct Flags {
  std::string backend = "sim";
  int ports = 0;       // 0: 384 (sim) / 64 (netns)
  int iterations = 0;  // 0: 1000 (sim) / 200 (netns)
  int warmup = 10;
  double switch_ms = 0;
  uint64_t seed = 1;
  std::string daemon;
  std::string state_base;
  bool json = false;
  OcsClientFlags client;
};

struct Figures {
  std::string backend;
  int ports = 0;
  int iterations = 0;
  double switch_ms = 0;
  std::vector<int64_t> latency_us;
  std::vector<int64_t> backend_us;
  std::vector<int64_t> rpc_us;  // GetInfo round trips: the plain gRPC cost here
};

int64_t Percentile(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

v1::ApplyCrossConnectsRequest Request(const Matching& m, uint64_t epoch, uint64_t version) {
  v1::ApplyCrossConnectsRequest r;
  r.set_epoch(epoch);
  r.set_config_version(version);
  r.set_controller_id(absl::StrCat("mixnet_ocs_bench/", getpid()));
  for (const auto& [a, b] : m) {
    v1::Circuit* c = r.add_circuits();
    c->set_port_a(a);
    c->set_port_b(b);
  }
  return r;
}

// Runs warmup + iterations full re-wirings against `client`.
absl::StatusOr<Figures> Measure(OcsClient& client, const Flags& f, bool same_host_forbidden) {
  ASSIGN_OR_RETURN(v1::GetInfoResponse info, client.GetInfo());
  Figures out;
  out.backend = info.backend();
  out.ports = static_cast<int>(info.port_count());
  out.switch_ms = info.switching_time_us() / 1000.0;
  out.iterations = f.iterations;
  ASSIGN_OR_RETURN(
      auto matchings,
      DisjointMatchings(
          out.ports, f.seed,
          same_host_forbidden ? std::function<bool(int, int)>(SameBenchHost) : nullptr));
  const Matching* m[2] = {&matchings.first, &matchings.second};
  const absl::Duration switching = absl::Microseconds(info.switching_time_us());
  uint64_t epoch = info.highest_epoch() + 1;
  uint64_t version = info.config_version() + 1;
  // The reply may take the switching time plus control overhead: allow both.
  const absl::Duration timeout = client.timeout() + switching;
  for (int i = 0; i < std::min(f.iterations, 200); ++i) {
    absl::Time start = absl::Now();
    RETURN_IF_ERROR(client.GetInfo().status());
    out.rpc_us.push_back(absl::ToInt64Microseconds(absl::Now() - start));
  }
  for (int i = 0; i < f.warmup + f.iterations; ++i) {
    if (g_stop.load()) return absl::CancelledError("interrupted");
    v1::ApplyCrossConnectsRequest req = Request(*m[i % 2], epoch, version++);
    absl::Time start = absl::Now();
    OcsApplyResult r = client.Apply(req, timeout);
    absl::Duration latency = absl::Now() - start;
    RETURN_IF_ERROR(Annotate(r.status, absl::StrCat("iteration ", i)));
    if (i < f.warmup) continue;
    if (r.response.noop() || static_cast<int>(r.response.ports_changed()) != out.ports) {
      return absl::InternalError(absl::StrCat("iteration ", i, ": expected all ", out.ports,
                                              " ports to change, the daemon changed ",
                                              r.response.ports_changed()));
    }
    out.latency_us.push_back(absl::ToInt64Microseconds(latency));
    out.backend_us.push_back(static_cast<int64_t>(r.response.backend_us()));
  }
  return out;
}

void Print(const Figures& fig, bool json) {
  const int64_t switch_us = static_cast<int64_t>(std::llround(fig.switch_ms * 1000));
  std::vector<int64_t> overhead = fig.latency_us;
  for (int64_t& v : overhead) v -= switch_us;
  if (json) {
    nlohmann::json j = {{"backend", fig.backend},
                        {"ports", fig.ports},
                        {"iterations", fig.iterations},
                        {"switch_ms", fig.switch_ms},
                        {"p50_us", Percentile(overhead, 0.5)},
                        {"p99_us", Percentile(overhead, 0.99)},
                        {"latency_p50_us", Percentile(fig.latency_us, 0.5)},
                        {"latency_p99_us", Percentile(fig.latency_us, 0.99)},
                        {"backend_p50_us", Percentile(fig.backend_us, 0.5)},
                        {"backend_p99_us", Percentile(fig.backend_us, 0.99)},
                        {"rpc_p50_us", Percentile(fig.rpc_us, 0.5)},
                        {"rpc_p99_us", Percentile(fig.rpc_us, 0.99)}};
    std::cout << j.dump() << std::endl;
    return;
  }
  std::cout << absl::StrFormat("%-8s %6s %10s %10s %12s %12s %12s %12s\n", "backend", "ports",
                               "iterations", "switch_ms", "p50_us", "p99_us", "latency_p99",
                               "backend_p99");
  std::cout << absl::StrFormat("%-8s %6d %10d %10.3f %12d %12d %12d %12d\n", fig.backend, fig.ports,
                               fig.iterations, fig.switch_ms, Percentile(overhead, 0.5),
                               Percentile(overhead, 0.99), Percentile(fig.latency_us, 0.99),
                               Percentile(fig.backend_us, 0.99));
  std::cout << "(p50_us/p99_us: reply latency minus the switching time; full re-wiring of every "
               "port per call)\n";
}

absl::Status Run(const Flags& f) {
  OcsClientFlags client_flags = f.client;
  std::unique_ptr<emulation::EmulatedFabric> fabric;
  std::unique_ptr<DaemonChild> daemon;
  if (client_flags.target.empty()) {
    std::string binary = f.daemon.empty() ? FindDaemonBinary() : f.daemon;
    if (binary.empty()) {
      return absl::NotFoundError("mixnet-ocsd not found next to the bench; use --daemon PATH");
    }
    std::vector<std::string> args = {"--backend",   f.backend,
                                     "--ports",     absl::StrCat(f.ports),
                                     "--switch-ms", absl::StrCat(f.switch_ms)};
    if (f.backend == "netns") {
      if (!netns::HavePrivileges()) {
        return absl::PermissionDeniedError("--backend netns needs root (network namespaces)");
      }
      ASSIGN_OR_RETURN(fabric, UpBenchFabric(f.ports));
      args.push_back("--netns");
      args.push_back(fabric->OcsNamespace());
    }
    ASSIGN_OR_RETURN(daemon, DaemonChild::Start(binary, args, f.state_base, absl::Seconds(30)));
    client_flags.target = daemon->address();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<OcsClient> client, OcsClient::Create(client_flags.Options()));
  RETURN_IF_ERROR(client->WaitForConnected());
  absl::StatusOr<Figures> fig = Measure(*client, f, /*same_host_forbidden=*/fabric != nullptr);
  // Stop the daemon before the fabric goes (it holds a socket in the OCS namespace).
  client.reset();
  daemon.reset();
  absl::Status down = fabric ? fabric->Down() : absl::OkStatus();
  if (!fig.ok()) return fig.status();
  RETURN_IF_ERROR(down);
  Print(*fig, f.json);
  return absl::OkStatus();
}

}  // namespace
}  // namespace mixnet::ocs::bench

int main(int argc, char** argv) {
  using mixnet::ocs::bench::Flags;
  CLI::App app{"mixnet_ocs_bench: ApplyCrossConnects control overhead over full re-wirings"};
  Flags f;
  app.add_option("--backend", f.backend, "sim | netns (started here), ignored with --target")
      ->check(CLI::IsMember({"sim", "netns"}))
      ->capture_default_str();
  app.add_option("--ports", f.ports, "duplex ports (default 384 for sim, 64 for netns)");
  app.add_option("--iterations", f.iterations, "measured calls (default 1000 sim, 200 netns)");
  app.add_option("--warmup", f.warmup, "unmeasured calls first")->capture_default_str();
  app.add_option("--switch-ms", f.switch_ms, "switching time configured on the daemon")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", f.seed, "random seed of the matchings")->capture_default_str();
  app.add_option("--daemon", f.daemon, "path of mixnet-ocsd (default: next to this binary)");
  app.add_option("--state-base", f.state_base,
                 "directory for the daemon's temporary state dir (default /tmp; e.g. /dev/shm "
                 "to leave disk fsync out)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--json", f.json, "one JSON object per line");
  mixnet::ocs::AddOcsClientFlags(&app, &f.client, /*target_required=*/false);
  CLI11_PARSE(app, argc, argv);
  if (f.ports == 0) f.ports = f.backend == "netns" ? 64 : 384;
  if (f.iterations <= 0) f.iterations = f.backend == "netns" ? 200 : 1000;
  if (f.warmup < 0) f.warmup = 0;
  struct sigaction sa = {};
  sa.sa_handler = mixnet::ocs::bench::OnStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  absl::Status s = mixnet::ocs::bench::Run(f);
  if (!s.ok()) {
    std::cerr << "mixnet_ocs_bench: " << s.ToString() << std::endl;
    return 1;
  }
  return 0;
}
