// mixnet_nccl_plugin_bench: point-to-point bandwidth of the NCCL net plugin
// (libnccl-net-mixnet.so loaded with dlopen and driven like NCCL's proxy: a
// window of isend/irecv polled with test) against the runtime's own transport
// (Connection::Isend/Irecv polled with Done) for the same sizes, in one run, two
// processes on loopback (or MIXNET_SOCKET_IFNAME). Each size runs as --reps
// pairs: the transport and the plugin back to back, the order alternating
// from pair to pair. The ratio of a pair compares two runs a few milliseconds
// apart, so the machine's slow and fast phases (minutes long here) cancel; the
// figure reported is the median of the pairs' ratios, with their range.
// Bandwidths are medians too. Besides bandwidth it reports the CPU time both
// processes spend per GB moved (median). Prints a table or, with --json, one
// object per line. Threads: the sender is this process's main thread, the
// receiver a forked child's main thread.
#include <dlfcn.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "mixnet_build_paths.h"  // MIXNET_NCCL_PLUGIN_PATH
#include "nlohmann/json.hpp"
#include "plugins/nccl_net/nccl_net_abi.h"
#include "runtime/common/cpu_affinity.h"
#include "runtime/common/status.h"
#include "runtime/transport/transport.h"

namespace mixnet::bench {
namespace {

namespace abi = nccl_abi;

// Blocking pipe I/O between the two processes.
struct Pipe {
  int rd = -1, wr = -1;
  absl::Status Write(const void* p, size_t n) const {
    if (write(wr, p, n) != static_cast<ssize_t>(n)) return ErrnoStatus("bench pipe", "write");
    return absl::OkStatus();
  }
  absl::Status Read(void* p, size_t n) const {
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(rd, static_cast<char*>(p) + got, n - got);
      if (r == 0) return absl::UnavailableError("bench pipe: the other process exited");
      if (r < 0) return ErrnoStatus("bench pipe", "read");
      got += static_cast<size_t>(r);
    }
    return absl::OkStatus();
  }
  absl::Status WriteString(const std::string& s) const {
    uint32_t n = static_cast<uint32_t>(s.size());
    RETURN_IF_ERROR(Write(&n, sizeof(n)));
    return Write(s.data(), s.size());
  }
  absl::StatusOr<std::string> ReadString() const {
    uint32_t n = 0;
    RETURN_IF_ERROR(Read(&n, sizeof(n)));
    std::string s(n, '\0');
    RETURN_IF_ERROR(Read(s.data(), n));
    return s;
  }
};

// One direction of a connection, as either API.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Posts a send or receive of `len` bytes; returns a slot to poll.
  virtual absl::StatusOr<void*> Post(bool send, void* buf, size_t len) = 0;
  virtual absl::StatusOr<bool> Done(void* slot) = 0;
};

class PluginEndpoint : public Endpoint {
 public:
  PluginEndpoint(const abi::NetV11* api, void* comm, bool send)
      : api_(api), comm_(comm), send_(send) {}
  ~PluginEndpoint() override { send_ ? api_->close_send(comm_) : api_->close_recv(comm_); }
  absl::StatusOr<void*> Post(bool send, void* buf, size_t len) override {
    void* req = nullptr;
    while (req == nullptr) {
      int rc;
      if (send) {
        rc = api_->isend(comm_, buf, len, 0, nullptr, nullptr, &req);
      } else {
        int tag = 0;
        rc = api_->irecv(comm_, 1, &buf, &len, &tag, nullptr, nullptr, &req);
      }
      if (rc != 0) return absl::InternalError(absl::StrCat("plugin post: ncclResult ", rc));
    }
    return req;
  }
  absl::StatusOr<bool> Done(void* slot) override {
    int done = 0, size = 0;
    int rc = api_->test(slot, &done, &size);
    if (rc != 0) return absl::InternalError(absl::StrCat("plugin test: ncclResult ", rc));
    return done != 0;
  }

 private:
  const abi::NetV11* api_;
  void* comm_;
  const bool send_;
};

