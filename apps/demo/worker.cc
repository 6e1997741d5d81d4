// The demo worker (see worker.h). Per iteration and layer:
//   sleep compute-ms (the simulated expert compute; the window that hides a
//   reconfiguration); barrier; timed dispatch alltoallv with a deterministic
//   payload, every received byte verified; barrier; the combine (transpose)
//   likewise; then (mixnet) the layer's traffic row goes to the controller, so
//   its round for the next layer runs during that layer's compute window.
// One JSON line per (iteration, layer) goes to the rank's result file, and a
// final line with the WorkerAgent's counters.
#include "apps/demo/worker.h"

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/demo/run_config.h"
#include "apps/demo/workload.h"
#include "nlohmann/json.hpp"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/communicator.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/control/worker_agent.h"
#include "runtime/rendezvous/store.h"

namespace mixnet::demo {
namespace {

constexpr uint8_t kPoison = 0xA5;

struct Exchange {
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<uint8_t> send, recv;
};

// Lays out one all-to-all of `dir` (0 dispatch, 1 combine) for `rank` from the
// H x H dispatch byte matrix and fills the send blocks.
void Prepare(const std::vector<size_t>& bytes, int n, int rank, int dir, const BlockId& base,
             Exchange& x) {
  x.send_counts.assign(n, 0);
  x.recv_counts.assign(n, 0);
  x.send_displs.assign(n, 0);
  x.recv_displs.assign(n, 0);
  size_t s = 0, r = 0;
  for (int j = 0; j < n; ++j) {
    const size_t out = dir == 0 ? bytes[rank * n + j] : bytes[j * n + rank];
    const size_t in = dir == 0 ? bytes[j * n + rank] : bytes[rank * n + j];
    x.send_counts[j] = out;
    x.send_displs[j] = s;
    x.recv_counts[j] = in;
    x.recv_displs[j] = r;
    s += out;
    r += in;
  }
  x.send.resize(s);
  x.recv.assign(r, kPoison);
  for (int j = 0; j < n; ++j) {
    BlockId id = base;
    id.direction = dir;
    id.src = rank;
    id.dst = j;
    FillBlock(id, x.send.data() + x.send_displs[j], x.send_counts[j]);
  }
}

// Times one alltoallv; adds verified / bad bytes.
absl::Status RunExchange(collectives::Communicator& comm, Exchange& x, const BlockId& base, int dir,
                         double* ms, uint64_t* verified, uint64_t* bad) {
  RETURN_IF_ERROR(collectives::Barrier(comm));
  collectives::AlltoallvArgs a;
  a.send = x.send.data();
  a.send_bytes = x.send.size();
  a.send_counts = x.send_counts;
  a.send_displs = x.send_displs;
  a.recv = x.recv.data();
  a.recv_bytes = x.recv.size();
  a.recv_counts = x.recv_counts;
  a.recv_displs = x.recv_displs;
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(collectives::Alltoallv(comm, a));
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int j = 0; j < comm.size(); ++j) {
    BlockId id = base;
    id.direction = dir;
    id.src = j;
    id.dst = comm.rank();
    const size_t wrong = VerifyBlock(id, x.recv.data() + x.recv_displs[j], x.recv_counts[j]);
    if (wrong > 0) {
      log::Error("{} bytes from rank {} wrong or missing (iteration {} layer {} {})", wrong, j,
                 base.iteration, base.layer, dir == 0 ? "dispatch" : "combine");
    }
    *bad += wrong;
    *verified += x.recv_counts[j] - wrong;
  }
  return absl::OkStatus();
}

uint64_t InstalledEpoch(const collectives::Communicator& comm) { return comm.installed_epoch(); }

absl::Status Run(const RunConfig& c, int rank, bool* any_bad) {
  log::SetProcessTag(absl::StrCat(c.fabric, " rank ", rank));
  ASSIGN_OR_RETURN(Workload w, Workload::Create(c.workload));
  const int n = w.hosts();
  if (rank < 0 || rank >= n)
    return absl::InvalidArgumentError(absl::StrCat("--rank ", rank, " not in [0, ", n, ")"));
  const absl::Duration timeout = absl::Milliseconds(c.timeout_ms);
  ASSIGN_OR_RETURN(auto store, rendezvous::OpenStore(c.store, rank == 0, timeout));
  ASSIGN_OR_RETURN(collectives::CommunicatorOptions co,
                   collectives::CommunicatorOptions::FromSettings(rank, n, store.get()));
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(c.spec_path));
  const std::string host = Workload::HostName(rank);
  const cluster::HostSpec* me = spec.FindHost(host);
  if (me == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(c.spec_path, ": no host ", host));
  co.spec = spec;
  co.host = host;
  ASSIGN_OR_RETURN(std::unique_ptr<collectives::Communicator> comm,
                   collectives::Communicator::Create(std::move(co)));

