// The route bench's worker (see route_worker.h). Main thread only.
#include "bench/route_bench/route_worker.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "apps/demo/counters.h"
#include "apps/demo/exchange.h"
#include "bench/route_bench/link_sampler.h"
#include "bench/route_bench/route_results.h"
#include "nlohmann/json.hpp"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/communicator.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/planner/lp_routing.h"
#include "runtime/rendezvous/store.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::bench {

std::string WorkerConfig::ToJson() const {
  return nlohmann::json{{"case", case_name},
                        {"spec", spec_path},
                        {"store_dir", store_dir},
                        {"results_dir", results_dir},
                        {"hosts", hosts},
                        {"bytes", bytes},
                        {"relay", relay},
                        {"warmup", warmup},
                        {"route_solver", route_solver},
                        {"iters", iters},
                        {"timeout_ms", timeout_ms},
                        {"seed", seed},
                        {"link_ends_us", link_ends_us}}
      .dump();
}

absl::StatusOr<WorkerConfig> WorkerConfig::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open worker config ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  WorkerConfig c;
  try {
    const nlohmann::json j = nlohmann::json::parse(ss.str());
    c.case_name = j.at("case").get<std::string>();
    c.spec_path = j.at("spec").get<std::string>();
    c.store_dir = j.at("store_dir").get<std::string>();
    c.results_dir = j.at("results_dir").get<std::string>();
    c.hosts = j.at("hosts").get<std::vector<std::string>>();
    c.bytes = j.at("bytes").get<std::vector<size_t>>();
    c.relay = j.at("relay").get<bool>();
    c.route_solver = j.value("route_solver", c.route_solver);
    c.warmup = j.at("warmup").get<int>();
    c.iters = j.at("iters").get<int>();
    c.timeout_ms = j.at("timeout_ms").get<int64_t>();
    c.seed = j.at("seed").get<uint64_t>();
    c.link_ends_us = j.value("link_ends_us", 0);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("worker config ", path, ": ", e.what()));
  }
  if (c.hosts.empty() || c.bytes.size() != c.hosts.size() * c.hosts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("worker config ", path, ": ", c.bytes.size(),
                                                   " matrix entries for ", c.hosts.size(),
                                                   " hosts"));
  }
  return c;
}

std::string WorkerConfig::ResultFile(int rank) const {
  return absl::StrCat(results_dir, "/rank", rank, ".jsonl");
}

namespace {

using Clock = std::chrono::steady_clock;

class RouteWorker {
 public:
  RouteWorker(WorkerConfig c, int rank) : c_(std::move(c)), rank_(rank) {}