class TransportEndpoint : public Endpoint {
 public:
  explicit TransportEndpoint(std::unique_ptr<transport::Connection> c) : conn_(std::move(c)) {}
  absl::StatusOr<void*> Post(bool send, void* buf, size_t len) override {
    absl::StatusOr<std::unique_ptr<transport::Request>> r =
        send ? conn_->Isend(buf, len, 0) : conn_->Irecv(buf, len, 0);
    if (!r.ok()) return r.status();
    return r->release();
  }
  absl::StatusOr<bool> Done(void* slot) override {
    auto* r = static_cast<transport::Request*>(slot);
    if (!r->Done()) return false;
    absl::Status s = r->status();
    delete r;
    if (!s.ok()) return s;
    return true;
  }

 private:
  std::unique_ptr<transport::Connection> conn_;
};

// Keeps `window` requests in flight until `iters` have completed, polling the
// oldest first (as NCCL does).
absl::Status Pump(Endpoint& ep, bool send, void* buf, size_t len, int iters, int window) {
  std::vector<void*> ring;
  int posted = 0, completed = 0;
  size_t head = 0;
  while (completed < iters) {
    while (posted < iters && posted - completed < window) {
      ASSIGN_OR_RETURN(void* slot, ep.Post(send, buf, len));
      ring.push_back(slot);
      ++posted;
    }
    ASSIGN_OR_RETURN(bool done, ep.Done(ring[head]));
    if (done) {
      ++head;
      ++completed;
    } else {
      std::this_thread::yield();  // leave the core to the progress threads
    }
  }
  return absl::OkStatus();
}

// CPU time of every thread of this process (transport progress threads too).
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Options {
  std::vector<size_t> sizes = {4096, 65536, 1 << 20, 4 << 20, 16 << 20};
  size_t bytes_per_run = 256ull << 20;
  int window = 8;
  int reps = 9;
  bool json = false;
  std::string plugin = MIXNET_NCCL_PLUGIN_PATH;
  bool no_pin = false;
  int progress_cpu = -1;  // this process's progress threads (both APIs); -1: unpinned
};

