// mixnet_alltoall_perf: nccl-tests-style all-to-all benchmark of the MixNet
// runtime. Three ways to run it:
//   --ranks N            spawn N local rank processes (loopback or MIXNET_SOCKET_IFNAME)
//   --rank R --world N --store URL [--spec F --host H]
//                        be one rank of a multi-host job; without these flags
//                        (and without --ranks/--fabric) a launcher's
//                        environment gives them: mpirun -np 4, srun, torchrun
//                        (runtime/rendezvous/launcher_env.h)
//   --fabric SPEC        bring up the emulated cluster of SPEC (root) and run one
//                        rank in each host's network namespace
// With --peers, the same sizes are run with Gloo and Open MPI over TCP in the
// same run and the ratios printed. The launcher thread only supervises; each
// rank process runs the collectives on its main thread.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/alltoall_perf/peer_runner.h"
#include "bench/peers/peer_common.h"
#include "emulation/emulated_fabric.h"
#include "nlohmann/json.hpp"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/log.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/rendezvous/launcher_env.h"
#include "runtime/rendezvous/store.h"

namespace mixnet::bench {
namespace {

using peers::Result;

struct Options {
  peers::PeerOptions common;
  int rank = -1;
  int world = 0;
  std::string store;
  std::string transport = "tcp";
  std::string spec;
  std::string host;
  std::string fabric;
  std::string result_file;
  bool peers = false;
  std::string mpirun;  // the Open MPI peers' (--peers)
  bool check = true;
  int rounds = 1;
};

// One rank: connect, then for each size check once, warm up and time.
absl::Status RunRank(const Options& o) {
  log::SetProcessTag(absl::StrCat("rank ", o.rank));
  ASSIGN_OR_RETURN(auto store, rendezvous::OpenStore(o.store, o.rank == 0, absl::Seconds(60)));
  ASSIGN_OR_RETURN(collectives::CommunicatorOptions co,
                   collectives::CommunicatorOptions::FromSettings(o.rank, o.world, store.get()));
  co.transport = o.transport;
  if (!o.spec.empty()) {
    ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(o.spec));
    co.spec = std::move(spec);
  }
  if (!o.host.empty()) co.host = o.host;
  ASSIGN_OR_RETURN(auto comm, collectives::Communicator::Create(std::move(co)));
  const int n = comm->size();
  std::ofstream results;
  if (o.rank == 0 && !o.result_file.empty()) results.open(o.result_file);
  // A rank the launcher mode started writes the result file; one a job
  // launcher (or --rank) started prints the table itself, header first.
  if (o.rank == 0 && !results.is_open()) peers::PrintHeader(o.common.json);
  for (size_t bytes : o.common.size_list) {
    std::vector<uint8_t> send(bytes * n), recv(bytes * n);
    peers::FillSendBuffer(o.rank, n, bytes, send.data());
    if (o.check) {
      RETURN_IF_ERROR(collectives::Alltoall(*comm, send.data(), recv.data(), bytes));
      if (auto err = peers::CheckRecvBuffer(o.rank, n, bytes, recv.data())) {
        return absl::DataLossError(absl::StrCat("rank ", o.rank, ": ", *err));
      }
    }
    for (int i = 0; i < o.common.warmup; ++i) {
      RETURN_IF_ERROR(collectives::Alltoall(*comm, send.data(), recv.data(), bytes));
    }
    std::vector<double> iter_max;
    for (int i = 0; i < o.common.iters; ++i) {
      RETURN_IF_ERROR(collectives::Barrier(*comm));
      auto t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(collectives::Alltoall(*comm, send.data(), recv.data(), bytes));
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::vector<double> all(n);
      RETURN_IF_ERROR(collectives::Allgather(*comm, &secs, all.data(), sizeof(double)));
      iter_max.push_back(*std::max_element(all.begin(), all.end()));
    }
    if (o.rank == 0) {
      Result r = peers::MeasuredResult(bytes, n, o.transport, o.common.warmup, iter_max);
      r.intra_host = comm->intra_host_transport();
      if (results.is_open()) {
        results << peers::ResultToJson(r).dump() << "\n";
        results.flush();
      } else {
        peers::PrintResult(r, o.common.json);
      }
    }
  }
  return collectives::Barrier(*comm);
}

std::vector<std::string> RankArgs(const Options& o, int rank, int world, const std::string& store,
                                  const std::string& result_file) {
  std::vector<std::string> a = {peers::SelfExePath(),
                                "--rank",
                                std::to_string(rank),
                                "--world",
                                std::to_string(world),
                                "--store",
                                store,
                                "--transport",
                                o.transport,
                                "--sizes",
                                o.common.sizes,
                                "--iters",
                                std::to_string(o.common.iters),
                                "--warmup",
                                std::to_string(o.common.warmup)};
  if (!o.check) a.push_back("--no-check");
  if (!result_file.empty() && rank == 0) {
    a.push_back("--result-file");
    a.push_back(result_file);
  }
  return a;
}

// Launches the ranks (locally or in emulated hosts) and collects rank 0's
// results into `ours`. Returns the exit status.
int RunOurs(Options& o, std::vector<Result>* ours) {
  char tmpl[] = "/tmp/mixnet-perf-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::cerr << "mixnet_alltoall_perf: mkdtemp failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string dir = tmpl;
  const std::string result_file = dir + "/results.jsonl";
  const std::string store = "file:" + dir + "/store";
  int rc = 0;
  std::unique_ptr<emulation::EmulatedFabric> fabric;
  {
    peers::Supervisor sup("mixnet_alltoall_perf");
    std::string err;
    if (!o.fabric.empty()) {
      absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::LoadFile(o.fabric);
      absl::StatusOr<std::unique_ptr<emulation::EmulatedFabric>> f =
          spec.ok() ? emulation::EmulatedFabric::Up(*spec) : spec.status();
      if (!f.ok()) {
        std::cerr << "mixnet_alltoall_perf: emulated cluster: " << f.status() << "\n";
        std::filesystem::remove_all(dir);
        return 1;
      }
      fabric = *std::move(f);
      std::vector<std::string> hosts;
      for (const auto& h : spec->hosts) hosts.push_back(h.name);
      if (o.common.ranks <= 0) o.common.ranks = static_cast<int>(hosts.size());
      if (o.common.ranks > static_cast<int>(hosts.size())) {
        std::cerr << "mixnet_alltoall_perf: --ranks " << o.common.ranks << " exceeds the "
                  << hosts.size() << " hosts of " << o.fabric << "\n";
        rc = 2;
      }
      for (int r = 0; rc == 0 && r < o.common.ranks; ++r) {
        std::vector<std::string> args = RankArgs(o, r, o.common.ranks, store, result_file);
        args.insert(args.end(), {"--spec", o.fabric, "--host", hosts[r]});
        args.insert(args.begin(), {"ip", "netns", "exec", fabric->HostNamespace(hosts[r])});
        args[0] = "/usr/bin/ip";
        if (!sup.Spawn(absl::StrCat("rank ", r), args, {}, false, &err)) rc = 1;
      }
    } else {
      for (int r = 0; r < o.common.ranks; ++r) {
        if (!sup.Spawn(absl::StrCat("rank ", r), RankArgs(o, r, o.common.ranks, store, result_file),
                       {}, false, &err)) {
          rc = 1;
        }
      }
    }
    if (rc != 0) {
      if (!err.empty()) std::cerr << "mixnet_alltoall_perf: " << err << "\n";
      sup.KillAll(std::chrono::milliseconds(500));
    } else {
      rc = sup.WaitAll(std::chrono::seconds(o.common.timeout_s));
    }
  }
  fabric.reset();
  if (rc == 0) {
    std::ifstream in(result_file);
    std::string line;
    while (std::getline(in, line))
      ours->push_back(peers::ResultFromJson(nlohmann::json::parse(line)));
  }
  std::filesystem::remove_all(dir);
  return rc;
}

// Runs ours and then the peers, `o.rounds` times, and prints each
// contender's median per size (the machine's speed drifts between runs, so
// alternating and taking medians compares like with like).
int Launch(Options& o) {
  std::vector<std::vector<Result>> our_rounds;
  std::map<std::string, std::vector<std::vector<Result>>> peer_rounds;
  for (int round = 0; round < o.rounds; ++round) {
    std::vector<Result> ours;
    if (int rc = RunOurs(o, &ours); rc != 0) return rc;
    our_rounds.push_back(std::move(ours));
    if (!o.peers) continue;
    for (auto& [name, results] : RunPeers(o.common, o.mpirun)) {
      peer_rounds[name].push_back(results);
    }
  }
  std::map<std::string, std::vector<Result>> peer_results;
  for (const auto& [name, rounds] : peer_rounds) peer_results[name] = MedianPerSize(rounds);
  PrintReport(MedianPerSize(our_rounds), peer_results, o.common.json, o.rounds);
  return 0;
}

}  // namespace
}  // namespace mixnet::bench

