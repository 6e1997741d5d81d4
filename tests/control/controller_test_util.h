// Helpers for the controller tests: a cluster spec generator, in-process
// sim OCS daemons (the real OcsDriver service on unix sockets), an in-process
// controller server, FakeSwitch (a SwitchDriver in memory that fails on
// demand), and FakeWorker (a plain gRPC client of
// mixnet.control.v1 that records topology events and, unless told not to,
// acks PREPARE and COMMIT). Header-only; the test thread plus one watch
// reader thread per FakeWorker.
#pragma once

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "mixnet/control/v1/controller.grpc.pb.h"
#include "ocs_driver/client/ocs_client.h"
#include "ocs_driver/client/ocs_switch_driver.h"
#include "ocs_driver/service/daemon.h"
#include "ocs_driver/service/state_store.h"
#include "ocs_driver/sim/sim_backend.h"
#include "runtime/common/status.h"
#include "runtime/control/controller.h"
#include "runtime/control/controller_service.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::testing {

namespace cv1 = ::mixnet::control::v1;
using Pairs = std::vector<std::pair<int, int>>;

// One region: `hosts` hosts named "<prefix>0".., one OCS NIC each, on
// `ocs_switch` ports first_port, first_port+1, ...
struct RegionDef {
  std::string name;
  std::string prefix;
  int hosts = 4;
  std::string ocs_switch = "ocs0";
  int first_port = 1;
};

inline std::string MakeSpecYaml(const std::vector<RegionDef>& regions,
                                const std::vector<std::string>& switches, int ports = 16,
                                double switch_ms = 1) {
  std::string y = "name: ctltest\nocs_switches:\n";
  for (const std::string& s : switches) {
    absl::StrAppend(&y, "  - {name: ", s, ", ports: ", ports, ", switch_ms: ", switch_ms, "}\n");
  }
  y += "hosts:\n";
  int n = 0;
  for (const RegionDef& r : regions) {
    for (int i = 0; i < r.hosts; ++i, ++n) {
      absl::StrAppend(&y, "  - name: ", r.prefix, i, "\n    nics:\n",
                      "      - {name: eps0, role: eps, address: 10.10.0.", n + 1,
                      "/16, gbps: 0.1}\n", "      - {name: ocs0, role: ocs, address: 10.20.0.",
                      n + 1, "/16, gbps: 100, switch: ", r.ocs_switch, ", port: ", r.first_port + i,
                      "}\n");
    }
  }
  y += "regions:\n";
  for (const RegionDef& r : regions) {
    absl::StrAppend(&y, "  - {name: ", r.name, ", hosts: [");
    for (int i = 0; i < r.hosts; ++i) absl::StrAppend(&y, i ? ", " : "", r.prefix, i);
    y += "]}\n";
  }
  return y;
}

// An in-process mixnet-ocsd with the sim backend on unix:<dir>/<name>.sock.
struct SimSwitch {
  std::string name;
  std::string address;
  std::unique_ptr<ocs::Daemon> daemon;
};

inline absl::StatusOr<SimSwitch> StartSimSwitch(const std::string& dir, const std::string& name,
                                                int ports = 16,
                                                absl::Duration switching = absl::Milliseconds(1)) {
  ocs::SimOptions so;
  so.ports = ports;
  so.switching_time = switching;
  ASSIGN_OR_RETURN(std::unique_ptr<ocs::OcsBackend> backend, ocs::OpenSimBackend(so));
  ASSIGN_OR_RETURN(ocs::StateStore store, ocs::StateStore::Open(dir + "/ocsd-" + name));
  ocs::DaemonOptions o;
  o.listen = absl::StrCat("unix:", dir, "/", name, ".sock");
  ASSIGN_OR_RETURN(std::unique_ptr<ocs::Daemon> d,
                   ocs::Daemon::Start(std::move(backend), std::move(store), o));
  SimSwitch s{name, d->address(), std::move(d)};
  return s;
}

// The switch's actual circuits and its epoch (GetCrossConnects).
inline absl::StatusOr<std::pair<Pairs, uint64_t>> ReadSwitch(const std::string& address) {
  ocs::OcsClientOptions o;
  o.target = address;
  ASSIGN_OR_RETURN(std::unique_ptr<ocs::OcsClient> c, ocs::OcsClient::Create(o));
  ASSIGN_OR_RETURN(ocs::v1::GetCrossConnectsResponse r, c->GetCrossConnects());
  Pairs p;
  for (const auto& x : r.actual()) p.emplace_back(x.port_a(), x.port_b());
  return std::make_pair(p, r.epoch());
}

