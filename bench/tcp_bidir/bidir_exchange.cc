// The two-host bidirectional exchange of bidir_exchange.h: device set-up in
// the host namespaces, the timed exchange with a NIC-counter sampler, and the
// result (floor, start times, overlap, retransmissions). Runs on the caller's
// thread plus the helper threads it joins (see the header).
#include "bench/tcp_bidir/bidir_exchange.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/status.h"
#include "runtime/common/tcp_counters.h"

namespace mixnet::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kHosts[2] = {"h0", "h1"};
constexpr int kTag = 7;
constexpr auto kSamplePeriod = std::chrono::milliseconds(5);

std::string HostIp(const std::string& link, int host) {
  return absl::StrCat(link == "circuit" ? "10.32.0." : "10.31.0.", host + 1);
}

void Fill(std::vector<char>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
}

absl::StatusOr<uint64_t> HostRetransSegs(const std::string& ns) {
  uint64_t n = 0;
  RETURN_IF_ERROR(netns::RunInNamespace(ns, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const TcpCounters c, ReadTcpCounters());
    n = c.retrans_segs;
    return absl::OkStatus();
  }));
  return n;
}

struct Sample {
  double t;
  uint64_t tx[2];  // tx bytes of h0's and h1's NIC
};

}  // namespace

std::string BidirSpecYaml(double gbps) {
  const std::string g = absl::StrFormat("%g", gbps);
  return absl::StrCat(R"(name: bidir
ocs_switches:
  - {name: ocs0, ports: 2, switch_ms: 10}
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 10.31.0.1/24, gbps: )",
                      g, R"(}
      - {name: ocs0, role: ocs, address: 10.32.0.1/24, gbps: )",
                      g, R"(, switch: ocs0, port: 1}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 10.31.0.2/24, gbps: )",
                      g, R"(}
      - {name: ocs0, role: ocs, address: 10.32.0.2/24, gbps: )",
                      g, R"(, switch: ocs0, port: 2}
regions:
  - {name: r0, hosts: [h0, h1]}
circuits:
  - {switch: ocs0, ports: [1, 2]}
)");
}

std::string AllowedCongestionControl() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  std::string name;
  while (in >> name) {
    if (name == "cubic") return name;
  }
  return "reno";
}

absl::StatusOr<std::unique_ptr<BidirFabric>> BidirFabric::Up(double gbps, const std::string& prefix,
                                                             const std::string& congestion) {
  if (!(gbps > 0)) return absl::InvalidArgumentError(absl::StrCat("bad link rate ", gbps));
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec,
                   cluster::ClusterSpec::Parse(BidirSpecYaml(gbps), "bidir spec"));
  emulation::EmulationOptions eo;
  eo.tcp_congestion = congestion;
  ASSIGN_OR_RETURN(std::unique_ptr<emulation::EmulatedFabric> fabric,
                   emulation::EmulatedFabric::Up(spec, prefix, eo));
  return std::unique_ptr<BidirFabric>(new BidirFabric(gbps, std::move(fabric)));
}

BidirFabric::~BidirFabric() = default;  // the EmulatedFabric tears itself down

absl::Status BidirFabric::Down() { return fabric_->Down(); }