int main(int argc, char** argv) {
  using namespace mixnet::bench;
  Options o;
  CLI::App app{"mixnet_alltoall_perf: MixNet all-to-all benchmark (nccl-tests style)"};
  peers::AddCommonOptions(app, o.common);
  app.add_option("--transport", o.transport, "Data-plane transport: tcp or verbs")
      ->capture_default_str();
  app.add_flag("--peers", o.peers, "Also run Gloo and Open MPI over TCP and print ratios");
  app.add_option("--mpirun", o.mpirun,
                 "With --peers: the mpirun the Open MPI peers launch with (default: "
                 "$MIXNET_MPIRUN, else mpirun on PATH)");
  app.add_option("--rounds", o.rounds,
                 "Run ours then the peers this many times; report each one's median per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_flag("!--no-check", o.check, "Skip the per-size correctness check");
  app.add_option("--fabric", o.fabric,
                 "Cluster spec: bring up the emulated cluster (root) and run one rank per host");
  app.add_option("--rank", o.rank, "This process's rank (multi-host mode)");
  app.add_option("--world", o.world, "World size (multi-host mode)");
  app.add_option("--store", o.store, "Rendezvous store: file:DIR or tcp://HOST:PORT");
  app.add_option("--spec", o.spec, "Cluster spec YAML (multi-host mode)");
  app.add_option("--host", o.host, "This rank's host in the spec (multi-host mode)");
  app.add_option("--result-file", o.result_file)->group("");
  CLI11_PARSE(app, argc, argv);
  if (auto err = peers::FinishOptions(o.common)) {
    std::cerr << "mixnet_alltoall_perf: " << *err << "\n";
    return 2;
  }
  if (o.common.ranks <= 0 && o.fabric.empty() && (o.rank < 0 || o.world <= 0 || o.store.empty())) {
    // One rank of a job a launcher started (mpirun, srun, torchrun): what
    // the flags do not say comes from its environment (launcher_env.h).
    absl::StatusOr<mixnet::rendezvous::LaunchInfo> li = mixnet::rendezvous::LaunchFromEnvironment(
        mixnet::rendezvous::ProcessEnvironment(), mixnet::GetSettings(),
        o.store.empty() ? mixnet::rendezvous::StoreNeed::kRequired
                        : mixnet::rendezvous::StoreNeed::kOptional);
    if (li.ok()) {
      if (o.rank < 0) o.rank = li->rank;
      if (o.world <= 0) o.world = li->world;
      if (o.store.empty()) o.store = li->store;
      if (o.rank == 0) {
        std::cerr << "mixnet_alltoall_perf: " << li->launcher << " job of " << o.world
                  << " ranks, store " << o.store << "\n";
      }
    } else if (!absl::IsNotFound(li.status())) {
      std::cerr << "mixnet_alltoall_perf: " << li.status().message() << "\n";
      return 2;
    }
  }
  if (o.rank >= 0) {
    if (o.world <= 0 || o.store.empty()) {
      std::cerr << "mixnet_alltoall_perf: --rank needs --world and --store (or a launcher's "
                   "environment: mpirun, srun, torchrun)\n";
      return 2;
    }
    absl::Status s = RunRank(o);
    if (!s.ok()) {
      std::cerr << "mixnet_alltoall_perf: rank " << o.rank << ": " << s << "\n";
      return 1;
    }
    return 0;
  }
  if (o.common.ranks <= 0 && o.fabric.empty()) {
    std::cerr << "mixnet_alltoall_perf: give --ranks N, --fabric SPEC, or --rank/--world/--store, "
                 "or start it with a launcher (mpirun, srun, torchrun)\n";
    return 2;
  }
  return Launch(o);
}
