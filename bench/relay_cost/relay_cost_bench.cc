// mixnet_relay_bench: what a router v2 relay costs the host that forwards.
// Three rank processes on loopback, one per host of a line h0 - h1 - h2
// (circuits h0-h1 and h1-h2, none between h0 and h2), each host with an EPS
// NIC and two OCS NICs on 127.x addresses. Per size, in one run, alternating
// round by round:
//   eps      h0 sends the size to h2 over EPS (router v2, relays off)
//   relay    the same bytes through h1 (router v2, relays on; the spec's EPS
//            rate is 1/10000 of a circuit's, so the plan relays ~all of them)
//   circuit  h0 sends the size to h1 over their circuit (one hop, reference)
// Each rank measures its process CPU (getrusage: its caller thread and the
// transport's progress threads) over the timed calls, rank 0 the machine's
// busy CPU (/proc/stat, softirq included: on loopback the kernel's receive
// path runs on the sending side's CPU). The relay's cost is what it adds:
// the relay host's CPU per GB forwarded (relay minus eps, where h1 idles) and
// the machine's (relay minus eps). Every call's bytes are checked once per
// mode and round. The launcher thread only supervises; each rank process
// runs the collectives on its main thread.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/peers/peer_common.h"
#include "nlohmann/json.hpp"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/rendezvous/store.h"

