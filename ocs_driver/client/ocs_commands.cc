// `mixnetctl ocs ...` subcommands: see ocs_commands.h. Output goes to stdout
// (one JSON document, or one JSON object per line for watch, with --json);
// errors go to stderr as "mixnetctl: CODE: target: method: message".
#include "ocs_driver/client/ocs_commands.h"

#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ocs_driver/client/circuit_args.h"
#include "ocs_driver/client/client_flags.h"
#include "ocs_driver/client/ocs_client.h"
#include "ocs_driver/client/ocs_output.h"

namespace mixnet::ocs {
namespace {

struct Flags {
  OcsClientFlags client;
  bool json = false;
  // apply
  uint64_t epoch = 0;
  uint64_t version = 0;
  std::vector<std::string> circuits;
  std::string file;
  bool clear = false;
  std::string controller_id;
  // watch
  int count = 0;
  int for_ms = 0;
  // health
  std::string service;
};

// Prints a failed status; with --json also a {"error": {...}} document on stdout.
int Fail(const Flags& f, const absl::Status& status, int code) {
  std::cerr << "mixnetctl: " << status.ToString() << std::endl;
  if (f.json) std::cout << nlohmann::json{{"error", StatusJson(status)}}.dump() << std::endl;
  return code;
}

int FailRpc(const Flags& f, const absl::Status& status) { return Fail(f, status, kExitRpcError); }

absl::StatusOr<std::unique_ptr<OcsClient>> Connect(const Flags& f) {
  return OcsClient::Create(f.client.Options());
}

int RunInfo(const Flags& f) {
  absl::StatusOr<std::unique_ptr<OcsClient>> client = Connect(f);
  if (!client.ok()) return Fail(f, client.status(), kExitUsage);
  absl::StatusOr<v1::GetInfoResponse> info = (*client)->GetInfo();
  if (!info.ok()) return FailRpc(f, info.status());
  if (f.json) {
    nlohmann::json j = InfoJson(*info);
    j["target"] = f.client.target;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << "target           " << f.client.target << "\n" << InfoText(*info);
  }
  return kExitOk;
}

int RunGet(const Flags& f) {
  absl::StatusOr<std::unique_ptr<OcsClient>> client = Connect(f);
  if (!client.ok()) return Fail(f, client.status(), kExitUsage);
  absl::StatusOr<v1::GetCrossConnectsResponse> cc = (*client)->GetCrossConnects();
  if (!cc.ok()) return FailRpc(f, cc.status());
  if (f.json) {
    std::cout << CrossConnectsJson(*cc).dump(2) << std::endl;
  } else {
    std::cout << CrossConnectsText(*cc);
  }
  return kExitOk;
}

std::string DefaultControllerId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat("mixnetctl@", host);
}

int RunApply(const Flags& f) {
  int sources = (f.circuits.empty() ? 0 : 1) + (f.file.empty() ? 0 : 1) + (f.clear ? 1 : 0);
  if (sources != 1) {
    return Fail(f,
                absl::InvalidArgumentError(
                    "apply needs exactly one of --circuit A-B (repeatable), --file FILE, or "
                    "--clear (remove every circuit)"),
                kExitUsage);
  }
  v1::ApplyCrossConnectsRequest request;
  request.set_epoch(f.epoch);
  request.set_config_version(f.version);
  request.set_controller_id(f.controller_id.empty() ? DefaultControllerId() : f.controller_id);
  if (!f.file.empty()) {
    absl::StatusOr<std::vector<v1::Circuit>> circuits = LoadCircuitsFile(f.file);
    if (!circuits.ok()) return Fail(f, circuits.status(), kExitUsage);
    for (const v1::Circuit& c : *circuits) *request.add_circuits() = c;
  }
  for (const std::string& text : f.circuits) {
    absl::StatusOr<v1::Circuit> c = ParseCircuitArg(text);
    if (!c.ok()) return Fail(f, c.status(), kExitUsage);
    *request.add_circuits() = *c;
  }
  absl::StatusOr<std::unique_ptr<OcsClient>> client = Connect(f);
  if (!client.ok()) return Fail(f, client.status(), kExitUsage);
  absl::Time start = absl::Now();
  OcsApplyResult result = (*client)->Apply(request);
  absl::Duration latency = absl::Now() - start;
  if (f.json) {
    std::cout << ApplyJson(result, latency).dump(2) << std::endl;
  } else if (result.ok() || result.has_response) {
    std::cout << ApplyText(result, latency);
  }
  if (!result.ok()) {
    std::cerr << "mixnetctl: " << result.status.ToString() << std::endl;
    return kExitRpcError;
  }
  return kExitOk;
}

int RunWatch(const Flags& f) {
  absl::StatusOr<std::unique_ptr<OcsClient>> client = Connect(f);
  if (!client.ok()) return Fail(f, client.status(), kExitUsage);
  absl::Mutex out_mu;
  int printed = 0;
  absl::StatusOr<std::unique_ptr<OcsWatch>> watch =
      (*client)->Watch([&](const v1::WatchEvent& event) {
        absl::MutexLock lock(&out_mu);
        if (f.json) {
          std::cout << WatchEventJson(event).dump() << std::endl;
        } else {
          std::cout << WatchEventText(event) << std::endl;
        }
        ++printed;
        return f.count <= 0 || printed < f.count;
      });
  if (!watch.ok()) return FailRpc(f, watch.status());
  absl::Duration limit = f.for_ms > 0 ? absl::Milliseconds(f.for_ms) : absl::InfiniteDuration();
  if (!(*watch)->WaitFor(limit)) {
    (*watch)->Cancel();
    (*watch)->WaitFor(absl::Seconds(5));
    return kExitOk;  // --for-ms elapsed
  }
  absl::Status status = (*watch)->status();
  if (!status.ok()) return FailRpc(f, status);
  absl::MutexLock lock(&out_mu);
  if (f.count > 0 && printed >= f.count) return kExitOk;
  return Fail(f,
              absl::UnavailableError(absl::StrCat(f.client.target,
                                                  ": Watch: stream ended by the "
                                                  "daemon after ",
                                                  printed, " events")),
              kExitRpcError);
}

int RunHealth(const Flags& f) {
  absl::StatusOr<std::unique_ptr<OcsClient>> client = Connect(f);
  if (!client.ok()) return Fail(f, client.status(), kExitUsage);
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> health = (*client)->Health(f.service);
  if (!health.ok()) return FailRpc(f, health.status());
  if (f.json) {
    std::cout << HealthJson(*health).dump(2) << std::endl;
  } else {
    std::cout << HealthText(*health);
  }
  return health->status() == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk
                                                                            : kExitNotServing;
}

}  // namespace

