// mixnet_alltoall_mpi: the Open MPI (TCP BTL) performance peer of
// mixnet_alltoall_perf. Measures MPI_Alltoall with the same sizes, timing
// method and output format as our benchmark, so `mixnet_alltoall_perf
// --peers` can print ratios.
//
//   mixnet_alltoall_mpi --ranks 4 --sizes 1M,8M [--iters K --warmup W] [--json]
//
// Run outside an MPI job, the program is its own launcher: it re-executes
// itself under
//   mpirun --allow-run-as-root --oversubscribe -np N --mca btl tcp,self
//          --mca btl_tcp_if_include lo --mca pml ob1 --bind-to none
// (mpirun from --mpirun, $MIXNET_MPIRUN or $PATH; extra mpirun arguments from
// $MIXNET_MPIRUN_ARGS) and waits for it under --timeout-s. Inside an MPI job
// (started by mpirun) it measures; rank 0 prints the results. Timing: per
// size, warm-up iterations, then K barrier-separated iterations, each timed
// on every rank; time_us is the mean over iterations of the slowest rank.
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/peers/peer_common.h"

namespace mixnet::bench::peers {
namespace {

// The label of our results: which path Open MPI's BTL list gives it.
std::string TransportLabel(const std::string& btl) {
  return btl.find("tcp") != std::string::npos ? "mpi-tcp" : "mpi-shm";
}

struct MpiOptions {
  PeerOptions common;
  std::string mpirun;  // Launcher mode: mpirun to use.
  std::string iface = "lo";
  std::string btl = "tcp,self";
};

// True when started by an MPI launcher (Open MPI, or a PMI/PMIx one).
bool InMpiJob() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

// Re-executes this binary under mpirun with N ranks and waits for it.
int Launch(const MpiOptions& opts, int argc, char** argv) {
  std::string wanted = opts.mpirun, from = "--mpirun";
  if (wanted.empty()) {
    const char* env = std::getenv("MIXNET_MPIRUN");
    const bool set = env != nullptr && *env != '\0';
    wanted = set ? env : "mpirun";
    from = set ? "MIXNET_MPIRUN" : "PATH";
  }
  const std::string mpirun = FindOnPath(wanted);
  if (mpirun.empty()) {
    std::fprintf(stderr,
                 "mixnet_alltoall_mpi: mpirun '%s' (from %s) not found or not executable "
                 "(apt-get install openmpi-bin, or set MIXNET_MPIRUN / --mpirun)\n",
                 wanted.c_str(), from.c_str());
    return 1;
  }
  std::string self = SelfExePath();
  if (self.empty()) {
    std::fprintf(stderr, "mixnet_alltoall_mpi: cannot resolve /proc/self/exe\n");
    return 1;
  }
  std::vector<std::string> args = {mpirun,
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "-np",
                                   std::to_string(opts.common.ranks),
                                   "--mca",
                                   "btl",
                                   opts.btl,
                                   "--mca",
                                   "btl_tcp_if_include",
                                   opts.iface,
                                   "--mca",
                                   "pml",
                                   "ob1",
                                   "--bind-to",
                                   "none"};
  // Extra mpirun arguments (e.g. "--mca btl_tcp_links 2"), split on spaces.
  if (const char* extra = std::getenv("MIXNET_MPIRUN_ARGS")) {
    std::istringstream words(extra);
    for (std::string word; words >> word;) args.push_back(word);
  }
  args.push_back(self);
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  // No ssh here and none needed: everything is local. Keep mpirun from
  // looking for one, and allow root (containers) through the environment too.
  std::vector<std::string> env = {"OMPI_MCA_plm_rsh_agent=", "OMPI_ALLOW_RUN_AS_ROOT=1",
                                  "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  if (std::getenv("MIXNET_PEERS_VERBOSE") != nullptr) {
    std::string line;
    for (const std::string& a : args) line += a + " ";
    std::fprintf(stderr, "mixnet_alltoall_mpi: %s\n", line.c_str());
  }
  InstallStopHandlers();
  Supervisor supervisor("mixnet_alltoall_mpi");
  std::string error;
  if (!supervisor.Spawn("mpirun", args, env, true, &error)) {
    std::fprintf(stderr, "mixnet_alltoall_mpi: starting mpirun: %s\n", error.c_str());
    return 1;
  }
  return supervisor.WaitAll(std::chrono::seconds(opts.common.timeout_s));
}

// Measures one size. Returns false (on every rank) when the data were wrong.
bool RunSize(const MpiOptions& opts, int rank, int ranks, std::size_t bytes_per_peer) {
  const std::size_t total = bytes_per_peer * static_cast<std::size_t>(ranks);
  const int count = static_cast<int>(bytes_per_peer);
  std::vector<std::uint8_t> send(total > 0 ? total : 1);
  std::vector<std::uint8_t> recv(total > 0 ? total : 1, 0);
  FillSendBuffer(rank, ranks, bytes_per_peer, send.data());

  // Correctness: one checked iteration, the verdict shared by all ranks.
  MPI_Alltoall(send.data(), count, MPI_BYTE, recv.data(), count, MPI_BYTE, MPI_COMM_WORLD);
  std::optional<std::string> bad = CheckRecvBuffer(rank, ranks, bytes_per_peer, recv.data());
  if (bad) std::fprintf(stderr, "mixnet_alltoall_mpi: %s\n", bad->c_str());
  int local_failed = bad ? 1 : 0;
  int failed = 0;
  MPI_Allreduce(&local_failed, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed != 0) return false;

  for (int i = 0; i < opts.common.warmup; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Alltoall(send.data(), count, MPI_BYTE, recv.data(), count, MPI_BYTE, MPI_COMM_WORLD);
  }
  std::vector<double> seconds(opts.common.iters);
  for (int i = 0; i < opts.common.iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    MPI_Alltoall(send.data(), count, MPI_BYTE, recv.data(), count, MPI_BYTE, MPI_COMM_WORLD);
    auto t1 = std::chrono::steady_clock::now();
    seconds[i] = std::chrono::duration<double>(t1 - t0).count();
  }
  // Per iteration: slowest rank.
  std::vector<double> slowest(seconds.size());
  MPI_Reduce(seconds.data(), slowest.data(), static_cast<int>(seconds.size()), MPI_DOUBLE, MPI_MAX,
             0, MPI_COMM_WORLD);
  if (rank == 0) {
    PrintResult(MeasuredResult(bytes_per_peer, ranks, TransportLabel(opts.btl), opts.common.warmup,
                               slowest),
                opts.common.json);
  }
  return true;
}

int RunRank(const MpiOptions& opts, int argc, char** argv) {
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  std::string prefix = std::string("mixnet_alltoall_mpi: rank ") + (env_rank ? env_rank : "?");
  ArmWatchdog(opts.common.timeout_s, (prefix + ": timed out (--timeout-s)").c_str());
  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (opts.common.ranks > 0 && opts.common.ranks != ranks) {
    if (rank == 0) {
      std::fprintf(stderr, "mixnet_alltoall_mpi: --ranks %d but the MPI job has %d ranks\n",
                   opts.common.ranks, ranks);
    }
    MPI_Finalize();
    return 2;
  }
  int rc = 0;
  if (rank == 0) PrintHeader(opts.common.json);
  for (std::size_t bytes_per_peer : opts.common.size_list) {
    if (!RunSize(opts, rank, ranks, bytes_per_peer)) {
      if (rank == 0) {
        std::fprintf(stderr, "mixnet_alltoall_mpi: correctness check failed at %zu bytes/peer\n",
                     bytes_per_peer);
      }
      rc = 1;
      break;
    }
  }
  MPI_Finalize();
  return rc;
}

}  // namespace
}  // namespace mixnet::bench::peers

