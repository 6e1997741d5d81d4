// Shared pieces of the all-to-all performance peers: option parsing, the
// correctness pattern, result printing and the deadline-bound supervisor of
// child processes (see peer_common.h).
#include "bench/peers/peer_common.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

extern char** environ;

namespace mixnet::bench::peers {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
char g_watchdog_message[256] = "timed out\n";
std::size_t g_watchdog_message_len = 10;

void OnStopSignal(int sig) { g_stop_signal = sig; }

void OnWatchdog(int /*sig*/) {
  ssize_t ignored = write(STDERR_FILENO, g_watchdog_message, g_watchdog_message_len);
  (void)ignored;
  _exit(124);
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped with raw status " + std::to_string(status);
}

}  // namespace

void AddCommonOptions(CLI::App& app, PeerOptions& opts) {
  app.add_option("--ranks", opts.ranks, "Number of ranks (processes) on this machine");
  app.add_option("--sizes", opts.sizes, "Comma-separated bytes per peer, e.g. 64K,1M,8M,1G")
      ->capture_default_str();
  app.add_option("--iters", opts.iters, "Timed iterations per size")->capture_default_str();
  app.add_option("--warmup", opts.warmup, "Untimed warm-up iterations per size")
      ->capture_default_str();
  app.add_flag("--json", opts.json, "Print one JSON object per size and line");
  app.add_option("--timeout-s", opts.timeout_s, "Deadline for the whole run, in seconds")
      ->capture_default_str();
}

std::optional<std::string> FinishOptions(PeerOptions& opts) {
  if (opts.iters < 1) return "--iters must be at least 1";
  if (opts.warmup < 0) return "--warmup must not be negative";
  if (opts.timeout_s < 1) return "--timeout-s must be at least 1";
  if (opts.ranks < 0) return "--ranks must be at least 1";
  return ParseSizeList(opts.sizes, &opts.size_list);
}

std::optional<std::size_t> ParseSize(const std::string& text) {
  static const std::regex kSize(R"(^\s*([0-9]+)\s*([kKmMgG]?)(i?[bB])?\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, kSize)) return std::nullopt;
  if (m[1].length() > 15) return std::nullopt;
  std::size_t value = std::stoull(m[1].str());
  int shift = 0;
  if (m[2].length() > 0) {
    switch (m[2].str()[0]) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      default:
        shift = 30;
        break;
    }
  }
  if (value > (SIZE_MAX >> (shift + 8))) return std::nullopt;
  return value << shift;
}

std::optional<std::string> ParseSizeList(const std::string& text, std::vector<std::size_t>* out) {
  out->clear();
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    std::optional<std::size_t> size = ParseSize(item);
    if (!size) return "--sizes: cannot parse '" + item + "' (expected e.g. 4096, 64K, 1M, 1G)";
    out->push_back(*size);
    start = comma + 1;
  }
  if (out->empty()) return "--sizes: no sizes given";
  return std::nullopt;
}

void FillSendBuffer(int rank, int ranks, std::size_t bytes_per_peer, std::uint8_t* send) {
  for (int dst = 0; dst < ranks; ++dst) {
    std::uint8_t* block = send + static_cast<std::size_t>(dst) * bytes_per_peer;
    for (std::size_t i = 0; i < bytes_per_peer; ++i) block[i] = PatternByte(rank, dst, i);
  }
}

std::optional<std::string> CheckRecvBuffer(int rank, int ranks, std::size_t bytes_per_peer,
                                           const std::uint8_t* recv) {
  for (int src = 0; src < ranks; ++src) {
    const std::uint8_t* block = recv + static_cast<std::size_t>(src) * bytes_per_peer;
    for (std::size_t i = 0; i < bytes_per_peer; ++i) {
      std::uint8_t want = PatternByte(src, rank, i);
      if (block[i] != want) {
        return "rank " + std::to_string(rank) + ": wrong byte from rank " + std::to_string(src) +
               " at offset " + std::to_string(i) + " of " + std::to_string(bytes_per_peer) +
               ": got " + std::to_string(block[i]) + ", want " + std::to_string(want);
      }
    }
  }
  return std::nullopt;
}

