// mixnet_alltoall_gloo: the Gloo (TCP transport) performance peer of
// mixnet_alltoall_perf. Measures gloo::alltoall between N local rank
// processes on loopback, with the same sizes, timing method and output format
// as our benchmark, so `mixnet_alltoall_perf --peers` can print ratios.
//
//   mixnet_alltoall_gloo --ranks 4 --sizes 1M,8M [--iters K --warmup W] [--json]
//
// Without --rank the program is the launcher: it makes a fresh rendezvous
// directory, starts itself N times with --rank r --store-dir DIR, waits for
// all ranks under --timeout-s (killing the rest when one fails) and removes
// the directory. Rank 0 prints the results. Timing: per size, one checked
// iteration, warm-up iterations, then K barrier-separated iterations, each
// timed on every rank; time_us is the mean over iterations of the slowest rank
// (allreduce max).
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <CLI/CLI.hpp>

#include "bench/peers/peer_common.h"

namespace mixnet::bench::peers {
namespace {

constexpr char kTransport[] = "gloo-tcp";

struct GlooOptions {
  PeerOptions common;
  int rank = -1;          // >= 0: run as this rank (set by the launcher).
  std::string store_dir;  // FileStore directory shared by the ranks.
  std::string host = "127.0.0.1";
};

// Starts the N rank processes and waits for them.
int Launch(const GlooOptions& opts, int argc, char** argv) {
  std::string self = SelfExePath();
  if (self.empty()) {
    std::fprintf(stderr, "mixnet_alltoall_gloo: cannot resolve /proc/self/exe\n");
    return 1;
  }
  std::filesystem::path tmp_root;
  const char* tmpdir = std::getenv("TMPDIR");
  tmp_root = (tmpdir != nullptr && *tmpdir != '\0') ? tmpdir : "/tmp";
  std::string pattern = (tmp_root / "mixnet_gloo_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "mixnet_alltoall_gloo: mkdtemp(%s) failed: %s\n", pattern.c_str(),
                 std::strerror(errno));
    return 1;
  }
  const std::string store_dir = pattern;

  InstallStopHandlers();
  Supervisor supervisor("mixnet_alltoall_gloo");
  int rc = 0;
  for (int r = 0; r < opts.common.ranks; ++r) {
    std::vector<std::string> args = {self};
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    args.insert(args.end(), {"--rank", std::to_string(r), "--store-dir", store_dir});
    std::string error;
    if (!supervisor.Spawn("rank " + std::to_string(r), args, {}, false, &error)) {
      std::fprintf(stderr, "mixnet_alltoall_gloo: starting rank %d: %s\n", r, error.c_str());
      supervisor.KillAll(std::chrono::milliseconds(0));
      rc = 1;
      break;
    }
  }
  if (rc == 0) rc = supervisor.WaitAll(std::chrono::seconds(opts.common.timeout_s));
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  return rc;
}

void MaxAllreduce(const std::shared_ptr<gloo::Context>& ctx, std::vector<double>& values) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(values.data(), values.size());
  void (*fn)(void*, const void*, const void*, size_t) = &gloo::max<double>;
  opts.setReduceFunction(fn);
  gloo::allreduce(opts);
}