namespace mixnet::bench {
namespace {

constexpr int kRanks = 3;

struct Options {
  std::string sizes = "4M,64M";
  std::vector<size_t> size_list;
  int iters = 10;
  int warmup = 2;
  int rounds = 3;
  bool json = false;
  int timeout_s = 300;
  int rank = -1;  // a rank process (set by the launcher)
  std::string store;
};

// A mode: `src` sends the size to `dst`; `relay`: the plan may relay.
struct Mode {
  const char* name;
  int src;
  int dst;
  bool relay;
};
constexpr Mode kModes[] = {{"eps", 0, 2, false}, {"relay", 0, 2, true}, {"circuit", 0, 1, false}};

// The line: EPS at 0.01 Gbit/s, OCS NICs at 100 Gbit/s (rates only steer the
// planner; loopback runs as fast as the CPUs let it).
std::string LineSpec() {
  std::string y =
      "name: relay-bench\nocs_switches:\n  - {name: s0, ports: 6, switch_ms: 1}\nhosts:\n";
  for (int h = 0; h < kRanks; ++h) {
    absl::StrAppend(&y, "  - name: h", h, "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: 127.0.1.", h + 1, ", gbps: 0.01}\n",
                    "      - {name: ocs0, role: ocs, address: 127.0.2.", h + 1,
                    ", gbps: 100, switch: s0, port: ", 2 * h + 1, "}\n",
                    "      - {name: ocs1, role: ocs, address: 127.0.3.", h + 1,
                    ", gbps: 100, switch: s0, port: ", 2 * h + 2, "}\n");
  }
  absl::StrAppend(&y,
                  "regions:\n  - {name: r0, hosts: [h0, h1, h2]}\ncircuits:\n"
                  "  - {switch: s0, ports: [1, 3]}\n  - {switch: s0, ports: [4, 5]}\n");
  return y;
}

router::RoutingPlan PlanFor(const Mode& m, size_t bytes) {
  router::RoutingPlan p;
  p.relay = m.relay;
  for (int h = 0; h < kRanks; ++h) p.hosts.push_back(absl::StrCat("h", h));
  p.bytes.assign(kRanks * kRanks, 0.0);
  p.bytes[m.src * kRanks + m.dst] = static_cast<double>(bytes);
  return p;
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The machine's busy CPU seconds (user, nice, system, irq, softirq of every
// CPU) from /proc/stat; -1 when it cannot be read.
double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") {
    return -1;
  }
  return static_cast<double>(user + nice + system + irq + softirq) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// One mode of one size in one round, as rank 0 saw it.
struct Sample {
  double time_s = 0;       // per call: max over ranks, median over calls
  double cpu_s[kRanks]{};  // each rank's process CPU over the timed calls
  double machine_s = 0;    // the machine's busy CPU over the timed calls
  double relayed = 0;      // bytes h1 forwarded over the timed calls
  double moved = 0;        // bytes the timed calls carried
};

// One core's memcpy rate over `bytes` (GB/s, best of 5): the scale a relay's
// two copies per forwarded byte compare with.
double MemcpyGBps(size_t bytes) {
  std::vector<uint8_t> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(bytes) / s / 1e9);
    a[i] = b[bytes - 1 - i];  // keep the copies observable
  }
  return best;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// The calls of one mode: route by its plan, check the bytes once, warm up,
// then time `iters` calls (a barrier before each).
absl::StatusOr<Sample> RunMode(collectives::Communicator& comm, const Options& o, const Mode& m,
                               size_t bytes, int round) {
  const int me = comm.rank();
  RETURN_IF_ERROR(comm.SetRouting(PlanFor(m, bytes)));
  std::vector<size_t> sc(kRanks, 0), sd(kRanks, 0), rc(kRanks, 0), rd(kRanks, 0);
  if (me == m.src) sc[m.dst] = bytes;
  if (me == m.dst) rc[m.src] = bytes;
  std::vector<uint8_t> send(me == m.src ? bytes : 0), recv(me == m.dst ? bytes : 0);
  for (size_t k = 0; k < send.size(); ++k) send[k] = peers::PatternByte(m.src, m.dst, k + round);
  const collectives::AlltoallvArgs a{send.data(), send.size(), sc, sd,
                                     recv.data(), recv.size(), rc, rd};
  RETURN_IF_ERROR(collectives::Alltoallv(comm, a));
  for (size_t k = 0; k < recv.size(); ++k) {
    if (recv[k] != peers::PatternByte(m.src, m.dst, k + round)) {
      return absl::DataLossError(absl::StrCat("rank ", me, ", mode ", m.name, ", ", bytes,
                                              " bytes: byte ", k, " from rank ", m.src,
                                              " is wrong"));
    }
  }
  for (int i = 0; i < o.warmup; ++i) RETURN_IF_ERROR(collectives::Alltoallv(comm, a));
  RETURN_IF_ERROR(collectives::Barrier(comm));
  const uint64_t fwd0 = comm.relay_bytes_forwarded();
  const double cpu0 = ProcessCpuSeconds();
  const double machine0 = me == 0 ? MachineBusySeconds() : 0;
  std::vector<double> times;
  for (int i = 0; i < o.iters; ++i) {
    RETURN_IF_ERROR(collectives::Barrier(comm));
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(collectives::Alltoallv(comm, a));
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  RETURN_IF_ERROR(collectives::Barrier(comm));
  const double cpu = ProcessCpuSeconds() - cpu0;
  const double machine = me == 0 ? MachineBusySeconds() - machine0 : 0;
  // Per rank: its CPU, bytes it forwarded, then its call times.
  std::vector<double> mine = {cpu, static_cast<double>(comm.relay_bytes_forwarded() - fwd0)};
  mine.insert(mine.end(), times.begin(), times.end());
  std::vector<double> all(mine.size() * kRanks);
  RETURN_IF_ERROR(collectives::Allgather(comm, mine.data(), all.data(), mine.size() * 8));
  Sample s;
  std::vector<double> call_max(o.iters, 0);
  for (int r = 0; r < kRanks; ++r) {
    const double* row = &all[r * mine.size()];
    s.cpu_s[r] = row[0];
    s.relayed += row[1];
    for (int i = 0; i < o.iters; ++i) call_max[i] = std::max(call_max[i], row[2 + i]);
  }
  s.time_s = Median(call_max);
  s.machine_s = machine0 < 0 ? -1 : machine;
  s.moved = static_cast<double>(bytes) * o.iters;
  return s;
}

// One row of the report: the medians over rounds of one mode and size.
struct Row {
  size_t bytes = 0;
  std::string mode;
  Sample s;
};

Row MedianRow(size_t bytes, const std::string& mode, const std::vector<Sample>& rounds) {
  Row r{bytes, mode, {}};
  auto med = [&](auto field) {
    std::vector<double> v;
    for (const Sample& s : rounds) v.push_back(field(s));
    return Median(v);
  };
  r.s.time_s = med([](const Sample& s) { return s.time_s; });
  for (int k = 0; k < kRanks; ++k) r.s.cpu_s[k] = med([k](const Sample& s) { return s.cpu_s[k]; });
  r.s.machine_s = med([](const Sample& s) { return s.machine_s; });
  r.s.relayed = med([](const Sample& s) { return s.relayed; });
  r.s.moved = rounds.empty() ? 0 : rounds[0].moved;
  return r;
}

void PrintRows(const std::vector<Row>& rows, const Options& o, double memcpy_gbps) {
  auto per_gb = [](double cpu, double bytes) { return bytes > 0 ? cpu / (bytes / 1e9) : 0.0; };
  if (!o.json) {
    std::printf(
        "# medians of %d rounds (modes alternating), %d timed calls each; CPU in seconds\n"
        "# per GB the call carried (h0 origin, h1 relay, h2 destination; machine: every\n"
        "# CPU's busy time, softirq included); %ld CPUs online\n",
        o.rounds, o.iters, sysconf(_SC_NPROCESSORS_ONLN));
    std::printf("%12s  %-8s %9s %10s %8s %9s %9s %9s %9s\n", "bytes", "mode", "relayed", "time(ms)",
                "GB/s", "h0 s/GB", "h1 s/GB", "h2 s/GB", "mach s/GB");
  }
  std::map<size_t, std::map<std::string, const Row*>> by;
  for (const Row& r : rows) {
    by[r.bytes][r.mode] = &r;
    const double gb = r.s.moved / 1e9;
    const double relayed = r.s.moved > 0 ? r.s.relayed / r.s.moved : 0;
    if (o.json) {
      nlohmann::ordered_json j = {{"bytes", r.bytes},
                                  {"mode", r.mode},
                                  {"relayed_share", relayed},
                                  {"time_ms", r.s.time_s * 1e3},
                                  {"GBps", r.s.time_s > 0 ? r.bytes / r.s.time_s / 1e9 : 0},
                                  {"origin_cpu_s_per_GB", per_gb(r.s.cpu_s[0], r.s.moved)},
                                  {"relay_host_cpu_s_per_GB", per_gb(r.s.cpu_s[1], r.s.moved)},
                                  {"dest_cpu_s_per_GB", per_gb(r.s.cpu_s[2], r.s.moved)},
                                  {"machine_cpu_s_per_GB", per_gb(r.s.machine_s, r.s.moved)},
                                  {"GB", gb}};
      std::cout << j.dump() << "\n";
    } else {
      std::printf("%12zu  %-8s %8.1f%% %10.2f %8.3f %9.3f %9.3f %9.3f %9.3f\n", r.bytes,
                  r.mode.c_str(), 100 * relayed, r.s.time_s * 1e3,
                  r.s.time_s > 0 ? r.bytes / r.s.time_s / 1e9 : 0, per_gb(r.s.cpu_s[0], r.s.moved),
                  per_gb(r.s.cpu_s[1], r.s.moved), per_gb(r.s.cpu_s[2], r.s.moved),
                  per_gb(r.s.machine_s, r.s.moved));
    }
  }
  // The relay's cost per GB it forwarded: what relaying adds over EPS.
  for (const auto& [bytes, modes] : by) {
    if (!modes.count("eps") || !modes.count("relay")) continue;
    const Sample& e = modes.at("eps")->s;
    const Sample& r = modes.at("relay")->s;
    if (r.relayed <= 0) continue;
    // Both modes carried the same bytes (same size and calls).
    const double gb = r.relayed / 1e9;
    const double forward = (r.cpu_s[1] - e.cpu_s[1]) / gb;
    const double machine = (r.machine_s - e.machine_s) / gb;
    const double cores_100g = forward * 12.5;  // 100 Gbit/s = 12.5 GB/s forwarded
    if (o.json) {
      nlohmann::ordered_json j = {{"bytes", bytes},
                                  {"summary", "relay_cost"},
                                  {"relay_host_cpu_s_per_GB_forwarded", forward},
                                  {"machine_extra_cpu_s_per_GB_relayed", machine},
                                  {"relay_host_cores_at_100Gbps", cores_100g},
                                  {"memcpy_GBps", memcpy_gbps},
                                  {"relay_over_eps_time", e.time_s > 0 ? r.time_s / e.time_s : 0}};
      std::cout << j.dump() << "\n";
    } else {
      std::printf(
          "# %zu bytes: the relay host spends %.3f CPU s per GB it forwards (%.2f cores to "
          "forward 100 Gbit/s); the machine %+.3f s per GB relayed over EPS's; relay time "
          "/ eps time %.2f; one core copies %.2f GB/s (memcpy of 64 MiB)\n",
          bytes, forward, cores_100g, machine, e.time_s > 0 ? r.time_s / e.time_s : 0, memcpy_gbps);
    }
  }
  std::fflush(stdout);
}

absl::Status RunRank(const Options& o) {
  log::SetProcessTag(absl::StrCat("rank ", o.rank));
  ASSIGN_OR_RETURN(auto store, rendezvous::OpenStore(o.store, o.rank == 0, absl::Seconds(60)));
  ASSIGN_OR_RETURN(collectives::CommunicatorOptions co,
                   collectives::CommunicatorOptions::FromSettings(o.rank, kRanks, store.get()));
  ASSIGN_OR_RETURN(co.spec, cluster::ClusterSpec::Parse(LineSpec()));
  co.host = absl::StrCat("h", o.rank);
  co.router = "v2";
  co.transport = "tcp";
  ASSIGN_OR_RETURN(auto comm, collectives::Communicator::Create(std::move(co)));
  std::vector<Row> rows;
  for (size_t bytes : o.size_list) {
    std::map<std::string, std::vector<Sample>> samples;
    for (int round = 0; round < o.rounds; ++round) {
      for (const Mode& m : kModes) {
        ASSIGN_OR_RETURN(Sample s, RunMode(*comm, o, m, bytes, round));
        samples[m.name].push_back(s);
      }
    }
    for (const Mode& m : kModes) rows.push_back(MedianRow(bytes, m.name, samples[m.name]));
  }
  if (o.rank == 0) {
    if (!o.json) {
      std::printf(
          "# relay chunk %zu bytes, relay buffer %zu bytes (MIXNET_RELAY_CHUNK_BYTES, "
          "MIXNET_RELAY_BUFFER_BYTES)\n",
          comm->relay_chunk_bytes(), comm->relay_buffer_bytes());
    }
    PrintRows(rows, o, MemcpyGBps(64 << 20));
  }
  return collectives::Barrier(*comm);
}

int Launch(const Options& o) {
  char tmpl[] = "/tmp/mixnet-relay-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::cerr << "mixnet_relay_bench: mkdtemp failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string dir = tmpl;
  int rc = 0;
  {
    peers::Supervisor sup("mixnet_relay_bench");
    std::string err;
    for (int r = 0; r < kRanks && rc == 0; ++r) {
      std::vector<std::string> args = {peers::SelfExePath(),
                                       "--rank",
                                       std::to_string(r),
                                       "--store",
                                       "file:" + dir + "/store",
                                       "--sizes",
                                       o.sizes,
                                       "--iters",
                                       std::to_string(o.iters),
                                       "--warmup",
                                       std::to_string(o.warmup),
                                       "--rounds",
                                       std::to_string(o.rounds)};
      if (o.json) args.push_back("--json");
      if (!sup.Spawn(absl::StrCat("rank ", r), args, {}, false, &err)) rc = 1;
    }
    if (rc != 0) {
      std::cerr << "mixnet_relay_bench: " << err << "\n";
      sup.KillAll(std::chrono::milliseconds(500));
    } else {
      rc = sup.WaitAll(std::chrono::seconds(o.timeout_s));
    }
  }
  std::filesystem::remove_all(dir);
  return rc;
}

}  // namespace
}  // namespace mixnet::bench

