// Harness implementation (see plugin_harness.h). Runs in the test process
// (RunRanks) and in forked rank processes (everything else).
#include "tests/nccl_net/plugin_harness.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "mixnet_build_paths.h"  // MIXNET_NCCL_PLUGIN_PATH

namespace mixnet::nccl_test {

std::string PluginPath() { return MIXNET_NCCL_PLUGIN_PATH; }

absl::StatusOr<Loaded> LoadPlugin(const std::string& path) {
  Loaded l;
  l.dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (l.dl == nullptr) return absl::NotFoundError(absl::StrCat("dlopen ", path, ": ", dlerror()));
  l.v8 = static_cast<const abi::NetV8*>(dlsym(l.dl, abi::kSymbolV8));
  l.v9 = static_cast<const abi::NetV9*>(dlsym(l.dl, abi::kSymbolV9));
  l.v10 = static_cast<const abi::NetV10*>(dlsym(l.dl, abi::kSymbolV10));
  l.v11 = static_cast<const abi::NetV11*>(dlsym(l.dl, abi::kSymbolV11));
  return l;
}

void Publish(Board* b, int owner, int peer, int k, const void* handle) {
  std::memcpy(b->handles[owner][peer][k], handle, abi::kHandleMaxSize);
  b->ready[owner][peer][k].store(1, std::memory_order_release);
}

absl::Status Fetch(Board* b, int owner, int peer, int k, void* handle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (b->ready[owner][peer][k].load(std::memory_order_acquire) == 0) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no handle from rank ", owner, " for rank ", peer, " slot ", k));
    }
    usleep(200);
  }
  std::memcpy(handle, b->handles[owner][peer][k], abi::kHandleMaxSize);
  return absl::OkStatus();
}

absl::Status Barrier(Board* b, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const int gen = b->barrier_generation.load();
  if (b->barrier_count.fetch_add(1) + 1 == b->world) {
    b->barrier_count.store(0);
    b->barrier_generation.fetch_add(1);
    return absl::OkStatus();
  }
  while (b->barrier_generation.load() == gen) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("barrier timed out");
    usleep(200);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> AllAgree(Board* b, int me, bool mine, absl::Duration timeout) {
  b->votes[me].store(mine ? 1 : 0);
  RETURN_IF_ERROR(Barrier(b, timeout));
  bool all = true;
  for (int r = 0; r < b->world; ++r) all = all && b->votes[r].load() == 1;
  RETURN_IF_ERROR(Barrier(b, timeout));  // nobody votes again before all have counted
  return all;
}

absl::Status RunRanks(int world, const std::function<absl::Status(int, Board*)>& fn,
                      absl::Duration timeout, const RankSetup& setup) {
  void* mem =
      mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return absl::InternalError("mmap of the board failed");
  auto* board = new (mem) Board();
  board->world = world;
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      // Ranks run on loopback over TCP whatever the caller set (the plugin's
      // own default interface is the host's first non-loopback one).
      setenv("MIXNET_SOCKET_IFNAME", "lo", 1);
      unsetenv("MIXNET_TRANSPORT");
      absl::Status s;
      // An exception must not unwind into the test framework's copy in the
      // child (it would go on running the remaining tests there).
      try {
        s = setup ? setup(r) : absl::OkStatus();
        if (s.ok()) s = fn(r, board);
      } catch (const std::exception& e) {
        s = absl::InternalError(absl::StrCat("exception in rank: ", e.what()));
      } catch (...) {
        s = absl::InternalError("unknown exception in rank");
      }
      if (!s.ok()) {
        std::strncpy(board->errors[r], s.ToString().c_str(), sizeof(board->errors[r]) - 1);
      }
      _exit(s.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> status(world, -1);
  int left = world;
  bool timed_out = false;
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        --left;
      }
    }
    if (left > 0 && absl::Now() > deadline) {
      timed_out = true;
      for (int r = 0; r < world; ++r) {
        if (status[r] == -1) kill(pids[r], SIGKILL);
      }
      for (int r = 0; r < world; ++r) {
        if (status[r] == -1) waitpid(pids[r], &status[r], 0);
      }
      break;
    }
    if (left > 0) usleep(1000);
  }
  std::string errors;
  for (int r = 0; r < world; ++r) {
    if (WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0) continue;
    absl::StrAppend(&errors, "rank ", r, ": ");
    if (WIFSIGNALED(status[r]))
      absl::StrAppend(&errors, "killed by signal ", WTERMSIG(status[r]), " ");
    absl::StrAppend(&errors, board->errors[r], "; ");
  }
  munmap(mem, sizeof(Board));
  if (timed_out) return absl::DeadlineExceededError(absl::StrCat("ranks timed out: ", errors));
  if (!errors.empty()) return absl::InternalError(errors);
  return absl::OkStatus();
}