// Measures one size. Returns false (on every rank) when the data were wrong.
bool RunSize(const std::shared_ptr<gloo::Context>& ctx, const GlooOptions& opts,
             std::size_t bytes_per_peer) {
  const int rank = ctx->rank;
  const int ranks = ctx->size;
  const std::size_t total = bytes_per_peer * static_cast<std::size_t>(ranks);
  // Gloo needs non-null buffers even for zero bytes.
  std::vector<std::uint8_t> send(total > 0 ? total : 1);
  std::vector<std::uint8_t> recv(total > 0 ? total : 1, 0);
  FillSendBuffer(rank, ranks, bytes_per_peer, send.data());

  gloo::AlltoallOptions a2a(ctx);
  a2a.setInput(send.data(), total);
  a2a.setOutput(recv.data(), total);
  gloo::BarrierOptions barrier(ctx);

  // Correctness: one checked iteration, the verdict shared by all ranks.
  gloo::alltoall(a2a);
  std::optional<std::string> bad = CheckRecvBuffer(rank, ranks, bytes_per_peer, recv.data());
  if (bad) std::fprintf(stderr, "mixnet_alltoall_gloo: %s\n", bad->c_str());
  std::vector<double> failed = {bad ? 1.0 : 0.0};
  MaxAllreduce(ctx, failed);
  if (failed[0] != 0) return false;

  for (int i = 0; i < opts.common.warmup; ++i) {
    gloo::barrier(barrier);
    gloo::alltoall(a2a);
  }
  std::vector<double> seconds(opts.common.iters);
  for (int i = 0; i < opts.common.iters; ++i) {
    gloo::barrier(barrier);
    auto t0 = std::chrono::steady_clock::now();
    gloo::alltoall(a2a);
    auto t1 = std::chrono::steady_clock::now();
    seconds[i] = std::chrono::duration<double>(t1 - t0).count();
  }
  MaxAllreduce(ctx, seconds);  // Per iteration: slowest rank.

  if (rank == 0) {
    PrintResult(MeasuredResult(bytes_per_peer, ranks, kTransport, opts.common.warmup, seconds),
                opts.common.json);
  }
  return true;
}

int RunRank(const GlooOptions& opts) {
  const int rank = opts.rank;
  const std::string prefix = "mixnet_alltoall_gloo: rank " + std::to_string(rank);
  if (rank >= opts.common.ranks) {
    std::fprintf(stderr, "%s: --rank must be below --ranks %d\n", prefix.c_str(),
                 opts.common.ranks);
    return 2;
  }
  if (opts.store_dir.empty()) {
    std::fprintf(stderr, "%s: --store-dir is required with --rank\n", prefix.c_str());
    return 2;
  }
  ArmWatchdog(opts.common.timeout_s, (prefix + ": timed out (--timeout-s)").c_str());
  try {
    gloo::rendezvous::FileStore store(opts.store_dir);
    gloo::transport::tcp::attr attr;
    attr.hostname = opts.host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, opts.common.ranks);
    ctx->setTimeout(std::chrono::seconds(opts.common.timeout_s));
    ctx->connectFullMesh(store, device);
    std::shared_ptr<gloo::Context> base = ctx;

    if (rank == 0) PrintHeader(opts.common.json);
    for (std::size_t bytes_per_peer : opts.common.size_list) {
      if (!RunSize(base, opts, bytes_per_peer)) {
        if (rank == 0) {
          std::fprintf(stderr, "mixnet_alltoall_gloo: correctness check failed at %zu bytes/peer\n",
                       bytes_per_peer);
        }
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: gloo error: %s\n", prefix.c_str(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace mixnet::bench::peers

int main(int argc, char** argv) {
  using namespace mixnet::bench::peers;
  GlooOptions opts;
  CLI::App app{
      "All-to-all over Gloo's TCP transport between local rank processes (peer of "
      "mixnet_alltoall_perf)"};
  AddCommonOptions(app, opts.common);
  app.add_option("--host", opts.host, "Address the Gloo TCP device binds to")
      ->capture_default_str();
  // Internal: set by the launcher for each rank process.
  app.add_option("--rank", opts.rank)->group("");
  app.add_option("--store-dir", opts.store_dir)->group("");
  CLI11_PARSE(app, argc, argv);

  if (auto error = FinishOptions(opts.common)) {
    std::fprintf(stderr, "mixnet_alltoall_gloo: %s\n", error->c_str());
    return 2;
  }
  if (opts.common.ranks < 1) {
    std::fprintf(stderr, "mixnet_alltoall_gloo: --ranks N (N >= 1) is required\n");
    return 2;
  }
  if (opts.rank < 0) return Launch(opts, argc, argv);
  return RunRank(opts);
}
