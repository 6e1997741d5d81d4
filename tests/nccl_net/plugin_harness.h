// Test harness for the NCCL net plugin: loads the built library with dlopen
// (RTLD_NOW | RTLD_LOCAL, as NCCL does), runs ranks as forked processes that
// exchange connection handles through a shared-memory board, and drives the
// v11 API the way NCCL's proxy does (one thread polling connect and accept,
// isend/irecv/test). Child code reports failures as absl::Status.
// Threads: each rank is a single-threaded process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "plugins/nccl_net/nccl_net_abi.h"
#include "runtime/common/status.h"

namespace mixnet::nccl_test {

namespace abi = nccl_abi;

inline constexpr int kMaxRanks = 8;

// Fails the enclosing Status-returning function with a message.
#define NT_REQUIRE(cond, ...)                                                     \
  do {                                                                            \
    if (!(cond)) {                                                                \
      return absl::InternalError(                                                 \
          absl::StrCat(__FILE__, ":", __LINE__, ": ", #cond, ": ", __VA_ARGS__)); \
    }                                                                             \
  } while (0)
// Requires an ncclResult_t of kSuccess.
#define NT_NCCL_OK(expr)                                                                       \
  do {                                                                                         \
    int nt_r_ = (expr);                                                                        \
    if (nt_r_ != 0) {                                                                          \
      return absl::InternalError(                                                              \
          absl::StrCat(__FILE__, ":", __LINE__, ": ", #expr, " returned ncclResult ", nt_r_)); \
    }                                                                                          \
  } while (0)

// A rank's helper that returns an error early leaves requests the plugin
// has not completed (NCCL would abort the comm; the test goes on to report):
// their buffers must stay mapped, or a late write lands in freed memory and
// the crash hides the error. Guards the buffer sets it is given: unless
// Release()d, they are leaked (moved to the heap, the data stays put) when it
// goes out of scope.
class KeepBuffersOnError {
 public:
  using Buffers = std::vector<std::vector<uint8_t>>;
  explicit KeepBuffersOnError(std::vector<Buffers*> sets) : sets_(std::move(sets)) {}
  ~KeepBuffersOnError() {
    if (released_) return;
    for (Buffers* b : sets_) new Buffers(std::move(*b));  // NOLINT: leaked on purpose
  }
  KeepBuffersOnError(const KeepBuffersOnError&) = delete;
  KeepBuffersOnError& operator=(const KeepBuffersOnError&) = delete;
  void Release() { released_ = true; }

 private:
  std::vector<Buffers*> sets_;
  bool released_ = false;
};

// Absolute path of the built plugin (compile definition).
std::string PluginPath();

// dlopens a library and looks up a table symbol.
struct Loaded {
  void* dl = nullptr;
  const abi::NetV8* v8 = nullptr;
  const abi::NetV9* v9 = nullptr;
  const abi::NetV10* v10 = nullptr;
  const abi::NetV11* v11 = nullptr;
};
absl::StatusOr<Loaded> LoadPlugin(const std::string& path);

// Shared-memory board for handle exchange between forked ranks.
struct Board {
  std::atomic<int> ready[kMaxRanks][kMaxRanks][4];
  char handles[kMaxRanks][kMaxRanks][4][abi::kHandleMaxSize];
  std::atomic<int> barrier_count;
  std::atomic<int> barrier_generation;
  char errors[kMaxRanks][1024];
  int world;
  std::atomic<int> votes[kMaxRanks];
};
// Publishes the handle that `owner` listens on for traffic from `peer` (slot k).
void Publish(Board* b, int owner, int peer, int k, const void* handle);
// Waits for it; DeadlineExceeded after `timeout`.
absl::Status Fetch(Board* b, int owner, int peer, int k, void* handle,
                   absl::Duration timeout = absl::Seconds(20));
absl::Status Barrier(Board* b, absl::Duration timeout = absl::Seconds(30));
// A collective vote: true when every rank passed true (two barriers).
absl::StatusOr<bool> AllAgree(Board* b, int me, bool mine,
                              absl::Duration timeout = absl::Seconds(30));

// Runs in each forked rank before fn, after MIXNET_SOCKET_IFNAME was set to
// lo and MIXNET_TRANSPORT cleared, and before the rank loads the plugin: e.g. to
// enter the rank's network namespace and choose its interface. An error fails
// that rank (fn is not run).
using RankSetup = std::function<absl::Status(int rank)>;

// Forks `world` ranks running fn(rank, board) (after `setup`, when given); each
// child's Status (or a crash, or a timeout, after which every child is killed)
// becomes the returned error.
absl::Status RunRanks(int world, const std::function<absl::Status(int rank, Board* board)>& fn,
                      absl::Duration timeout = absl::Seconds(45), const RankSetup& setup = nullptr);

// A v11 session in one rank: the loaded plugin plus one communicator context.
struct Net {
  Loaded lib;
  const abi::NetV11* api = nullptr;
  void* ctx = nullptr;
};
// `capture_logs`: the plugin logs through the harness's logger, as it would
// through NCCL's; LoggedLines() returns what it logged (INFO and WARN).
// `traffic_class`: the CommConfig init passes (NCCL's NCCL_IB_TC).
absl::StatusOr<Net> OpenNet(bool capture_logs = false, int traffic_class = abi::kTrafficClassUndef);
std::vector<std::string> LoggedLines();
// How many logged lines contain both `a` and `b`.
int CountLoggedLines(const std::string& a, const std::string& b = "");

// Shuts down (both ways) every connected TCP socket of this process bound
// to IPv4 address `local_ip`: both ends of the connections see them end, as
// a cut circuit's would. Returns how many.
int ShutDownSocketsOn(const std::string& local_ip);

// Polls connect(send to handle) and accept(listen) from one thread until both
// are up, as NCCL does. Either may be NULL to drive only one side.
absl::Status ConnectAccept(const Net& net, void* handle, void** send_comm, void* listen,
                           void** recv_comm, absl::Duration timeout = absl::Seconds(20));

// Tests `request` until done; returns the ncclResult of the completing test
// and the sizes it reported.
absl::StatusOr<int> WaitRequest(const Net& net, void* request, int* sizes,
                                absl::Duration timeout = absl::Seconds(20));

// Deterministic contents of message (src, dst, seq); Check verifies them.
void Fill(uint8_t* p, size_t n, uint64_t seed);
bool Check(const uint8_t* p, size_t n, uint64_t seed);
inline uint64_t Seed(int src, int dst, int seq) {
  return (static_cast<uint64_t>(src) << 40) ^ (static_cast<uint64_t>(dst) << 20) ^
         static_cast<uint64_t>(seq) ^ 0x5bd1e995u;
}

}  // namespace mixnet::nccl_test
