// mixnet-ocsd: the OCS driver daemon, one per optical circuit switch. Thin
// main: parses flags (CLI11), opens the backend (sim | netns | polatis) and
// the state dir, starts the Daemon, and shuts it down cleanly on SIGTERM or
// SIGINT. The main thread waits for the signal; gRPC threads serve calls.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ocs_driver/netns/netns_backend.h"
#include "ocs_driver/polatis/polatis_backend.h"
#include "ocs_driver/polatis/polatis_tl1_backend.h"
#include "ocs_driver/service/daemon.h"
#include "ocs_driver/service/state_store.h"
#include "ocs_driver/sim/sim_backend.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

struct Flags {
  std::string backend = "sim";
  int ports = 0;
  double switch_ms = 10;
  std::string state_dir = "/var/lib/mixnet-ocsd";
  std::string netns;
  std::string device;
  double pacing_ms = 100;
  double timeout_ms = 5000;
  double completion_timeout_ms = 30000;
  std::string tl1_user;
  std::string tl1_password_file;
  std::string tl1_tid;
  int tl1_size = 0;
  std::vector<int> sim_fail_ports;
  std::string sim_hardware_file;
  DaemonOptions daemon;
  double health_probe_ms = 5000;
};

absl::Duration Ms(double ms) { return absl::Microseconds(static_cast<int64_t>(ms * 1000)); }

