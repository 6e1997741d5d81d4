// The demo worker (see worker.h). Runs the training step of step.h on its
// host's rank: compute phases sleep their time; every all-to-all is an
// alltoallv with a deterministic payload, timed between barriers, every
// received byte verified, the host's NIC counters sampled around it (after
// the barrier before, after the barrier behind); on mixnet, the reports and
// plan requests go to the controller through the WorkerAgent (a row carries
// the timed call of the all-to-all it describes when that one has already
// run, step.h AlltoallTimes), and before an all-to-all with a requested
// plan the worker waits (at most plan_wait_ms) for the controller's decision
// and, when it switches, for the round to be installed: that wait is the
// time lost to reconfiguration. One JSON line per record goes to the rank's
// result file (run_config.h).
// Main thread only (the agent runs its own threads).
#include "apps/demo/worker.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/demo/counters.h"
#include "apps/demo/exchange.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/run_config.h"
#include "apps/demo/step.h"
#include "apps/demo/workload.h"
#include "nlohmann/json.hpp"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/communicator.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/common/tcp_counters.h"
#include "runtime/control/worker_agent.h"
#include "runtime/planner/lp_routing.h"
#include "runtime/rendezvous/store.h"

namespace mixnet::demo {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double UnixMs() { return absl::ToUnixMicros(absl::Now()) / 1000.0; }

class Worker {
 public:
  Worker(const RunConfig& c, int rank, Workload w) : c_(c), rank_(rank), w_(std::move(w)) {}

  absl::Status Run(bool* any_bad) {
    RETURN_IF_ERROR(SetUp());
    std::ofstream out(c_.ResultFile(rank_));
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", c_.ResultFile(rank_)));
    ASSIGN_OR_RETURN(const TcpCounters tcp0, ReadTcpCounters());
    absl::Status status;
    for (int64_t it = 0; it < c_.iterations && status.ok(); ++it) {
      status = Iteration(it, out, any_bad);
      if (!status.ok()) status = Annotate(status, absl::StrCat("iteration ", it));
    }
    if (status.ok()) status = collectives::Barrier(*comm_);
    nlohmann::json fin = {{"type", "final"},
                          {"rank", rank_},
                          {"ok", status.ok()},
                          {"epoch", comm_->installed_epoch()}};
    // This host's TCP during the timed iterations (one rank per namespace).
    if (absl::StatusOr<TcpCounters> t = ReadTcpCounters(); t.ok()) {
      fin["retransmits"] = t->retrans_segs - tcp0.retrans_segs;
      fin["tcp_opens"] = t->opens() - tcp0.opens();
      fin["tcp_resets"] = t->estab_resets - tcp0.estab_resets;
    }
    if (!warm_.is_null()) fin["warm"] = warm_;
    if (agent_) {
      const control::WorkerAgentStats s = agent_->stats();
      fin["agent"] = {{"commits", s.commits},
                      {"prepares", s.prepares},
                      {"aborts", s.aborts},
                      {"commit_errors", s.commit_errors},
                      {"prepare_timeouts", s.prepare_timeouts},
                      {"reports_sent", s.reports_sent},
                      {"reports_dropped", s.reports_dropped},
                      {"routings", s.routings},
                      {"routing_errors", s.routing_errors},
                      {"prepare_p50_ms", s.prepare_p50_ms},
                      {"prepare_p99_ms", s.prepare_p99_ms},
                      {"commit_p50_ms", s.commit_p50_ms},
                      {"commit_p99_ms", s.commit_p99_ms}};
      agent_->Follow(nullptr);
      agent_.reset();
    }
    out << fin.dump() << "\n";
    out.flush();
    return status;
  }

