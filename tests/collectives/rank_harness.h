// Test harness: runs a function as N ranks, either as threads of this process
// or as forked processes, each with its own Communicator over a shared file
// store, and collects every rank's status. Used by the collectives tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/collectives/communicator.h"
#include "runtime/rendezvous/store.h"

namespace mixnet::testing {

enum class RankMode { kThreads, kProcesses };
inline const char* RankModeName(RankMode m) {
  return m == RankMode::kThreads ? "threads" : "processes";
}

// A temporary directory removed on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/mixnet-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using RankFn = std::function<absl::Status(int rank, int world, rendezvous::Store& store)>;

// Status of each rank. In process mode a rank that crashes or exceeds
// `deadline` is reported as Internal / DeadlineExceeded; `kill_rank` (if >= 0)
// is sent SIGKILL after `kill_after`.
inline std::vector<absl::Status> RunRanks(int world, RankMode mode, const RankFn& fn,
                                          absl::Duration deadline = absl::Seconds(120),
                                          int kill_rank = -1,
                                          absl::Duration kill_after = absl::ZeroDuration()) {
  TempDir dir;
  std::vector<absl::Status> out(world);
  auto run_one = [&](int r) -> absl::Status {
    auto store = rendezvous::CreateFileStore(dir.path() + "/store");
    if (!store.ok()) return store.status();
    return fn(r, world, **store);
  };
  if (mode == RankMode::kThreads) {
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { out[r] = run_one(r); });
    for (auto& t : threads) t.join();
    return out;
  }
  std::vector<pid_t> pids(world);
  fflush(nullptr);
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      absl::Status s = run_one(r);
      std::ofstream(absl::StrCat(dir.path(), "/status.", r)) << static_cast<int>(s.code()) << "\n"
                                                             << s.message();
      _exit(0);
    }
    pids[r] = pid;
  }
  const absl::Time start = absl::Now();
  std::vector<bool> done(world, false);
  bool killed = false;
  int left = world;
  while (left > 0) {
    if (kill_rank >= 0 && !killed && absl::Now() - start >= kill_after) {
      kill(pids[kill_rank], SIGKILL);
      killed = true;
    }
    for (int r = 0; r < world; ++r) {
      if (done[r]) continue;
      int ws = 0;
      if (waitpid(pids[r], &ws, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --left;
      std::ifstream in(absl::StrCat(dir.path(), "/status.", r));
      int code = -1;
      if (WIFEXITED(ws) && in >> code) {
        std::stringstream msg;
        in.get();
        msg << in.rdbuf();
        out[r] = absl::Status(static_cast<absl::StatusCode>(code), msg.str());
      } else {
        out[r] = absl::InternalError(absl::StrCat("rank ", r, " died (wait status ", ws, ")"));
      }
    }
    if (absl::Now() - start > deadline) {
      for (int r = 0; r < world; ++r) {
        if (!done[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          out[r] = absl::DeadlineExceededError(absl::StrCat("rank ", r, " hung"));
          done[r] = true;
          --left;
        }
      }
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return out;
}

// Communicator options for tests: loopback, short timeouts.
inline collectives::CommunicatorOptions TestOptions(int rank, int world, rendezvous::Store* store) {
  collectives::CommunicatorOptions o;
  o.rank = rank;
  o.world_size = world;
  o.store = store;
  o.timeout = absl::Seconds(20);
  o.connect_timeout = absl::Seconds(20);
  o.device_options.sockets_per_connection = 2;
  o.device_options.chunk_bytes = 256 << 10;
  return o;
}

}  // namespace mixnet::testing