  absl::Status Run(bool* any_bad) {
    RETURN_IF_ERROR(SetUp());
    std::ofstream out(c_.ResultFile(rank_));
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", c_.ResultFile(rank_)));
    const demo::BlockId base{.seed = c_.seed};
    demo::PrepareExchange(c_.bytes, n_, rank_, false, base, x_);
    const collectives::AlltoallvArgs a = demo::AlltoallvArgsOf(x_);
    for (int it = 0; it < c_.warmup + c_.iters; ++it) {
      // Each router twice in a row, v1's pair first: the first call of a
      // pair finds the router's connections idle since its previous pair
      // (the other router's two calls, longer than TCP's RTO, so the kernel
      // restarts their windows: "cold"); the second finds them used a barrier
      // ago, as a training job's communicator is between its all-to-alls
      // ("warm"). The fluid model describes the warm calls. (Alternating the
      // pairs' order would put four calls of one router in a row.)
      for (int k = 0; k < 4; ++k) {
        const bool v2 = k >= 2;
        const bool warm = k % 2 == 1;
        collectives::Communicator& comm = v2 ? *v2_ : *v1_;
        demo::PoisonReceive(x_);
        RETURN_IF_ERROR(collectives::Barrier(comm));
        ASSIGN_OR_RETURN(const auto nics0, demo::ReadNicCounters(nics_));
        ASSIGN_OR_RETURN(const uint64_t re0, demo::ReadTcpRetransmits());
        ASSIGN_OR_RETURN(const demo::CpuTimes cpu0, demo::ReadCpuTimes());
        std::unique_ptr<LinkSampler> sampler;
        if (c_.link_ends_us > 0) {
          sampler =
              std::make_unique<LinkSampler>(nics_, std::chrono::microseconds(c_.link_ends_us));
          RETURN_IF_ERROR(sampler->Start());
        }
        const Clock::time_point t0 = Clock::now();
        RETURN_IF_ERROR(Annotate(collectives::Alltoallv(comm, a),
                                 absl::StrCat(comm.router(), " iteration ", it)));
        RankRecord r;
        r.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        RETURN_IF_ERROR(collectives::Barrier(comm));
        if (sampler) {  // after the barrier: every rank's bytes have moved
          ASSIGN_OR_RETURN(r.link_ends, sampler->Stop());
        }
        ASSIGN_OR_RETURN(const auto nics1, demo::ReadNicCounters(nics_));
        ASSIGN_OR_RETURN(const uint64_t re1, demo::ReadTcpRetransmits());
        ASSIGN_OR_RETURN(const demo::CpuTimes cpu1, demo::ReadCpuTimes());
        r.rank = rank_;
        r.router = comm.router();
        r.iteration = it;
        r.warm = warm;
        r.nics = demo::Delta(nics0, nics1);
        r.retransmits = re1 - re0;
        if (rank_ == 0) {  // the machine's CPUs: once is enough
          r.cpu_idle = cpu1.idle - cpu0.idle;
          r.cpu_total = cpu1.total - cpu0.total;
        }
        const std::vector<size_t> wrong = demo::VerifyExchange(x_, n_, rank_, base);
        for (int j = 0; j < n_; ++j) {
          if (wrong[j] == 0) continue;
          log::Error("{} bytes from rank {} wrong or missing ({} iteration {}, {} call)", wrong[j],
                     j, r.router, it, warm ? "warm" : "cold");
          r.bytes_bad += wrong[j];
          *any_bad = true;
        }
        out << RecordToJson(r).dump() << "\n";
      }
    }
    RETURN_IF_ERROR(collectives::Barrier(*v1_));
    RETURN_IF_ERROR(collectives::Barrier(*v2_));
    nlohmann::json fin = {{"type", "final"}, {"rank", rank_}};
    for (int j = 0; j < n_; ++j) fin["eps_share"].push_back(v2_->eps_share(j));
    out << fin.dump() << "\n";
    out.flush();
    if (!out) return absl::InternalError(absl::StrCat("writing ", c_.ResultFile(rank_), " failed"));
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<std::unique_ptr<collectives::Communicator>> Join(
      const std::string& router, const cluster::ClusterSpec& spec) {
    const absl::Duration timeout = absl::Milliseconds(c_.timeout_ms);
    std::unique_ptr<rendezvous::Store>& store = router == "v1" ? store_v1_ : store_v2_;
    ASSIGN_OR_RETURN(store, rendezvous::OpenStore(absl::StrCat("file:", c_.store_dir, "/", router),
                                                  rank_ == 0, timeout));
    ASSIGN_OR_RETURN(collectives::CommunicatorOptions co,
                     collectives::CommunicatorOptions::FromSettings(rank_, n_, store.get()));
    co.spec = spec;
    co.host = c_.hosts[rank_];
    co.router = router;
    ASSIGN_OR_RETURN(const planner::RouteSolver solver, planner::ParseRouteSolver(c_.route_solver));
    co.route_function = planner::RoutingFunctionFor(solver);
    co.timeout = timeout;
    co.connect_timeout = timeout;
    return collectives::Communicator::Create(std::move(co));
  }

  absl::Status SetUp() {
    n_ = static_cast<int>(c_.hosts.size());
    if (rank_ < 0 || rank_ >= n_) {
      return absl::InvalidArgumentError(absl::StrCat("--rank ", rank_, " not in [0, ", n_, ")"));
    }
    ASSIGN_OR_RETURN(const cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(c_.spec_path));
    const cluster::HostSpec* me = spec.FindHost(c_.hosts[rank_]);
    if (me == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(c_.spec_path, ": no host ", c_.hosts[rank_]));
    }
    for (const cluster::NicSpec& nic : me->nics) nics_.push_back(nic.name);
    ASSIGN_OR_RETURN(v1_, Join("v1", spec));
    ASSIGN_OR_RETURN(v2_, Join("v2", spec));
    router::RoutingPlan plan;
    plan.relay = c_.relay;
    plan.hosts = c_.hosts;
    plan.bytes.assign(c_.bytes.begin(), c_.bytes.end());
    return Annotate(v2_->SetRouting(plan), "router v2 plan");
  }

  const WorkerConfig c_;
  const int rank_;
  int n_ = 0;
  std::vector<std::string> nics_;
  std::unique_ptr<rendezvous::Store> store_v1_, store_v2_;
  std::unique_ptr<collectives::Communicator> v1_, v2_;
  demo::Exchange x_;
};

}  // namespace

int RunRouteWorker(const std::string& config_path, int rank) {
  absl::StatusOr<WorkerConfig> c = WorkerConfig::Load(config_path);
  if (!c.ok()) {
    std::cerr << "mixnet_route_bench worker: " << c.status() << "\n";
    return 2;
  }
  log::SetProcessTag(absl::StrCat(c->case_name, " rank ", rank));
  const std::string name = c->case_name;
  bool any_bad = false;
  RouteWorker w(*std::move(c), rank);
  if (absl::Status s = w.Run(&any_bad); !s.ok()) {
    std::cerr << "mixnet_route_bench worker: case " << name << " rank " << rank << ": " << s
              << "\n";
    return 1;
  }
  return any_bad ? 3 : 0;
}

}  // namespace mixnet::bench