 private:
  absl::Status SetUp() {
    n_ = w_.hosts();
    if (rank_ < 0 || rank_ >= n_) {
      return absl::InvalidArgumentError(absl::StrCat("--rank ", rank_, " not in [0, ", n_, ")"));
    }
    const absl::Duration timeout = absl::Milliseconds(c_.timeout_ms);
    ASSIGN_OR_RETURN(store_, rendezvous::OpenStore(c_.store, rank_ == 0, timeout));
    ASSIGN_OR_RETURN(collectives::CommunicatorOptions co,
                     collectives::CommunicatorOptions::FromSettings(rank_, n_, store_.get()));
    ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(c_.spec_path));
    host_ = Workload::HostName(rank_);
    const cluster::HostSpec* me = spec.FindHost(host_);
    if (me == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(c_.spec_path, ": no host ", host_));
    }
    for (const cluster::NicSpec& nic : me->nics) nics_.push_back(nic.name);
    const std::vector<cluster::NicSpec> my_nics = me->nics;
    co.spec = std::move(spec);
    co.host = host_;
    co.router = c_.router;
    ASSIGN_OR_RETURN(const planner::RouteSolver solver, planner::ParseRouteSolver(c_.route_solver));
    co.route_function = planner::RoutingFunctionFor(solver);
    ASSIGN_OR_RETURN(comm_, collectives::Communicator::Create(std::move(co)));
    if (!c_.static_demand.empty()) {
      router::RoutingPlan plan;
      for (int h = 0; h < n_; ++h) plan.hosts.push_back(Workload::HostName(h));
      plan.bytes = c_.static_demand;
      plan.relay = c_.relay;
      RETURN_IF_ERROR(comm_->SetRouting(plan));
    }
    if (!c_.controller.empty()) {
      control::WorkerAgentOptions ao;
      ao.controller = c_.controller;
      ao.host = host_;
      ao.ranks = {rank_};
      ao.nics = my_nics;
      ao.job = "mixnet-demo";
      ASSIGN_OR_RETURN(agent_, control::WorkerAgent::Start(std::move(ao)));
      RETURN_IF_ERROR(agent_->WaitRegistered(timeout).status());
      agent_->Follow(comm_.get());
      if (c_.warm_paths) {
        // Every worker asks; the controller's sweep starts with the last.
        const control::WarmOutcome o = agent_->WarmPaths(timeout);
        if (!o.complete) {
          log::Warn("{} rank {}: warm-up sweep: {} (the steps connect what it did not)", c_.fabric,
                    rank_, o.reason);
        }
        warm_ = nlohmann::json{{"enabled", o.enabled},
                               {"complete", o.complete},
                               {"rounds", o.rounds},
                               {"waited_ms", absl::ToDoubleMilliseconds(o.waited)},
                               {"reason", o.reason}};
      }
    }
    if (rank_ == 0 && !c_.uplink_netns.empty()) {
      ASSIGN_OR_RETURN(uplinks_, RemoteLinkCounters::Open(c_.uplink_netns, c_.uplinks));
    }
    for (int h = 0; h < n_; ++h) host_names_.push_back(Workload::HostName(h));
    return collectives::Barrier(*comm_);
  }

  struct Sample {
    std::map<std::string, ByteCounters> nics, uplinks;
    CpuTimes cpu;
  };
  absl::StatusOr<Sample> Take() {
    Sample s;
    if (!c_.counters) return s;
    ASSIGN_OR_RETURN(s.nics, ReadNicCounters(nics_));
    if (uplinks_) {
      ASSIGN_OR_RETURN(s.uplinks, uplinks_->Read());
    }
    if (rank_ == 0) {
      ASSIGN_OR_RETURN(s.cpu, ReadCpuTimes());
    }
    return s;
  }

  absl::Status Iteration(int64_t it, std::ofstream& out, bool* any_bad) {
    std::map<int, std::vector<size_t>> bytes;  // D_l of this iteration, by layer
    auto matrix = [&](int layer) -> const std::vector<size_t>& {
      auto f = bytes.find(layer);
      if (f == bytes.end()) f = bytes.emplace(layer, w_.DispatchBytes(it, layer)).first;
      return f->second;
    };
    RETURN_IF_ERROR(collectives::Barrier(*comm_));
    times_.Clear();
    const Clock::time_point t_iter = Clock::now();
    double compute_ms = 0;
    int seq = 0;
    for (const StepItem& s :
         IterationSteps(it, c_.iterations, w_.layers(), c_.compute, c_.replan_combine)) {
      switch (s.kind) {
        case StepItem::Kind::kCompute: {
          const Clock::time_point t0 = Clock::now();
          std::this_thread::sleep_for(
              std::chrono::microseconds(static_cast<int64_t>(s.compute_ms * 1000)));
          compute_ms += MsSince(t0);
          break;
        }
        case StepItem::Kind::kAwaitPlan: {
          if (!agent_) break;
          const control::PlanOutcome o =
              agent_->AwaitPlan(s.plan, absl::Milliseconds(c_.plan_wait_ms));
          if (o.timed_out) {
            log::Warn("{} rank {}: {} (running on the installed topology)", c_.fabric, rank_,
                      o.reason);
          }
          out << nlohmann::json{{"type", "await"},
                                {"iteration", it},
                                {"layer", s.layer},
                                {"pass", s.pass},
                                {"combine", s.plan.combine},
                                {"waited_ms", absl::ToDoubleMilliseconds(o.waited)},
                                {"decided", o.decided},
                                {"reconfigure", o.reconfigure},
                                {"committed", o.committed},
                                {"timed_out", o.timed_out},
                                {"epoch", o.epoch},
                                {"predicted_ms", o.predicted_ms},
                                {"current_ms", o.current_ms},
                                {"reason", o.reason}}
                     .dump()
              << "\n";
          break;
        }
        case StepItem::Kind::kReport: {
          if (!agent_) break;
          const std::vector<size_t>& d = matrix(s.layer);
          control::TrafficRow row;
          row.iteration = it;
          row.key = GateKey{.layer = s.layer, .micro_batch = 0, .direction = s.direction};
          row.pass = s.pass;
          row.peer_hosts = host_names_;
          for (int j = 0; j < n_; ++j) {
            row.bytes.push_back(
                static_cast<double>(s.transpose ? d[j * n_ + rank_] : d[rank_ * n_ + j]));
          }
          if (s.has_plan) {
            row.plan = s.plan;
            if (!c_.plan_windows) row.plan->window_ms = 0;  // --plan-windows off
          }
          row.observed_ms = times_.For(s);
          agent_->Report(std::move(row));
          break;
        }
        case StepItem::Kind::kAlltoall: {
          RETURN_IF_ERROR(Annotate(Alltoall(it, seq, s, matrix(s.layer), out, any_bad), s.name));
          ++seq;
          break;
        }
      }
    }
    RETURN_IF_ERROR(collectives::Barrier(*comm_));
    const double wall_ms = MsSince(t_iter);
    out << nlohmann::json{{"type", "iteration"},
                          {"iteration", it},
                          {"wall_ms", wall_ms},
                          {"compute_ms", compute_ms}}
               .dump()
        << "\n";
    out.flush();
    if (rank_ == 0 && c_.progress) {
      std::fprintf(stderr, "# %s: iteration %ld/%ld %.0f ms\n", c_.fabric.c_str(),
                   static_cast<long>(it + 1), static_cast<long>(c_.iterations), wall_ms);
    }
    return absl::OkStatus();
  }

  absl::Status Alltoall(int64_t it, int seq, const StepItem& s, const std::vector<size_t>& d,
                        std::ofstream& out, bool* any_bad) {
    const BlockId base{
        .seed = c_.workload.seed, .iteration = it, .layer = s.layer, .direction = seq};
    PrepareExchange(d, n_, rank_, s.transpose, base, x_);
    const collectives::AlltoallvArgs a = AlltoallvArgsOf(x_);
    const uint64_t epoch = comm_->installed_epoch();
    // How this all-to-all is routed, for the simulator's replay of the run
    // (simulation.h): rank 0's view, mixnet only (the others never change).
    nlohmann::json routing;
    if (rank_ == 0 && c_.fabric == "mixnet") {
      const router::Topology topology = comm_->installed_topology();
      routing["circuits"] = nlohmann::json::array();
      for (const cluster::CircuitSpec& k : topology.circuits) {
        routing["circuits"].push_back({k.ocs_switch, k.port_a, k.port_b});
      }
      if (std::optional<router::RoutingPlan> plan = comm_->routing_plan(); plan.has_value()) {
        routing["plan"] = {{"relay", plan->relay}, {"hosts", plan->hosts}, {"bytes", plan->bytes}};
      }
    }
    RETURN_IF_ERROR(collectives::Barrier(*comm_));
    ASSIGN_OR_RETURN(const Sample before, Take());
    const Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(collectives::Alltoallv(*comm_, a));
    const double ms = MsSince(t0);
    times_.Record(s, ms);
    RETURN_IF_ERROR(collectives::Barrier(*comm_));
    ASSIGN_OR_RETURN(const Sample after, Take());
    uint64_t verified = 0, bad = 0;
    const std::vector<size_t> wrong_from = VerifyExchange(x_, n_, rank_, base);
    for (int j = 0; j < n_; ++j) {
      const size_t wrong = wrong_from[j];
      if (wrong > 0) {
        log::Error("{} bytes from rank {} wrong or missing (iteration {} {} layer {})", wrong, j,
                   it, s.name, s.layer);
        *any_bad = true;
      }
      bad += wrong;
      verified += x_.recv_counts[j] - wrong;
    }
    nlohmann::json j = {{"type", "a2a"},
                        {"iteration", it},
                        {"seq", seq},
                        {"name", s.name},
                        {"layer", s.layer},
                        {"pass", s.pass},
                        {"ms", ms},
                        {"bytes_verified", verified},
                        {"bytes_bad", bad},
                        {"epoch", epoch},
                        {"nics", CountersToJson(Delta(before.nics, after.nics))},
                        {"t_end_ms", UnixMs()}};
    if (uplinks_) j["uplinks"] = CountersToJson(Delta(before.uplinks, after.uplinks));
    if (routing.is_object()) j.update(routing);
    if (rank_ == 0) {
      j["cpu"] = {after.cpu.idle - before.cpu.idle, after.cpu.total - before.cpu.total};
    }
    out << j.dump() << "\n";
    return absl::OkStatus();
  }

  const RunConfig c_;
  const int rank_;
  const Workload w_;
  int n_ = 0;
  std::string host_;
  std::vector<std::string> nics_;
  std::vector<std::string> host_names_;
  std::unique_ptr<rendezvous::Store> store_;
  std::unique_ptr<collectives::Communicator> comm_;
  std::unique_ptr<control::WorkerAgent> agent_;
  nlohmann::json warm_;  // the warm-up sweep's outcome (null: not asked)
  std::unique_ptr<RemoteLinkCounters> uplinks_;
  Exchange x_;
  AlltoallTimes times_{w_.layers()};  // this iteration's, for the report rows
};

}  // namespace

int RunWorker(const std::string& config_path, int rank, int launcher_world) {
  absl::StatusOr<RunConfig> c = RunConfig::Load(config_path);
  if (!c.ok()) {
    std::cerr << "mixnet-demo worker: " << c.status() << "\n";
    return 2;
  }
  if (launcher_world > 0 && launcher_world != c->workload.hosts) {
    std::cerr << "mixnet-demo worker: the launcher started " << launcher_world
              << " ranks, but the run config has " << c->workload.hosts << " hosts\n";
    return 2;
  }
  log::SetProcessTag(absl::StrCat(c->fabric, " rank ", rank));
  absl::StatusOr<Workload> w = Workload::Create(c->workload);
  if (!w.ok()) {
    std::cerr << "mixnet-demo worker: " << w.status() << "\n";
    return 2;
  }
  bool any_bad = false;
  Worker worker(*c, rank, *std::move(w));
  absl::Status s = worker.Run(&any_bad);
  if (!s.ok()) {
    std::cerr << "mixnet-demo worker: " << c->fabric << " rank " << rank << ": " << s << "\n";
    RecordWorkerError(c->ResultFile(rank), rank, s);
    return 1;
  }
  return any_bad ? 3 : 0;
}

}  // namespace mixnet::demo