namespace {

absl::Mutex g_log_mu;
std::vector<std::string>* g_log_lines = nullptr;

void CaptureLog(abi::LogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  absl::MutexLock lock(&g_log_mu);
  if (g_log_lines == nullptr) g_log_lines = new std::vector<std::string>();
  g_log_lines->push_back(absl::StrCat(level == abi::kLogWarn ? "WARN " : "INFO ", buf));
}

}  // namespace

std::vector<std::string> LoggedLines() {
  absl::MutexLock lock(&g_log_mu);
  return g_log_lines == nullptr ? std::vector<std::string>{} : *g_log_lines;
}

int CountLoggedLines(const std::string& a, const std::string& b) {
  int n = 0;
  for (const std::string& l : LoggedLines()) {
    n += l.find(a) != std::string::npos && l.find(b) != std::string::npos;
  }
  return n;
}

int ShutDownSocketsOn(const std::string& local_ip) {
  int cut = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in local{}, peer{};
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        local.sin_family != AF_INET ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) {
      continue;
    }
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &local.sin_addr, ip, sizeof(ip));
    if (local_ip != ip) continue;
    if (shutdown(fd, SHUT_RDWR) == 0) ++cut;
  }
  return cut;
}

absl::StatusOr<Net> OpenNet(bool capture_logs, int traffic_class) {
  Net net;
  absl::StatusOr<Loaded> l = LoadPlugin(PluginPath());
  if (!l.ok()) return l.status();
  net.lib = *l;
  net.api = l->v11;
  NT_REQUIRE(net.api != nullptr, "ncclNetPlugin_v11 missing");
  abi::CommConfig config{traffic_class};
  const int rc =
      net.api->init(&net.ctx, 0x1234, &config, capture_logs ? &CaptureLog : nullptr, nullptr);
  std::string log;
  for (const std::string& l : LoggedLines()) absl::StrAppend(&log, "\n", l);
  NT_REQUIRE(rc == 0, "init returned ncclResult ", rc, log);
  NT_REQUIRE(net.ctx != nullptr, "init gave no context");
  return net;
}

absl::Status ConnectAccept(const Net& net, void* handle, void** send_comm, void* listen,
                           void** recv_comm, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  bool send_done = send_comm == nullptr, recv_done = recv_comm == nullptr;
  while (!send_done || !recv_done) {
    if (!send_done) {
      NT_NCCL_OK(net.api->connect(net.ctx, 0, handle, send_comm, nullptr));
      send_done = *send_comm != nullptr;
    }
    if (!recv_done) {
      NT_NCCL_OK(net.api->accept(listen, recv_comm, nullptr));
      recv_done = *recv_comm != nullptr;
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError("connect/accept timed out");
    if (!send_done || !recv_done) usleep(100);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> WaitRequest(const Net& net, void* request, int* sizes, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int done = 0;
    int r = net.api->test(request, &done, sizes);
    if (r != 0 || done) return r;
    if (absl::Now() > deadline) return absl::DeadlineExceededError("request still pending");
    std::this_thread::yield();
  }
}

void Fill(uint8_t* p, size_t n, uint64_t seed) {
  size_t words = n / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = seed ^ (w * 0x9E3779B97F4A7C15ull);
    std::memcpy(p + w * 8, &v, 8);
  }
  for (size_t k = words * 8; k < n; ++k) p[k] = static_cast<uint8_t>((seed >> (k % 8)) + k);
}

bool Check(const uint8_t* p, size_t n, uint64_t seed) {
  std::vector<uint8_t> want(n);
  Fill(want.data(), n, seed);
  return n == 0 || std::memcmp(p, want.data(), n) == 0;
}

}  // namespace mixnet::nccl_test