struct ControllerSetup {
  std::string spec_yaml;
  std::map<std::string, std::string> switches;  // name -> address
  std::string state_dir;
  std::string listen;
  std::string predictor = "last";
  std::string router = "v1";
  bool relay = false;
  absl::Duration prepare_deadline = absl::Seconds(2);
  absl::Duration commit_deadline = absl::Seconds(2);
  absl::Duration report_timeout = absl::Seconds(2);
  std::string metrics_listen;  // ServerOptions::metrics_listen (empty: no metrics endpoint)
  uint64_t epoch_block = 1;    // ControllerOptions::epoch_block (1: every round persists)
  bool warm_paths = true;      // ControllerOptions::warm_paths
  TlsServerOptions tls;        // ServerOptions::tls (none: plaintext)
  std::vector<std::string> metrics_allow_clients;  // ServerOptions::metrics_allow_clients
  // Drivers used instead of OcsSwitchDrivers to `switches` (fakes).
  std::map<std::string, std::shared_ptr<control::SwitchDriver>> drivers;
};

inline absl::StatusOr<std::unique_ptr<control::ControllerServer>> StartController(
    const ControllerSetup& s) {
  control::ControllerOptions o;
  ASSIGN_OR_RETURN(o.spec, cluster::ClusterSpec::Parse(s.spec_yaml, "test-spec"));
  o.state_dir = s.state_dir;
  o.predictor = s.predictor;
  o.router = s.router;
  o.relay = s.relay;
  o.prepare_deadline = s.prepare_deadline;
  o.commit_deadline = s.commit_deadline;
  o.report_timeout = s.report_timeout;
  o.epoch_block = s.epoch_block;
  o.warm_paths = s.warm_paths;
  o.switch_timeout = absl::Seconds(5);
  // Each controller its own id, as each mixnet-controller process has: a
  // switch lets only the id that applied an epoch apply it again.
  static std::atomic<int> started{0};
  o.controller_id = absl::StrCat("ctl-test-", ++started);
  for (const auto& [name, addr] : s.switches) {
    ocs::OcsClientOptions co;
    co.target = addr;
    ASSIGN_OR_RETURN(auto d, ocs::OcsSwitchDriver::Create(co, o.controller_id));
    o.switches[name] = std::move(d);
  }
  for (const auto& [name, d] : s.drivers) o.switches[name] = d;
  ASSIGN_OR_RETURN(std::unique_ptr<control::Controller> c,
                   control::Controller::Start(std::move(o)));
  control::ServerOptions so;
  so.listen = s.listen;
  so.metrics_listen = s.metrics_listen;
  so.tls = s.tls;
  so.metrics_allow_clients = s.metrics_allow_clients;
  return control::ControllerServer::Start(std::move(c), so);
}

inline std::shared_ptr<grpc::Channel> Connect(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

// One report stream with one row: `host` sends bytes[i] to peers[i].
inline grpc::Status SendReport(cv1::Controller::Stub& stub, const std::string& worker,
                               const std::string& host, int64_t iteration, int layer,
                               const std::vector<std::string>& peers,
                               const std::vector<double>& bytes, cv1::Direction dir = cv1::DISPATCH,
                               double observed_ms = 0) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  cv1::ReportTrafficResponse resp;
  auto writer = stub.ReportTraffic(&ctx, &resp);
  cv1::TrafficReport r;
  r.set_worker_id(worker);
  r.set_host(host);
  r.set_iteration(iteration);
  r.set_layer(layer);
  r.set_direction(dir);
  for (const std::string& p : peers) r.add_peer_hosts(p);
  for (double b : bytes) r.add_bytes(b);
  r.set_observed_ms(observed_ms);
  writer->Write(r);
  writer->WritesDone();
  return writer->Finish();
}

// The rows of a region whose host pairs `pairs` (indices) exchange `heavy`
// bytes and every other pair `light`.
inline std::vector<double> Row(int n, int src, const Pairs& pairs, double heavy = 1e8,
                               double light = 1e5) {
  std::vector<double> row(n, light);
  row[src] = 0;
  for (const auto& [a, b] : pairs) {
    if (a == src) row[b] = heavy;
    if (b == src) row[a] = heavy;
  }
  return row;
}

// A SwitchDriver in memory that can be told to fail its next Applies; it
// keeps every Apply it accepted (epoch, config version, circuits).
class FakeSwitch final : public control::SwitchDriver {
 public:
  struct Applied {
    uint64_t epoch = 0;
    uint64_t version = 0;
    Pairs circuits;
  };
  std::string target() const override { return "fake"; }
  absl::StatusOr<control::SwitchCircuits> GetCircuits(absl::Time) override {
    absl::MutexLock lock(&mu_);
    return control::SwitchCircuits{circuits_, epoch_, version_, {}};
  }
  absl::StatusOr<control::SwitchApplyResult> Apply(uint64_t epoch, uint64_t version,
                                                   const std::vector<control::PortPair>& circuits,
                                                   absl::Time) override {
    absl::MutexLock lock(&mu_);
    ++applies_;
    if (fails_left_ > 0) {
      --fails_left_;
      return fail_;
    }
    circuits_ = circuits;
    epoch_ = epoch;
    version_ = version;
    accepted_.push_back({epoch, version, circuits});
    return control::SwitchApplyResult{epoch, absl::ZeroDuration(), circuits, false};
  }
  // The next `times` Applies fail with `s` (and change nothing).
  void FailNext(absl::Status s, int times = 1) {
    absl::MutexLock lock(&mu_);
    fail_ = std::move(s);
    fails_left_ = times;
  }
  int applies() {
    absl::MutexLock lock(&mu_);
    return applies_;
  }
  // What it holds, and the epoch of the Apply that set it.
  std::pair<Pairs, uint64_t> state() {
    absl::MutexLock lock(&mu_);
    return {circuits_, epoch_};
  }
  std::vector<Applied> accepted() {
    absl::MutexLock lock(&mu_);
    return accepted_;
  }