int main(int argc, char** argv) {
  using namespace mixnet::bench::peers;
  MpiOptions opts;
  CLI::App app{
      "MPI_Alltoall over Open MPI's TCP BTL between local ranks (peer of "
      "mixnet_alltoall_perf)"};
  AddCommonOptions(app, opts.common);
  app.add_option("--mpirun", opts.mpirun,
                 "mpirun to launch with (default: $MIXNET_MPIRUN, else mpirun on PATH)");
  app.add_option("--iface", opts.iface, "Interface for the TCP BTL (btl_tcp_if_include)")
      ->capture_default_str();
  app.add_option("--btl", opts.btl,
                 "Open MPI byte transfer layers; vader,self is its shared-memory path, a "
                 "reference for MixNet's intra-host transport")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (auto error = FinishOptions(opts.common)) {
    std::fprintf(stderr, "mixnet_alltoall_mpi: %s\n", error->c_str());
    return 2;
  }
  for (std::size_t size : opts.common.size_list) {
    if (size > static_cast<std::size_t>(INT_MAX)) {
      std::fprintf(stderr, "mixnet_alltoall_mpi: %zu bytes per peer exceeds MPI's int count\n",
                   size);
      return 2;
    }
  }
  if (InMpiJob()) return RunRank(opts, argc, argv);
  if (opts.common.ranks < 1) {
    std::fprintf(stderr,
                 "mixnet_alltoall_mpi: not inside an MPI job; pass --ranks N to launch N ranks "
                 "under mpirun\n");
    return 2;
  }
  return Launch(opts, argc, argv);
}
