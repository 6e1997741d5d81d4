// Shared pieces of the all-to-all performance peers (mixnet_alltoall_gloo and
// mixnet_alltoall_mpi): command-line options, size parsing, the byte pattern
// used for the correctness check, nccl-tests style result lines, and a small
// process supervisor that runs child processes under a deadline so that a
// crashed or stuck rank never hangs the benchmark.
#ifndef MIXNET_BENCH_PEERS_PEER_COMMON_H_
#define MIXNET_BENCH_PEERS_PEER_COMMON_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}  // namespace CLI

namespace mixnet::bench::peers {

// Options common to both peers.
struct PeerOptions {
  int ranks = 0;                       // 0: not given on the command line.
  std::string sizes = "1M,8M";         // Comma-separated bytes per peer.
  int iters = 20;                      // Timed iterations per size.
  int warmup = 5;                      // Untimed iterations per size.
  bool json = false;                   // One JSON object per line instead of a table.
  int timeout_s = 120;                 // Deadline for the whole run.
  std::vector<std::size_t> size_list;  // Parsed from `sizes`.
};

// Registers the shared options on `app`.
void AddCommonOptions(CLI::App& app, PeerOptions& opts);

// Validates the parsed options and fills `size_list`. Returns an error
// message, or nullopt when everything is fine.
std::optional<std::string> FinishOptions(PeerOptions& opts);

// Parses "1M" (1<<20), "64K", "1G", "4096", "8MiB"... Returns nullopt on junk.
std::optional<std::size_t> ParseSize(const std::string& text);

// Parses a comma-separated size list. Returns an error message on failure.
std::optional<std::string> ParseSizeList(const std::string& text, std::vector<std::size_t>* out);

// Byte that rank `src` sends to rank `dst` at offset `index` of that peer's
// block. Depends on all three so misrouted or shifted data is caught.
inline std::uint8_t PatternByte(int src, int dst, std::size_t index) {
  std::uint64_t x = index * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(src) * 0x1000193ull +
                    static_cast<std::uint64_t>(dst) * 0x5bd1e995ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x ^ (x >> 11) ^ (x >> 37));
}

// Fills `send` (ranks * bytes_per_peer bytes) with the pattern of `rank`.
void FillSendBuffer(int rank, int ranks, std::size_t bytes_per_peer, std::uint8_t* send);

// Checks `recv` against the pattern for receiver `rank`. Returns an error
// message naming the first bad byte, or nullopt.
std::optional<std::string> CheckRecvBuffer(int rank, int ranks, std::size_t bytes_per_peer,
                                           const std::uint8_t* recv);

// One measured size.
struct Result;
// "tcp", or "tcp/local" when ranks of one host used the intra-host transport.
std::string TransportLabel(const Result& r);

struct Result {
  std::size_t bytes_per_peer = 0;
  int ranks = 0;
  std::string transport;
  // MixNet only: what carried bytes between ranks of one host ("local", the
  // intra-host transport, or the transport itself); empty for the peers.
  std::string intra_host;
  int iters = 0;
  int warmup = 0;
  double time_us = 0;  // Per iteration: max over ranks, mean over iterations.
  // The spread of those per-iteration times (a mean pulled up by a few
  // stalls shows as a max far above the median).
  double time_min_us = 0;
  double time_p50_us = 0;  // the lower median, a time that was measured
  double time_max_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

// The result of one size from per-iteration times (seconds, already
// max-reduced over ranks), with the number of timed iterations taken from
// them. nccl-tests formulas: algbw = ranks * bytes_per_peer / time,
// busbw = algbw * (ranks - 1) / ranks, GB = 1e9 bytes.
Result MeasuredResult(std::size_t bytes_per_peer, int ranks, const std::string& transport,
                      int warmup, const std::vector<double>& iter_max_seconds);

// The JSON line of one result (keys bytes_per_peer, ranks, transport, time_us,
// algbw_GBps, busbw_GBps, iters, warmup) and back.
nlohmann::ordered_json ResultToJson(const Result& result);
Result ResultFromJson(const nlohmann::json& j);

// Prints the table header (human mode only).
void PrintHeader(bool json);

// Prints one result: a JSON object line, or a table row. Flushes stdout.
void PrintResult(const Result& result, bool json);

// Path of the running executable (/proc/self/exe resolved).
std::string SelfExePath();

// Finds `name` on $PATH; returns an empty string when absent.
std::string FindOnPath(const std::string& name);

// Arms a watchdog: after `seconds`, prints `what` on stderr and _exit(124).
void ArmWatchdog(int seconds, const char* what);

// Runs child processes and waits for all of them, under a deadline.
class Supervisor {
 public:
  // `program` prefixes the messages written to stderr.
  explicit Supervisor(std::string program) : program_(std::move(program)) {}

  // Starts `argv` (argv[0] is the path to execute) with extra environment
  // entries "KEY=VALUE". When `own_group`, the child gets its own process
  // group and kills go to the whole group (used for mpirun); this process
  // then also becomes the subreaper of the child's descendants, so ranks that
  // mpirun leaves behind (they run in their own groups) can be killed too.
  // Returns false and sets `error` when the fork fails.
  bool Spawn(const std::string& label, const std::vector<std::string>& argv,
             const std::vector<std::string>& env, bool own_group, std::string* error);

  // Waits until every child exited. If one fails (non-zero exit, signal),
  // or the deadline passes, or SIGINT/SIGTERM arrive, the others are killed.
  // Returns 0 when all succeeded, otherwise a non-zero exit code, and
  // writes the reason to stderr.
  int WaitAll(std::chrono::seconds deadline);

  // Kills every child still running (SIGTERM, then SIGKILL after `grace`),
  // and any orphaned descendant re-parented to us (see Spawn).
  void KillAll(std::chrono::milliseconds grace);

 private:
  struct Child {
    std::string label;
    pid_t pid = -1;
    bool own_group = false;
    bool done = false;
  };
  void SignalAll(int sig);
  void ReapExited();
  void KillOrphans();
  std::string program_;
  std::vector<Child> children_;
};

// Installs SIGINT/SIGTERM handlers that only set a flag the supervisor polls.
void InstallStopHandlers();

}  // namespace mixnet::bench::peers

#endif  // MIXNET_BENCH_PEERS_PEER_COMMON_H_