std::function<int()> AddOcsCommands(CLI::App* app) {
  auto flags = std::make_shared<Flags>();
  auto chosen = std::make_shared<std::function<int(const Flags&)>>();
  CLI::App* ocs = app->add_subcommand("ocs", "talk to an OCS driver daemon (mixnet-ocsd)");
  ocs->require_subcommand(1);

  auto common = [&](CLI::App* cmd, std::function<int(const Flags&)> fn) {
    AddOcsClientFlags(cmd, &flags->client, /*target_required=*/true);
    cmd->add_flag("--json", flags->json, "print JSON instead of text");
    cmd->callback([chosen, fn] { *chosen = fn; });
  };

  common(ocs->add_subcommand("info", "vendor, model, ports, switching time, epoch, version"),
         RunInfo);
  common(ocs->add_subcommand("get", "the actual and desired circuits"), RunGet);

  CLI::App* apply = ocs->add_subcommand("apply", "make the switch hold exactly the given circuits");
  common(apply, RunApply);
  apply->add_option("--epoch", flags->epoch, "fencing epoch (>= 1, >= the highest seen)")
      ->required();
  apply->add_option("--version", flags->version, "config version of this set (>= 1)")->required();
  CLI::Option* circuit =
      apply->add_option("--circuit", flags->circuits, "a duplex circuit A-B (repeatable)");
  CLI::Option* file =
      apply->add_option("--file", flags->file,
                        "JSON file of circuits: [[a,b],...] or {\"circuits\": [...]}; - = stdin");
  CLI::Option* clear = apply->add_flag("--clear", flags->clear, "apply the empty set");
  circuit->excludes(file)->excludes(clear);
  file->excludes(clear);
  apply->add_option("--controller-id", flags->controller_id,
                    "who is asking (default mixnetctl@HOST): the daemon's log, and an epoch "
                    "belongs to the first id that applied it (another id needs a higher one)");

  CLI::App* watch = ocs->add_subcommand("watch", "print the snapshot, then every change");
  common(watch, RunWatch);
  watch->add_option("--count", flags->count, "stop after N events (0 = no limit)")
      ->check(CLI::NonNegativeNumber);
  watch->add_option("--for-ms", flags->for_ms, "stop after this many milliseconds (0 = no limit)")
      ->check(CLI::NonNegativeNumber);

  CLI::App* health = ocs->add_subcommand("health", "grpc.health.v1 check; exit 3 if not SERVING");
  common(health, RunHealth);
  health->add_option("--service", flags->service,
                     "service name to check (\"\" = the whole server, or "
                     "mixnet.ocs.v1.OcsDriver)");

  return [flags, chosen] {
    if (!*chosen) return kExitUsage;
    return (*chosen)(*flags);
  };
}

}  // namespace mixnet::ocs