  std::unique_ptr<control::WorkerAgent> agent;
  if (!c.controller.empty()) {
    control::WorkerAgentOptions ao;
    ao.controller = c.controller;
    ao.host = host;
    ao.ranks = {rank};
    ao.nics = me->nics;
    ao.job = "mixnet-demo";
    ASSIGN_OR_RETURN(agent, control::WorkerAgent::Start(std::move(ao)));
    RETURN_IF_ERROR(agent->WaitRegistered(timeout).status());
    agent->Follow(comm.get());
  }
  RETURN_IF_ERROR(collectives::Barrier(*comm));

  std::ofstream out(c.ResultFile(rank));
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", c.ResultFile(rank)));
  std::vector<std::string> host_names;
  for (int h = 0; h < n; ++h) host_names.push_back(Workload::HostName(h));
  Exchange x;
  absl::Status status;
  for (int64_t it = 0; it < c.iterations && status.ok(); ++it) {
    for (int layer = 0; layer < w.layers() && status.ok(); ++layer) {
      std::this_thread::sleep_for(
          std::chrono::microseconds(static_cast<int64_t>(c.compute_ms * 1000)));
      const std::vector<size_t> bytes = w.DispatchBytes(it, layer);
      LayerResult r;
      r.iteration = it;
      r.layer = layer;
      r.rank = rank;
      r.epoch = InstalledEpoch(*comm);
      const double t_start = absl::ToUnixMicros(absl::Now()) / 1000.0;
      const BlockId base{.seed = c.workload.seed, .iteration = it, .layer = layer};
      for (int dir = 0; dir < 2 && status.ok(); ++dir) {
        Prepare(bytes, n, rank, dir, base, x);
        status = RunExchange(*comm, x, base, dir, dir == 0 ? &r.dispatch_ms : &r.combine_ms,
                             &r.bytes_verified, &r.bytes_bad);
      }
      if (!status.ok()) {
        status = Annotate(status, absl::StrCat("iteration ", it, " layer ", layer));
        break;
      }
      if (r.bytes_bad > 0) *any_bad = true;
      if (agent) {
        control::TrafficRow row;
        row.iteration = it;
        row.key = GateKey{.layer = layer, .micro_batch = 0, .direction = Direction::kDispatch};
        row.peer_hosts = host_names;
        for (int j = 0; j < n; ++j) row.bytes.push_back(static_cast<double>(bytes[rank * n + j]));
        agent->Report(std::move(row));
      }
      const double t_report = absl::ToUnixMicros(absl::Now()) / 1000.0;
      out << nlohmann::json{{"iteration", r.iteration},
                            {"layer", r.layer},
                            {"rank", r.rank},
                            {"dispatch_ms", r.dispatch_ms},
                            {"combine_ms", r.combine_ms},
                            {"bytes_verified", r.bytes_verified},
                            {"bytes_bad", r.bytes_bad},
                            {"epoch", r.epoch},
                            {"t_start_ms", t_start},
                            {"t_report_ms", t_report}}
                 .dump()
          << "\n";
    }
  }
  if (status.ok()) status = collectives::Barrier(*comm);
  nlohmann::json fin = {
      {"final", true}, {"rank", rank}, {"ok", status.ok()}, {"epoch", InstalledEpoch(*comm)}};
  if (agent) {
    const control::WorkerAgentStats s = agent->stats();
    fin["agent"] = {{"commits", s.commits},
                    {"prepares", s.prepares},
                    {"aborts", s.aborts},
                    {"commit_errors", s.commit_errors},
                    {"prepare_timeouts", s.prepare_timeouts},
                    {"reports_sent", s.reports_sent},
                    {"reports_dropped", s.reports_dropped}};
    agent->Follow(nullptr);
    agent.reset();
  }
  out << fin.dump() << "\n";
  out.flush();
  return status;
}

}  // namespace

int RunWorker(const std::string& config_path, int rank) {
  absl::StatusOr<RunConfig> c = RunConfig::Load(config_path);
  if (!c.ok()) {
    std::cerr << "mixnet-demo worker: " << c.status() << "\n";
    return 2;
  }
  bool any_bad = false;
  absl::Status s = Run(*c, rank, &any_bad);
  if (!s.ok()) {
    std::cerr << "mixnet-demo worker: " << c->fabric << " rank " << rank << ": " << s << "\n";
    return 1;
  }
  return any_bad ? 3 : 0;
}

}  // namespace mixnet::demo