int main(int argc, char** argv) {
  using namespace mixnet::bench;
  Options o;
  CLI::App app{
      "mixnet_relay_bench: the CPU a router v2 relay costs its host (3 ranks on loopback: "
      "EPS, relayed and one-circuit transfers of the same bytes, side by side)"};
  app.add_option("--sizes", o.sizes, "Comma-separated bytes h0 sends per call, e.g. 4M,64M")
      ->capture_default_str();
  app.add_option("--iters", o.iters, "Timed calls per mode, size and round")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "Untimed calls per mode, size and round")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--rounds", o.rounds, "Rounds (the modes alternate); each figure is a median")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_flag("--json", o.json, "One JSON object per mode and size, then a summary per size");
  app.add_option("--timeout-s", o.timeout_s, "Deadline for the whole run, in seconds")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--rank", o.rank)->group("");
  app.add_option("--store", o.store)->group("");
  CLI11_PARSE(app, argc, argv);
  if (auto err = mixnet::bench::peers::ParseSizeList(o.sizes, &o.size_list)) {
    std::cerr << "mixnet_relay_bench: --sizes: " << *err << "\n";
    return 2;
  }
  if (o.rank >= 0) {
    if (o.rank >= kRanks || o.store.empty()) {
      std::cerr << "mixnet_relay_bench: --rank needs 0.." << kRanks - 1 << " and --store\n";
      return 2;
    }
    absl::Status s = RunRank(o);
    if (!s.ok()) {
      std::cerr << "mixnet_relay_bench: rank " << o.rank << ": " << s << "\n";
      return 1;
    }
    return 0;
  }
  return Launch(o);
}