 private:
  absl::Mutex mu_;
  Pairs circuits_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int applies_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
  int fails_left_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Applied> accepted_ ABSL_GUARDED_BY(mu_);
};

class FakeWorker {
 public:
  FakeWorker(std::shared_ptr<grpc::Channel> channel, std::string id, std::string host)
      : stub_(cv1::Controller::NewStub(channel)), id_(std::move(id)), host_(std::move(host)) {}
  ~FakeWorker() { StopWatch(); }

  const std::string& id() const { return id_; }
  const std::string& host() const { return host_; }
  cv1::Controller::Stub& stub() { return *stub_; }

  grpc::Status Register(cv1::RegisterResponse* out = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    cv1::RegisterRequest req;
    req.set_worker_id(id_);
    req.set_host(host_);
    cv1::RegisterResponse resp;
    grpc::Status s = stub_->Register(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }

  // Starts the watch stream; events are queued (and acked when auto_ack).
  void StartWatch() {
    ctx_ = std::make_unique<grpc::ClientContext>();
    reader_ = std::thread([this] {
      cv1::WatchTopologyRequest req;
      req.set_worker_id(id_);
      auto stream = stub_->WatchTopology(ctx_.get(), req);
      cv1::TopologyEvent ev;
      while (stream->Read(&ev)) {
        if (auto_ack()) {
          if (ev.kind() == cv1::TopologyEvent::PREPARE) Ack(ev.topology().epoch(), true);
          if (ev.kind() == cv1::TopologyEvent::COMMIT) Ack(ev.topology().epoch(), false);
        }
        absl::MutexLock lock(&mu_);
        events_.push_back(ev);
      }
      grpc::Status s = stream->Finish();
      absl::MutexLock lock(&mu_);
      ended_ = true;
    });
  }
  void StopWatch() {
    if (ctx_) ctx_->TryCancel();
    if (reader_.joinable()) reader_.join();
  }

  void set_auto_ack(bool on) {
    absl::MutexLock lock(&mu_);
    auto_ack_ = on;
  }
  bool auto_ack() {
    absl::MutexLock lock(&mu_);
    return auto_ack_;
  }

  grpc::Status Ack(uint64_t epoch, bool prepared, int error_code = 0) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    cv1::AckTopologyRequest req;
    req.set_worker_id(id_);
    req.set_epoch(epoch);
    req.set_phase(prepared ? cv1::AckTopologyRequest::PREPARED
                           : cv1::AckTopologyRequest::COMMITTED);
    if (error_code != 0) {
      req.set_error_code(error_code);
      req.set_error_message("test error");
    }
    cv1::AckTopologyResponse resp;
    return stub_->AckTopology(&ctx, req, &resp);
  }

  // The next event (in order), waiting up to `timeout`.
  std::optional<cv1::TopologyEvent> Next(absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return std::nullopt;
    cv1::TopologyEvent ev = events_.front();
    events_.pop_front();
    return ev;
  }
  size_t queued() {
    absl::MutexLock lock(&mu_);
    return events_.size();
  }
  bool ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }

 private:
  std::unique_ptr<cv1::Controller::Stub> stub_;
  const std::string id_;
  const std::string host_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::thread reader_;
  absl::Mutex mu_;
  std::deque<cv1::TopologyEvent> events_ ABSL_GUARDED_BY(mu_);
  bool auto_ack_ ABSL_GUARDED_BY(mu_) = true;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// Polls `cond` every 5 ms until it holds or `timeout` passes.
template <typename Cond>
bool WaitUntil(Cond cond, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

inline Pairs CircuitPairs(const cv1::Topology& t) {
  Pairs p;
  for (const cv1::Circuit& c : t.circuits()) p.emplace_back(c.port_a(), c.port_b());
  std::sort(p.begin(), p.end());
  return p;
}

inline cv1::ControllerStatus Status(cv1::Controller::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  cv1::ControllerStatus st;
  stub.GetStatus(&ctx, cv1::GetStatusRequest(), &st);
  return st;
}

}  // namespace mixnet::testing