Result MeasuredResult(std::size_t bytes_per_peer, int ranks, const std::string& transport,
                      int warmup, const std::vector<double>& iter_max_seconds) {
  Result r;
  r.bytes_per_peer = bytes_per_peer;
  r.ranks = ranks;
  r.transport = transport;
  r.iters = static_cast<int>(iter_max_seconds.size());
  r.warmup = warmup;
  double sum = 0;
  for (double s : iter_max_seconds) sum += s;
  double mean = iter_max_seconds.empty() ? 0 : sum / static_cast<double>(iter_max_seconds.size());
  r.time_us = mean * 1e6;
  if (!iter_max_seconds.empty()) {
    std::vector<double> sorted = iter_max_seconds;
    std::sort(sorted.begin(), sorted.end());
    r.time_min_us = sorted.front() * 1e6;
    r.time_p50_us = sorted[(sorted.size() - 1) / 2] * 1e6;
    r.time_max_us = sorted.back() * 1e6;
  }
  double bytes = static_cast<double>(ranks) * static_cast<double>(bytes_per_peer);
  r.algbw_gbps = mean > 0 ? bytes / mean / 1e9 : 0;
  r.busbw_gbps = ranks > 0 ? r.algbw_gbps * (ranks - 1) / ranks : 0;
  return r;
}

void PrintHeader(bool json) {
  if (json) return;
  std::printf("# %14s %6s %10s %6s %12s %12s %12s\n", "bytes/peer", "ranks", "transport", "iters",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  std::fflush(stdout);
}

std::string TransportLabel(const Result& r) {
  if (r.intra_host.empty() || r.intra_host == r.transport) return r.transport;
  return r.transport + "/" + r.intra_host;
}

nlohmann::ordered_json ResultToJson(const Result& r) {
  nlohmann::ordered_json j;
  j["bytes_per_peer"] = r.bytes_per_peer;
  j["ranks"] = r.ranks;
  j["transport"] = r.transport;
  if (!r.intra_host.empty()) j["intra_host"] = r.intra_host;
  j["time_us"] = r.time_us;
  j["time_min_us"] = r.time_min_us;
  j["time_p50_us"] = r.time_p50_us;
  j["time_max_us"] = r.time_max_us;
  j["algbw_GBps"] = r.algbw_gbps;
  j["busbw_GBps"] = r.busbw_gbps;
  j["iters"] = r.iters;
  j["warmup"] = r.warmup;
  return j;
}

Result ResultFromJson(const nlohmann::json& j) {
  Result r;
  r.bytes_per_peer = j.value("bytes_per_peer", std::size_t{0});
  r.ranks = j.value("ranks", 0);
  r.transport = j.value("transport", "");
  r.intra_host = j.value("intra_host", "");
  r.time_us = j.value("time_us", 0.0);
  r.time_min_us = j.value("time_min_us", 0.0);
  r.time_p50_us = j.value("time_p50_us", 0.0);
  r.time_max_us = j.value("time_max_us", 0.0);
  r.algbw_gbps = j.value("algbw_GBps", 0.0);
  r.busbw_gbps = j.value("busbw_GBps", 0.0);
  r.iters = j.value("iters", 0);
  r.warmup = j.value("warmup", 0);
  return r;
}

void PrintResult(const Result& r, bool json) {
  if (json) {
    std::printf("%s\n", ResultToJson(r).dump().c_str());
  } else {
    std::printf("  %14zu %6d %10s %6d %12.1f %12.3f %12.3f\n", r.bytes_per_peer, r.ranks,
                TransportLabel(r).c_str(), r.iters, r.time_us, r.algbw_gbps, r.busbw_gbps);
  }
  std::fflush(stdout);
}

std::string SelfExePath() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

std::string FindOnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::string dirs = path;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(start, colon - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return "";
}

void ArmWatchdog(int seconds, const char* what) {
  std::snprintf(g_watchdog_message, sizeof(g_watchdog_message), "%s\n", what);
  g_watchdog_message_len = std::strlen(g_watchdog_message);
  struct sigaction sa {};
  sa.sa_handler = OnWatchdog;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, nullptr);
  alarm(static_cast<unsigned>(seconds));
}

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool Supervisor::Spawn(const std::string& label, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, bool own_group, std::string* error) {
  // Everything the child needs is prepared before fork().
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& extra : env) {
      if (extra.substr(0, extra.find('=')) == key) overridden = true;
    }
    if (!overridden) env_strings.push_back(entry);
  }
  for (const std::string& extra : env) env_strings.push_back(extra);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  std::vector<char*> args;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  const pid_t parent = getpid();
  if (own_group) prctl(PR_SET_CHILD_SUBREAPER, 1);
  // mpirun gets SIGTERM when we die, so it can take its ranks down with it.
  const int death_signal = own_group ? SIGTERM : SIGKILL;

  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork failed: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    if (own_group) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(127);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      close(devnull);
    }
    execve(args[0], args.data(), envp.data());
    const char* msg = "exec failed\n";
    ssize_t ignored = write(STDERR_FILENO, msg, std::strlen(msg));
    (void)ignored;
    _exit(127);
  }
  if (own_group) setpgid(pid, pid);  // Also from the parent: no race with KillAll.
  children_.push_back(Child{label, pid, own_group, false});
  return true;
}