int Iters(const Options& o, size_t size) {
  return static_cast<int>(
      std::clamp<size_t>(o.bytes_per_run / std::max<size_t>(size, 1), 20, 20000));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

// Sets up both endpoints; `sender` tells which side this process is.
absl::StatusOr<std::pair<std::unique_ptr<Endpoint>, std::unique_ptr<Endpoint>>> Connect(
    const Options& o, bool sender, const Pipe& pipe) {
  // The plugin, as NCCL loads it; it reads MIXNET_PROGRESS_CPUS at its first
  // device.
  if (o.progress_cpu >= 0)
    setenv("MIXNET_PROGRESS_CPUS", std::to_string(o.progress_cpu).c_str(), 1);
  // Loopback unless told otherwise (the plugin's own default is the host's
  // first non-loopback interface); the transport side below uses the same.
  setenv("MIXNET_SOCKET_IFNAME", "lo", 0);
  void* dl = dlopen(o.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) return absl::NotFoundError(absl::StrCat("dlopen: ", dlerror()));
  auto* api = static_cast<const abi::NetV11*>(dlsym(dl, abi::kSymbolV11));
  if (api == nullptr) return absl::NotFoundError("ncclNetPlugin_v11 not exported");
  void* ctx = nullptr;
  if (api->init(&ctx, 1, nullptr, nullptr, nullptr) != 0) return absl::InternalError("init");
  std::array<char, abi::kHandleMaxSize> handle{};
  void* comm = nullptr;
  void* listen = nullptr;
  if (!sender) {
    if (api->listen(ctx, 0, handle.data(), &listen) != 0) return absl::InternalError("listen");
    RETURN_IF_ERROR(pipe.Write(handle.data(), handle.size()));
  } else {
    RETURN_IF_ERROR(pipe.Read(handle.data(), handle.size()));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (comm == nullptr) {
    int rc = sender ? api->connect(ctx, 0, handle.data(), &comm, nullptr)
                    : api->accept(listen, &comm, nullptr);
    if (rc != 0) return absl::InternalError(absl::StrCat("connect/accept: ncclResult ", rc));
    if (absl::Now() > deadline) return absl::DeadlineExceededError("plugin connect");
    if (comm == nullptr) usleep(100);
  }
  if (listen != nullptr) api->close_listen(listen);
  auto plugin = std::make_unique<PluginEndpoint>(api, comm, sender);

  // The runtime's transport directly, on the same interface.
  transport::DeviceOptions dopt = transport::DeviceOptionsFromSettings();
  dopt.ifname = "lo";
  if (const char* f = getenv("MIXNET_SOCKET_IFNAME"); f != nullptr && *f != '\0') dopt.ifname = f;
  ASSIGN_OR_RETURN(std::unique_ptr<transport::Device> device, transport::CreateDevice("tcp", dopt));
  transport::ConnectOptions c;
  c.connection_id = 77;
  c.initiator = sender;
  c.peer_name = sender ? "receiver" : "sender";
  if (sender) {
    ASSIGN_OR_RETURN(c.remote_address, pipe.ReadString());
  } else {
    RETURN_IF_ERROR(pipe.WriteString(device->address()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<transport::Connection> conn, device->Connect(c));
  if (o.progress_cpu >= 0) RETURN_IF_ERROR(device->PinProgressThread(o.progress_cpu));
  auto direct = std::make_unique<TransportEndpoint>(std::move(conn));
  device.release();  // lives until exit: the connection needs it
  return std::make_pair(std::unique_ptr<Endpoint>(std::move(plugin)),
                        std::unique_ptr<Endpoint>(std::move(direct)));
}

// Both processes walk the same plan; the sender times each run from a start
// token to the receiver's "all received" token.
absl::Status Run(const Options& o, bool sender, const Pipe& pipe) {
  ASSIGN_OR_RETURN(auto eps, Connect(o, sender, pipe));
  const size_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  std::vector<char> buf(std::max<size_t>(max_size, 1), 'x');
  if (sender && !o.json) {
    std::printf("# progress threads: %s\n",
                o.progress_cpu >= 0 ? "the sender's and the receiver's pinned to two CPUs"
                                    : "left to the scheduler");
    std::printf(
        "# medians of %d pairs (transport and plugin back to back); plugin/tr: median of the\n"
        "# pairs' ratios, then their range\n",
        o.reps);
    std::printf("%12s %8s %16s %16s %10s %15s %12s %12s %10s\n", "bytes", "iters", "transport GB/s",
                "plugin GB/s", "plugin/tr", "range", "tr cpu s/GB", "pl cpu s/GB", "cpu pl/tr");
  }
  for (size_t size : o.sizes) {
    const int iters = Iters(o, size);
    const double gbytes = static_cast<double>(size) * iters / 1e9;
    // Per pair; index 0: transport, 1: plugin.
    std::vector<double> rate[2], cpu[2], ratio;
    for (int rep = 0; rep < o.reps; ++rep) {
      double pair[2] = {0, 0};
      for (int k : {0, 1}) {
        const int which = rep % 2 == 0 ? k : 1 - k;
        Endpoint& ep = which == 1 ? *eps.first : *eps.second;
        char token = 's';
        if (sender) {
          RETURN_IF_ERROR(pipe.Read(&token, 1));  // receiver ready
          const absl::Time t0 = absl::Now();
          const double c0 = CpuSeconds();
          RETURN_IF_ERROR(Pump(ep, true, buf.data(), size, iters, o.window));
          double receiver_cpu = 0;
          RETURN_IF_ERROR(pipe.Read(&receiver_cpu, sizeof(receiver_cpu)));  // receiver done
          const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
          const double used = CpuSeconds() - c0 + receiver_cpu;
          pair[which] = gbytes / secs;
          rate[which].push_back(pair[which]);
          if (gbytes > 0) cpu[which].push_back(used / gbytes);
        } else {
          RETURN_IF_ERROR(pipe.Write(&token, 1));
          const double c0 = CpuSeconds();
          RETURN_IF_ERROR(Pump(ep, false, buf.data(), size, iters, o.window));
          const double used = CpuSeconds() - c0;
          RETURN_IF_ERROR(pipe.Write(&used, sizeof(used)));
        }
      }
      if (pair[0] > 0) ratio.push_back(pair[1] / pair[0]);
    }
    if (!sender) continue;
    const double tr = Median(rate[0]), pl = Median(rate[1]);
    const double tr_cpu = Median(cpu[0]), pl_cpu = Median(cpu[1]);
    const double r = Median(ratio);
    const double r_min = ratio.empty() ? 0 : *std::min_element(ratio.begin(), ratio.end());
    const double r_max = ratio.empty() ? 0 : *std::max_element(ratio.begin(), ratio.end());
    const double cpu_ratio = tr_cpu > 0 ? pl_cpu / tr_cpu : 0;
    if (o.json) {
      nlohmann::ordered_json j;
      j["bench"] = "nccl_plugin";
      j["bytes"] = size;
      j["iters"] = iters;
      j["window"] = o.window;
      j["pairs"] = o.reps;
      j["progress_pinned"] = o.progress_cpu >= 0;
      j["transport_gbytes_per_s"] = tr;
      j["plugin_gbytes_per_s"] = pl;
      j["plugin_over_transport"] = r;
      j["plugin_over_transport_min"] = r_min;
      j["plugin_over_transport_max"] = r_max;
      j["transport_cpu_s_per_gbyte"] = tr_cpu;
      j["plugin_cpu_s_per_gbyte"] = pl_cpu;
      j["cpu_plugin_over_transport"] = cpu_ratio;
      j["transport_runs_gbytes_per_s"] = rate[0];  // in pair order
      j["plugin_runs_gbytes_per_s"] = rate[1];
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%12zu %8d %16.3f %16.3f %10.3f %7.2f-%-7.2f %12.3f %12.3f %10.3f\n", size, iters,
                  tr, pl, r, r_min, r_max, tr_cpu, pl_cpu, cpu_ratio);
    }
    std::fflush(stdout);
  }
  // Close both ways while the peer is still there, then wait for it.
  eps.first.reset();
  eps.second.reset();
  char token = 'c';
  if (sender) return pipe.Read(&token, 1);
  return pipe.Write(&token, 1);
}

}  // namespace
}  // namespace mixnet::bench

int main(int argc, char** argv) {
  mixnet::bench::Options o;
  CLI::App app{"NCCL net plugin vs runtime transport bandwidth (loopback, two processes)"};
  app.add_option("--sizes", o.sizes, "message sizes in bytes");
  app.add_option("--bytes-per-run", o.bytes_per_run, "bytes moved per size and run (sets iters)");
  app.add_option("--window", o.window, "requests in flight (NCCL keeps 8 steps)")
      ->check(CLI::Range(1, 32));
  app.add_option("--reps", o.reps,
                 "pairs of runs (transport, plugin) per size; medians are reported")
      ->check(CLI::Range(1, 100));
  app.add_flag("--json", o.json, "one JSON object per line");
  app.add_option("--plugin", o.plugin, "path of libnccl-net-mixnet.so");
  app.add_flag("--no-pin", o.no_pin,
               "leave the progress threads to the scheduler (by default the sender's and the "
               "receiver's run on two different CPUs)");
  CLI11_PARSE(app, argc, argv);
  // Two CPUs for the two ends' progress threads. Left to the scheduler, they
  // sometimes share one CPU for seconds, and TCP over loopback then runs at a
  // third of its speed for both APIs alike (2 against 6 GB/s at 1 MiB here).
  std::vector<int> cpus;
  if (!o.no_pin) {
    absl::StatusOr<std::vector<int>> allowed = mixnet::AllowedCpus();
    if (allowed.ok()) cpus = *std::move(allowed);
  }

  // A write to an end that has exited is then an error (EPIPE), not a kill.
  signal(SIGPIPE, SIG_IGN);
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 1;
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (cpus.size() >= 2) o.progress_cpu = pid == 0 ? cpus[1] : cpus[0];
  // Each side keeps only its own ends, so a side that exits early (an error)
  // is an end of file to the other instead of a hang.
  if (pid == 0) {
    close(to_child[1]);
    close(to_parent[0]);
    mixnet::bench::Pipe p{to_child[0], to_parent[1]};
    absl::Status s = mixnet::bench::Run(o, false, p);
    if (!s.ok()) std::fprintf(stderr, "receiver: %s\n", s.ToString().c_str());
    _exit(s.ok() ? 0 : 1);
  }
  close(to_child[0]);
  close(to_parent[1]);
  mixnet::bench::Pipe p{to_parent[0], to_child[1]};
  absl::Status s = mixnet::bench::Run(o, true, p);
  if (!s.ok()) std::fprintf(stderr, "sender: %s\n", s.ToString().c_str());
  close(to_child[1]);
  int st = 0;
  waitpid(pid, &st, 0);
  _exit(s.ok() && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
}