// "host", "host:port", "[v6]" or "[v6]:port"; `port` keeps its default
// when none is given.
absl::Status ParseDevice(const std::string& device, std::string& host, int& port) {
  std::string port_text;
  if (device.front() == '[') {
    const size_t close = device.find(']');
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--device ", device, ": missing ]"));
    }
    host = device.substr(1, close - 1);
    if (close + 1 < device.size()) {
      if (device[close + 1] != ':') {
        return absl::InvalidArgumentError(absl::StrCat("--device ", device, ": expected ]:PORT"));
      }
      port_text = device.substr(close + 2);
    }
  } else if (const size_t colon = device.find(':'); colon != std::string::npos) {
    if (device.find(':', colon + 1) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device ", device, ": write an IPv6 address as [addr]:port"));
    }
    host = device.substr(0, colon);
    port_text = device.substr(colon + 1);
  } else {
    host = device;
  }
  if (!port_text.empty() && (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("--device ", device, ": bad port"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--device ", device, ": no host"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OcsBackend>> OpenBackend(const Flags& f) {
  const absl::Duration switching = Ms(f.switch_ms);
  if (f.switch_ms < 0) return absl::InvalidArgumentError("--switch-ms must be >= 0");
  if (f.backend == "sim") {
    SimOptions o;
    o.ports = f.ports == 0 ? 64 : f.ports;
    o.switching_time = switching;
    o.fail_ports = std::set<int>(f.sim_fail_ports.begin(), f.sim_fail_ports.end());
    o.hardware_file = f.sim_hardware_file;
    return OpenSimBackend(o);
  }
  if (f.backend == "netns") {
    if (f.netns.empty()) return absl::InvalidArgumentError("--backend netns needs --netns NAME");
    return OpenNetnsBackend({f.netns, f.ports, switching});
  }
  if (f.backend == "polatis" || f.backend == "polatis-tl1") {
    const bool tl1 = f.backend == "polatis-tl1";
    if (f.device.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--backend ", f.backend, " needs --device HOST[:PORT]"));
    }
    std::string host;
    int port = tl1 ? 3082 : 5025;
    RETURN_IF_ERROR(ParseDevice(f.device, host, port));
    const absl::Duration pacing = Ms(f.pacing_ms), reply = Ms(f.timeout_ms),
                         completion = Ms(f.completion_timeout_ms);
    if (!tl1) return OpenPolatisBackend({host, port, pacing, reply, completion});
    PolatisTl1Options o;
    o.host = host;
    o.port = port;
    o.user = f.tl1_user;
    if (!f.tl1_password_file.empty()) {
      std::ifstream in(f.tl1_password_file);
      if (!in || !std::getline(in, o.password)) {
        return ErrnoStatus(absl::StrCat("--tl1-password-file ", f.tl1_password_file), "read");
      }
    } else if (const char* env = getenv("MIXNET_OCSD_TL1_PASSWORD")) {
      o.password = env;
    }
    o.tid = f.tl1_tid;
    o.size = f.tl1_size;
    o.command_pacing = pacing;
    o.reply_timeout = reply;
    o.completion_timeout = completion;
    return OpenPolatisTl1Backend(o);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--backend ", f.backend, ": expected sim, netns, polatis or polatis-tl1"));
}

int Main(int argc, char** argv) {
  CLI::App app{"mixnet-ocsd: gRPC driver daemon for one optical circuit switch"};
  Flags f;
  app.add_option("--backend", f.backend, "sim | netns | polatis (SCPI) | polatis-tl1")
      ->check(CLI::IsMember({"sim", "netns", "polatis", "polatis-tl1"}))
      ->capture_default_str();
  app.add_option("--ports", f.ports,
                 "duplex ports (sim: default 64; netns: default the highest p<N>)");
  app.add_option("--switch-ms", f.switch_ms, "switching time in ms (sim, netns)")
      ->capture_default_str();
  app.add_option("--listen", f.daemon.listen, "HOST:PORT (port 0: ephemeral) or unix:/path")
      ->capture_default_str();
  app.add_option("--state-dir", f.state_dir, "where the desired state and epoch are persisted")
      ->capture_default_str();
  app.add_option("--netns", f.netns, "netns backend: the OCS namespace");
  app.add_option("--device", f.device,
                 "polatis backends: HOST[:PORT] (default port 5025 SCPI, 3082 TL1)");
  app.add_option("--pacing-ms", f.pacing_ms, "polatis: minimum gap between commands")
      ->capture_default_str();
  app.add_option("--timeout-ms", f.timeout_ms, "polatis: reply / connect timeout")
      ->capture_default_str();
  app.add_option("--completion-timeout-ms", f.completion_timeout_ms,
                 "polatis: wait for *OPC? after changes")
      ->capture_default_str();
  app.add_option("--tl1-user", f.tl1_user, "polatis-tl1: ACT-USER user");
  app.add_option("--tl1-password-file", f.tl1_password_file,
                 "polatis-tl1: file holding the password (else $MIXNET_OCSD_TL1_PASSWORD)");
  app.add_option("--tl1-tid", f.tl1_tid, "polatis-tl1: target identifier (default none)");
  app.add_option("--tl1-size", f.tl1_size,
                 "polatis-tl1: N of the N x N switch (0: from RTRV-NETYPE)")
      ->capture_default_str();
  app.add_option("--tls-cert", f.daemon.tls_cert, "server certificate chain (PEM)");
  app.add_option("--tls-key", f.daemon.tls_key, "server private key (PEM)");
  app.add_option("--tls-client-ca", f.daemon.tls_client_ca,
                 "CA (PEM) that client certificates must chain to (mTLS)");
  app.add_option("--allow-client", f.daemon.allow_clients,
                 "client certificate allowed to ApplyCrossConnects: a common name (ctl-1) or a "
                 "whole subject, attributes in any order (CN=ctl-1,O=mixnet); repeatable; "
                 "required with TLS (no default: other certificates may read, not change)");
  app.add_flag("--insecure-listen-any", f.daemon.insecure_listen_any,
               "allow a non-loopback listen address without TLS");
  app.add_option("--metrics-listen", f.daemon.metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics (port 0: ephemeral, the "
                 "bound address is logged); loopback unless TLS or --metrics-allow-remote; "
                 "default: none");
  app.add_flag("--metrics-allow-remote", f.daemon.metrics_allow_remote,
               "allow a non-loopback --metrics-listen without TLS (/metrics is plain HTTP)");
  app.add_option("--metrics-allow-client", f.daemon.metrics_allow_clients,
                 "with TLS: a certificate (CN or DNS SAN) that may scrape /metrics over HTTPS "
                 "(repeatable; required with TLS and --metrics-listen)");
  app.add_option("--ready-file", f.daemon.ready_file,
                 "write the listening address here once serving");
  app.add_option("--health-probe-ms", f.health_probe_ms,
                 "read the switch this often; health is NOT_SERVING while it does not answer "
                 "(0: no probe)")
      ->check(CLI::Range(0.0, 3600e3))
      ->capture_default_str();
  app.add_option("--sim-fail-ports", f.sim_fail_ports,
                 "testing: sim adds touching these ports fail")
      ->delimiter(',')
      ->group("");
  app.add_option("--sim-hardware-file", f.sim_hardware_file,
                 "testing: keep the sim switch's state in this file")
      ->group("");
  CLI11_PARSE(app, argc, argv);

  // Block the stop signals before any thread starts; the main thread takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto fail = [](const absl::Status& s) {
    log::Error("mixnet-ocsd: {}", s.ToString());
    std::cerr << "mixnet-ocsd: " << s.ToString() << "\n";
    return 1;
  };
  // A ready file from an earlier run must not announce this one too early.
  if (!f.daemon.ready_file.empty()) unlink(f.daemon.ready_file.c_str());
  f.daemon.health_probe = Ms(f.health_probe_ms);
  absl::StatusOr<StateStore> store = StateStore::Open(f.state_dir);
  if (!store.ok()) return fail(store.status());
  absl::StatusOr<std::unique_ptr<OcsBackend>> backend = OpenBackend(f);
  if (!backend.ok()) return fail(backend.status());
  absl::StatusOr<std::unique_ptr<Daemon>> daemon =
      Daemon::Start(std::move(*backend), std::move(*store), f.daemon);
  if (!daemon.ok()) return fail(daemon.status());

  int sig = 0;
  sigwait(&stop, &sig);
  log::Info("mixnet-ocsd: signal {}, shutting down", sig);
  (*daemon)->Shutdown(absl::Seconds(2));
  return 0;
}

}  // namespace
}  // namespace mixnet::ocs

int main(int argc, char** argv) { return mixnet::ocs::Main(argc, argv); }