void Supervisor::SignalAll(int sig) {
  for (Child& c : children_) {
    if (c.own_group) kill(-c.pid, sig);  // Group outlives its leader.
    if (!c.done) kill(c.pid, sig);
  }
}

void Supervisor::ReapExited() {
  for (Child& c : children_) {
    if (c.done) continue;
    int status = 0;
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid || (r < 0 && errno == ECHILD)) c.done = true;
  }
}

void Supervisor::KillAll(std::chrono::milliseconds grace) {
  SignalAll(SIGTERM);
  auto until = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < until) {
    ReapExited();
    bool all_done = true;
    for (const Child& c : children_) all_done = all_done && c.done;
    if (all_done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  SignalAll(SIGKILL);
  for (Child& c : children_) {
    if (c.done) continue;
    int status = 0;
    waitpid(c.pid, &status, 0);
    c.done = true;
  }
  KillOrphans();
}

void Supervisor::KillOrphans() {
  const pid_t self = getpid();
  for (int round = 0; round < 100; ++round) {
    bool found = false;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::FILE* f = std::fopen((entry.path() / "stat").c_str(), "r");
      if (f == nullptr) continue;
      char buf[512] = {};
      std::size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
      std::fclose(f);
      // Format: pid (comm) state ppid ...; comm may contain spaces or ')'.
      const char* close = std::strrchr(buf, ')');
      if (n == 0 || close == nullptr) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(close + 1, " %c %d", &state, &ppid) != 2 || ppid != self) continue;
      found = true;
      kill(std::stoi(name), SIGKILL);
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!found) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Supervisor::WaitAll(std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  const std::chrono::milliseconds grace(3000);
  for (;;) {
    bool all_done = true;
    for (Child& c : children_) {
      if (c.done) continue;
      int status = 0;
      pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == 0) {
        all_done = false;
        continue;
      }
      c.done = true;
      if (r < 0) continue;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      std::fprintf(stderr, "%s: %s %s; stopping the others\n", program_.c_str(), c.label.c_str(),
                   DescribeStatus(status).c_str());
      KillAll(grace);
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    }
    if (all_done) {
      KillOrphans();  // Normally none: ranks exit before mpirun.
      return 0;
    }
    if (g_stop_signal != 0) {
      std::fprintf(stderr, "%s: interrupted by signal %d; stopping ranks\n", program_.c_str(),
                   static_cast<int>(g_stop_signal));
      KillAll(grace);
      return 128 + g_stop_signal;
    }
    if (std::chrono::steady_clock::now() >= until) {
      std::fprintf(stderr, "%s: timed out after %lld s (--timeout-s); killing ranks\n",
                   program_.c_str(), static_cast<long long>(deadline.count()));
      KillAll(grace);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace mixnet::bench::peers
