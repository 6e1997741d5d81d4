// Peer runs and the comparison report (see peer_runner.h).
#include "bench/alltoall_perf/peer_runner.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"

namespace mixnet::bench {
namespace {

// Runs `argv`, returns its stdout lines (empty on failure).
std::vector<std::string> Capture(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const std::string& a : argv) absl::StrAppend(&cmd, "'", a, "' ");
  FILE* f = popen(cmd.c_str(), "r");
  std::vector<std::string> lines;
  if (f == nullptr) return lines;
  char buf[4096];
  std::string cur;
  while (fgets(buf, sizeof(buf), f) != nullptr) {
    cur += buf;
    if (!cur.empty() && cur.back() == '\n') {
      cur.pop_back();
      lines.push_back(cur);
      cur.clear();
    }
  }
  int rc = pclose(f);
  if (rc != 0) {
    std::cerr << "mixnet_alltoall_perf: peer " << argv[0] << " failed (status " << rc << ")\n";
    lines.clear();
  }
  return lines;
}

// Open MPI's shared-memory BTL: a reference for the intra-host transport,
// not one of the TCP peers the ratio is taken against.
constexpr char kMpiShm[] = "mpi_shm";

const peers::Result* Find(const std::vector<peers::Result>& v, size_t bytes) {
  for (const peers::Result& r : v) {
    if (r.bytes_per_peer == bytes) return &r;
  }
  return nullptr;
}

}  // namespace

std::map<std::string, std::vector<peers::Result>> RunPeers(const peers::PeerOptions& c,
                                                           const std::string& mpirun) {
  std::map<std::string, std::vector<peers::Result>> out;
  const std::filesystem::path self = peers::SelfExePath();
  const std::filesystem::path dir = self.parent_path().parent_path() / "peers";
  struct Peer {
    const char* name;
    const char* binary;
    std::vector<std::string> extra;
  };
  const std::vector<Peer> runs = {
      {"gloo", "gloo", {}}, {"mpi", "mpi", {}}, {kMpiShm, "mpi", {"--btl", "vader,self"}}};
  for (const Peer& peer : runs) {
    const std::string name = peer.name;
    std::filesystem::path bin = dir / absl::StrCat("mixnet_alltoall_", peer.binary);
    if (!std::filesystem::exists(bin)) {
      std::cerr << "mixnet_alltoall_perf: peer " << bin << " not built; skipping " << name << "\n";
      continue;
    }
    std::vector<std::string> argv = {bin.string(),
                                     "--ranks",
                                     std::to_string(c.ranks),
                                     "--sizes",
                                     c.sizes,
                                     "--iters",
                                     std::to_string(c.iters),
                                     "--warmup",
                                     std::to_string(c.warmup),
                                     "--json",
                                     "--timeout-s",
                                     std::to_string(c.timeout_s)};
    argv.insert(argv.end(), peer.extra.begin(), peer.extra.end());
    if (!mpirun.empty() && std::string(peer.binary) == "mpi") {
      argv.insert(argv.end(), {"--mpirun", mpirun});
    }
    std::vector<std::string> lines = Capture(argv);
    for (const std::string& line : lines) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object()) out[name].push_back(peers::ResultFromJson(j));
    }
  }
  return out;
}

std::vector<peers::Result> MedianPerSize(const std::vector<std::vector<peers::Result>>& rounds) {
  std::vector<size_t> sizes;
  std::map<size_t, std::vector<peers::Result>> by_size;
  for (const auto& round : rounds) {
    for (const peers::Result& r : round) {
      if (by_size.count(r.bytes_per_peer) == 0) sizes.push_back(r.bytes_per_peer);
      by_size[r.bytes_per_peer].push_back(r);
    }
  }
  std::vector<peers::Result> out;
  for (size_t bytes : sizes) {
    std::vector<peers::Result>& v = by_size[bytes];
    std::sort(v.begin(), v.end(),
              [](const peers::Result& a, const peers::Result& b) { return a.time_us < b.time_us; });
    out.push_back(v[(v.size() - 1) / 2]);
  }
  return out;
}

void PrintReport(const std::vector<peers::Result>& ours,
                 const std::map<std::string, std::vector<peers::Result>>& peer_results, bool json,
                 int rounds) {
  bool local = false;
  for (const peers::Result& r : ours) local |= r.intra_host == "local";
  if (!json && local) {
    std::printf(
        "# tcp/local: ranks of one host exchanged over the intra-host transport "
        "(MIXNET_INTRA_HOST=nic: TCP over loopback)\n");
  }
  if (!json && !peer_results.empty()) {
    std::printf(
        "# x best peer: busbw over the better of Gloo and Open MPI over TCP; %s: Open MPI's "
        "shared-memory path (vader, CMA), shown for reference\n",
        kMpiShm);
  }
  if (!json && rounds > 1) {
    std::printf("# every figure: the median of %d rounds (ours, then the peers, alternating)\n",
                rounds);
  }
  if (!json) {
    std::printf("# %14s %6s %10s %6s %12s %12s %12s", "bytes/peer", "ranks", "transport", "iters",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)");
    for (const auto& [name, v] : peer_results) std::printf(" %12s", (name + " busbw").c_str());
    if (!peer_results.empty()) std::printf(" %14s", "x best peer");
    if (peer_results.count(kMpiShm)) std::printf(" %10s", "x mpi_shm");
    std::printf("\n");
  }
  for (const peers::Result& r : ours) {
    double best = 0;
    nlohmann::ordered_json j = peers::ResultToJson(r);
    if (rounds > 1) j["rounds"] = rounds;
    for (const auto& [name, v] : peer_results) {
      const peers::Result* p = Find(v, r.bytes_per_peer);
      double bw = p != nullptr ? p->busbw_gbps : 0;
      if (name != kMpiShm) best = std::max(best, bw);
      j[absl::StrCat(name, "_busbw_GBps")] = bw;
    }
    if (!peer_results.empty()) j["speedup_vs_best_peer"] = best > 0 ? r.busbw_gbps / best : 0.0;
    const double shm = j.value(absl::StrCat(kMpiShm, "_busbw_GBps"), 0.0);
    if (peer_results.count(kMpiShm)) j["speedup_vs_mpi_shm"] = shm > 0 ? r.busbw_gbps / shm : 0.0;
    if (json) {
      std::printf("%s\n", j.dump().c_str());
      continue;
    }
    std::printf("  %14zu %6d %10s %6d %12.1f %12.3f %12.3f", r.bytes_per_peer, r.ranks,
                peers::TransportLabel(r).c_str(), r.iters, r.time_us, r.algbw_gbps, r.busbw_gbps);
    for (const auto& [name, v] : peer_results) {
      std::printf(" %12.3f", j[absl::StrCat(name, "_busbw_GBps")].get<double>());
    }
    if (!peer_results.empty()) std::printf(" %13.2fx", best > 0 ? r.busbw_gbps / best : 0.0);
    if (peer_results.count(kMpiShm)) std::printf(" %9.2fx", shm > 0 ? r.busbw_gbps / shm : 0.0);
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace mixnet::bench