absl::StatusOr<BidirResult> BidirFabric::Exchange(const BidirOptions& o) {
  if (o.link != "eps" && o.link != "circuit") {
    return absl::InvalidArgumentError(absl::StrCat("link '", o.link, "': eps or circuit"));
  }
  const std::string nic = o.link == "circuit" ? "ocs0" : "eps0";
  std::string ns[2];
  std::unique_ptr<transport::Device> dev[2];
  std::unique_ptr<transport::Connection> conn[2];
  for (int i = 0; i < 2; ++i) {
    ns[i] = fabric_->HostNamespace(kHosts[i]);
    transport::DeviceOptions d;
    d.ifname = nic;
    d.bind_address = HostIp(o.link, i);
    d.sockets_per_connection = o.sockets_per_connection;
    d.eager_bytes = o.eager_bytes;
    d.chunk_bytes = o.chunk_bytes;
    RETURN_IF_ERROR(netns::RunInNamespace(ns[i], [&]() -> absl::Status {
      ASSIGN_OR_RETURN(dev[i], transport::CreateDevice("tcp", d));
      return absl::OkStatus();
    }));
  }
  // Both ends connect at once (h0 dials), each inside its namespace.
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id.fetch_add(1);
  absl::Status cs[2];
  {
    std::vector<std::thread> t;
    for (int i = 0; i < 2; ++i) {
      t.emplace_back([&, i] {
        cs[i] = netns::RunInNamespace(ns[i], [&]() -> absl::Status {
          transport::ConnectOptions c;
          c.remote_address = dev[1 - i]->address();
          c.connection_id = id;
          c.initiator = i == 0;
          c.peer_name = kHosts[1 - i];
          c.timeout = o.timeout;
          ASSIGN_OR_RETURN(conn[i], dev[i]->Connect(c));
          return absl::OkStatus();
        });
      });
    }
    for (auto& th : t) th.join();
  }
  for (const absl::Status& s : cs) RETURN_IF_ERROR(s);

  std::vector<char> send[2], recv[2];
  for (int i = 0; i < 2; ++i) {
    send[i].resize(o.bytes);
    recv[i].assign(o.bytes, 0);
    Fill(send[i], 11 + i);
  }
  uint64_t retrans0 = 0;
  for (const std::string& n : ns) {
    ASSIGN_OR_RETURN(uint64_t r, HostRetransSegs(n));
    retrans0 += r;
  }
  uint64_t tx0[2];
  for (int i = 0; i < 2; ++i) {
    ASSIGN_OR_RETURN(emulation::LinkCounters c, fabric_->ReadCounters(kHosts[i], nic));
    tx0[i] = c.tx_bytes;
  }

  // h0 posts at t0, h1 at t0 + skew; each posts its receive, then its send.
  const Clock::time_point t0 = Clock::now() + std::chrono::milliseconds(20);
  auto since = [t0](Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); };
  std::atomic<int> running{2};
  absl::Status hs[2];
  double done[2] = {0, 0};
  std::vector<std::thread> hosts;
  for (int i = 0; i < 2; ++i) {
    hosts.emplace_back([&, i] {
      std::this_thread::sleep_until(
          t0 + (i == 1 ? absl::ToChronoNanoseconds(o.skew) : std::chrono::nanoseconds(0)));
      hs[i] = [&]() -> absl::Status {
        ASSIGN_OR_RETURN(auto r, conn[i]->Irecv(recv[i].data(), o.bytes, kTag));
        ASSIGN_OR_RETURN(auto s, conn[i]->Isend(send[i].data(), o.bytes, kTag));
        RETURN_IF_ERROR(r->Wait(o.timeout));
        done[i] = since(Clock::now());
        RETURN_IF_ERROR(s->Wait(o.timeout));
        if (r->bytes() != o.bytes) {
          return absl::DataLossError(
              absl::StrCat(kHosts[i], " received ", r->bytes(), " of ", o.bytes, " bytes"));
        }
        return absl::OkStatus();
      }();
      running.fetch_sub(1);
    });
  }
  std::vector<Sample> samples;
  absl::Status sampler_status;
  std::thread sampler([&] {
    std::this_thread::sleep_until(t0);
    while (running.load() > 0) {
      Sample s;
      s.t = since(Clock::now());
      for (int i = 0; i < 2; ++i) {
        absl::StatusOr<emulation::LinkCounters> c = fabric_->ReadCounters(kHosts[i], nic);
        if (!c.ok()) {
          sampler_status = c.status();
          return;
        }
        s.tx[i] = c->tx_bytes - tx0[i];
      }
      samples.push_back(s);
      std::this_thread::sleep_for(kSamplePeriod);
    }
  });
  for (auto& t : hosts) t.join();
  sampler.join();
  conn[0].reset();
  conn[1].reset();
  for (int i = 0; i < 2; ++i) {
    RETURN_IF_ERROR(hs[i]);
  }
  RETURN_IF_ERROR(sampler_status);
  for (int i = 0; i < 2; ++i) {
    if (std::memcmp(recv[i].data(), send[1 - i].data(), o.bytes) != 0) {
      return absl::DataLossError(
          absl::StrCat(kHosts[i], " received corrupted bytes from ", kHosts[1 - i]));
    }
  }

  BidirResult r;
  r.done_s[0] = done[0];
  r.done_s[1] = done[1];
  r.seconds = std::max(done[0], done[1]);
  for (int i = 0; i < 2; ++i) {
    ASSIGN_OR_RETURN(emulation::LinkCounters c, fabric_->ReadCounters(kHosts[i], nic));
    // Direction towards host i leaves through the other host's NIC.
    r.nic_bytes[1 - i] = c.tx_bytes - tx0[i];
  }
  r.floor_seconds = std::max(r.nic_bytes[0], r.nic_bytes[1]) / rate_bytes_per_s();
  for (int d = 0; d < 2; ++d) {
    const int sender = 1 - d;  // towards h<d>: h<1-d>'s NIC
    const double want = 0.05 * static_cast<double>(r.nic_bytes[d]);
    r.start_s[d] = r.seconds;
    for (const Sample& s : samples) {
      if (static_cast<double>(s.tx[sender]) >= want) {
        r.start_s[d] = s.t;
        break;
      }
    }
  }
  const int first = done[0] <= done[1] ? 0 : 1;  // the direction that finished first
  const int slow = 1 - first;
  const int slow_sender = 1 - slow;
  uint64_t crossed = 0;
  for (const Sample& s : samples) {
    if (s.t > done[first]) break;
    crossed = s.tx[slow_sender];
  }
  r.overlap = r.nic_bytes[slow] > 0 ? static_cast<double>(crossed) / r.nic_bytes[slow] : 0;
  uint64_t retrans1 = 0;
  for (const std::string& n : ns) {
    ASSIGN_OR_RETURN(uint64_t x, HostRetransSegs(n));
    retrans1 += x;
  }
  r.retransmits = retrans1 - retrans0;
  return r;
}

}  // namespace mixnet::bench
