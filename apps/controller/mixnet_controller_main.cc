// mixnet-controller: the MixNet controller daemon. Thin main: parses flags
// (CLI11), loads the cluster spec, connects one OcsSwitchDriver per --ocs
// switch, starts the Controller behind its gRPC server and shuts it down
// cleanly on SIGTERM or SIGINT. The main thread waits for the signal; gRPC's
// threads serve calls, "mx-ctl-planner" plans and runs the rounds.
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "ocs_driver/client/client_flags.h"
#include "ocs_driver/client/ocs_switch_driver.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/grpc_tls.h"
#include "runtime/common/log.h"
#include "runtime/common/metrics_exposer.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/control/controller.h"
#include "runtime/control/controller_service.h"

namespace mixnet::control {
namespace {

struct Flags {
  std::string spec;
  std::string listen = "127.0.0.1:50561";
  std::vector<std::string> ocs;
  ocs::OcsTlsOptions ocs_tls;  // for every --ocs switch
  std::string state_dir;
  std::string ready_file;
  std::string planner = "improved";
  std::string predictor = "share_trend";
  double prepare_deadline_ms = 2000;
  double commit_deadline_ms = 5000;
  double report_timeout_ms = 500;
  double switch_timeout_ms = 10000;
  double overlap_ms = 0;
  std::string router = "v2";
  std::string relay = "off";
  int64_t relay_chunk_bytes = GetSettings().relay_chunk_bytes;
  int routed_search = planner::PlannerOptions{}.routed_search_evaluations;
  int64_t epoch_block = static_cast<int64_t>(control::ControllerOptions{}.epoch_block);
  std::string warm_paths = control::ControllerOptions{}.warm_paths ? "on" : "off";
  std::string log_level;
  std::string metrics_listen;
  bool metrics_allow_remote = false;
  TlsServerOptions tls;  // this API's mTLS
  std::vector<std::string> metrics_allow_clients;
  bool insecure_listen_any = false;
};

absl::Duration Ms(double ms) { return absl::Microseconds(static_cast<int64_t>(ms * 1000)); }

absl::StatusOr<ControllerOptions> BuildOptions(const Flags& f) {
  ControllerOptions o;
  ASSIGN_OR_RETURN(o.spec, cluster::ClusterSpec::LoadFile(f.spec));
  ASSIGN_OR_RETURN(o.algorithm, planner::ParseAlgorithm(f.planner));
  o.predictor = f.predictor;
  o.state_dir = f.state_dir;
  for (double ms :
       {f.prepare_deadline_ms, f.commit_deadline_ms, f.report_timeout_ms, f.switch_timeout_ms}) {
    if (!(ms > 0)) return absl::InvalidArgumentError("deadlines and timeouts must be > 0 ms");
  }
  o.prepare_deadline = Ms(f.prepare_deadline_ms);
  o.commit_deadline = Ms(f.commit_deadline_ms);
  o.report_timeout = Ms(f.report_timeout_ms);
  o.switch_timeout = Ms(f.switch_timeout_ms);
  o.overlap_s = f.overlap_ms / 1000.0;
  o.router = f.router;
  if (f.relay == "on" && f.router != "v2") {
    return absl::InvalidArgumentError("--relay on needs --router v2");
  }
  o.relay = f.relay == "on";
  if (f.relay_chunk_bytes < 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--relay-chunk-bytes ", f.relay_chunk_bytes, ": need >= 4096"));
  }
  o.relay_chunk_bytes = static_cast<double>(f.relay_chunk_bytes);
  if (f.routed_search < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--routed-search ", f.routed_search, ": need >= 0 (0: none)"));
  }
  o.routed_search_evaluations = f.routed_search;
  if (f.epoch_block < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--epoch-block ", f.epoch_block, ": need >= 1 (1: persist every round)"));
  }
  o.epoch_block = static_cast<uint64_t>(f.epoch_block);
  o.warm_paths = f.warm_paths == "on";
  // The id is fixed here so that the switch drivers send it too.
  o.controller_id = absl::StrCat("ctl-", getpid(), "-", absl::ToUnixMillis(absl::Now()));
  for (const std::string& arg : f.ocs) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ocs ", arg, ": expected SWITCH=TARGET (TARGET: host:port or unix:/path)"));
    }
    const std::string name = arg.substr(0, eq);
    if (o.switches.count(name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--ocs ", name, " given twice"));
    }
    ocs::OcsClientOptions co;
    co.target = arg.substr(eq + 1);
    co.timeout = o.switch_timeout;
    co.tls = f.ocs_tls;
    absl::StatusOr<std::unique_ptr<ocs::OcsSwitchDriver>> d =
        ocs::OcsSwitchDriver::Create(co, o.controller_id);
    if (!d.ok()) return Annotate(d.status(), absl::StrCat("--ocs ", arg));
    o.switches[name] = std::move(*d);
  }
  return o;
}

int Main(int argc, char** argv) {
  CLI::App app{"mixnet-controller: plans OCS circuits per region and reconfigures the fabric"};
  Flags f;
  app.add_option("--spec", f.spec, "cluster spec (YAML)")->required();
  app.add_option("--listen", f.listen, "HOST:PORT (port 0: ephemeral) or unix:/path")
      ->capture_default_str();
  app.add_option("--ocs", f.ocs,
                 "SWITCH=TARGET: the mixnet-ocsd of a switch of the spec (host:port or "
                 "unix:/path; repeatable, one per switch)");
  // The calls to every --ocs switch over (m)TLS: a mixnet-ocsd with
  // --tls-cert/--tls-key/--tls-client-ca admits the controller by this
  // client certificate (its --allow-client).
  ocs::AddOcsTlsFlags(&app, &f.ocs_tls, "ocs-");
  app.add_option("--tls-cert", f.tls.cert_file, "this API's server certificate (PEM; mTLS)");
  app.add_option("--tls-key", f.tls.key_file, "its private key (PEM)");
  app.add_option("--tls-client-ca", f.tls.client_ca_file,
                 "the CA every client certificate must chain to (PEM); a worker's certificate "
                 "names its host (CN or a DNS SAN), and it acts only as that host");
  app.add_flag("--insecure-listen-any", f.insecure_listen_any,
               "allow a plaintext --listen on a non-loopback address (anyone who reaches it can "
               "register as any host and steer the plans)");
  app.add_option("--state-dir", f.state_dir, "where the fencing epoch is persisted")->required();
  app.add_option("--ready-file", f.ready_file, "write the listening address here once serving");
  app.add_option("--planner", f.planner, "improved | greedy")
      ->check(CLI::IsMember({"improved", "greedy"}))
      ->capture_default_str();
  app.add_option("--predictor", f.predictor, "last | ewma | share_trend")
      ->check(CLI::IsMember({"last", "ewma", "share_trend"}))
      ->capture_default_str();
  app.add_option("--prepare-deadline-ms", f.prepare_deadline_ms,
                 "workers must ack PREPARE within this (else ABORT)")
      ->capture_default_str();
  app.add_option("--commit-deadline-ms", f.commit_deadline_ms,
                 "wait at most this for COMMITTED acks")
      ->capture_default_str();
  app.add_option("--report-timeout-ms", f.report_timeout_ms,
                 "plan a matrix with the rows that came this long after its first row")
      ->capture_default_str();
  app.add_option("--switch-timeout-ms", f.switch_timeout_ms, "per call to a mixnet-ocsd")
      ->capture_default_str();
  app.add_option("--overlap-ms", f.overlap_ms,
                 "compute a round can hide behind when a plan request names no window of its own "
                 "(PlanRequest.window_ms): a reconfiguration costs its switching plus the rounds' "
                 "measured protocol time, less this")
      ->capture_default_str();
  app.add_option("--router", f.router,
                 "the routing the workers run, which plans are scored with: v1 (circuits if any, "
                 "else EPS) or v2 (each pair split over its circuits and EPS; COMMIT and DECISION "
                 "carry the demand so that workers with MIXNET_ROUTER=v2 build the same split)")
      ->check(CLI::IsMember({"v1", "v2"}))
      ->capture_default_str();
  app.add_option("--relay", f.relay,
                 "router v2: plans may relay a pair's bytes through a third host with circuits "
                 "to both; the workers forward them inside their collectives")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--relay-chunk-bytes", f.relay_chunk_bytes,
                 "with --relay on: the workers' relay chunk (their MIXNET_RELAY_CHUNK_BYTES, "
                 "default this process's): plans are scored with its store and forward")
      ->capture_default_str();
  app.add_option("--routed-search", f.routed_search,
                 "with --relay on: the planner's last step searches circuit sets scored by the "
                 "relay split itself, at most this many splits per plan (about 0.06 ms each at "
                 "8 hosts); 0: none")
      ->capture_default_str();
  app.add_option("--epoch-block", f.epoch_block,
                 "epochs persisted ahead in --state-dir: a round fsyncs only when its epoch passes "
                 "the last saved one; a restart skips at most this many minus one; 1: every round")
      ->capture_default_str();
  app.add_option("--warm-paths", f.warm_paths,
                 "serve the workers' WarmPaths: once every worker of a region asked, light every "
                 "OCS NIC pair of the region once (a 1-factorization per switch, then the "
                 "topology it had) so each worker connects its paths before its first step")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--metrics-listen", f.metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics (port 0: ephemeral, the "
                 "bound address is logged); loopback unless TLS is on or --metrics-allow-remote; "
                 "default: none");
  app.add_flag("--metrics-allow-remote", f.metrics_allow_remote,
               "allow a non-loopback --metrics-listen without TLS (/metrics is plain HTTP)");
  app.add_option("--metrics-allow-client", f.metrics_allow_clients,
                 "with TLS: a certificate (CN or DNS SAN) that may scrape /metrics over HTTPS "
                 "(repeatable; required with TLS and --metrics-listen)");
  app.add_option("--log-level", f.log_level,
                 "trace | debug | info | warn | error (default: MIXNET_LOG_LEVEL or info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  CLI11_PARSE(app, argc, argv);
  if (!f.log_level.empty()) log::Logger().set_level(spdlog::level::from_str(f.log_level));

  // Block the stop signals before any thread starts; the main thread takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto fail = [](const absl::Status& s) {
    log::Error("mixnet-controller: {}", s.ToString());
    std::cerr << "mixnet-controller: " << s.ToString() << "\n";
    return 1;
  };
  if (!f.ready_file.empty()) unlink(f.ready_file.c_str());
  // Before anything starts: a refused address must not cost an epoch.
  if (absl::Status s = ServerCredentials(f.tls).status(); !s.ok()) return fail(s);
  if (absl::Status s = CheckPlaintextListen(f.listen, f.tls.Active(), f.insecure_listen_any);
      !s.ok()) {
    return fail(s);
  }
  if (!f.metrics_listen.empty()) {
    if (absl::Status s = CheckMetricsOptions(
            f.metrics_listen, MetricsTls{f.tls, f.metrics_allow_clients}, f.metrics_allow_remote);
        !s.ok()) {
      return fail(s);
    }
  }
  absl::StatusOr<ControllerOptions> options = BuildOptions(f);
  if (!options.ok()) return fail(options.status());
  absl::StatusOr<std::unique_ptr<Controller>> controller = Controller::Start(std::move(*options));
  if (!controller.ok()) return fail(controller.status());
  ServerOptions so;
  so.listen = f.listen;
  so.ready_file = f.ready_file;
  so.metrics_listen = f.metrics_listen;
  so.metrics_allow_remote = f.metrics_allow_remote;
  so.tls = f.tls;
  so.metrics_allow_clients = f.metrics_allow_clients;
  so.insecure_listen_any = f.insecure_listen_any;
  absl::StatusOr<std::unique_ptr<ControllerServer>> server =
      ControllerServer::Start(std::move(*controller), so);
  if (!server.ok()) return fail(server.status());

  int sig = 0;
  sigwait(&stop, &sig);
  log::Info("mixnet-controller: signal {}, shutting down", sig);
  (*server)->Shutdown(absl::Seconds(2));
  return 0;
}

}  // namespace
}  // namespace mixnet::control

int main(int argc, char** argv) { return mixnet::control::Main(argc, argv); }
