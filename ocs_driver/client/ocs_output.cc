// mixnetctl output formats: see ocs_output.h.
#include "ocs_driver/client/ocs_output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace mixnet::ocs {
namespace {

const char* OpName(v1::CircuitResult::Op op) {
  switch (op) {
    case v1::CircuitResult::ADD:
      return "add";
    case v1::CircuitResult::REMOVE:
      return "remove";
    default:
      return "unspecified";
  }
}

std::string CodeName(int code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string CircuitText(const v1::Circuit& c) { return absl::StrCat(c.port_a(), "-", c.port_b()); }

}  // namespace

nlohmann::json CircuitsJson(const google::protobuf::RepeatedPtrField<v1::Circuit>& circuits) {
  nlohmann::json out = nlohmann::json::array();
  for (const v1::Circuit& c : circuits) out.push_back({c.port_a(), c.port_b()});
  return out;
}

std::string CircuitsText(const google::protobuf::RepeatedPtrField<v1::Circuit>& circuits) {
  if (circuits.empty()) return "none";
  std::vector<std::string> parts;
  for (const v1::Circuit& c : circuits) parts.push_back(CircuitText(c));
  return absl::StrJoin(parts, " ");
}

nlohmann::json StatusJson(const absl::Status& status) {
  return {{"code", absl::StatusCodeToString(status.code())},
          {"message", std::string(status.message())}};
}

nlohmann::json InfoJson(const v1::GetInfoResponse& info) {
  return {{"vendor", info.vendor()},
          {"model", info.model()},
          {"serial", info.serial()},
          {"firmware", info.firmware()},
          {"backend", info.backend()},
          {"port_count", info.port_count()},
          {"switching_time_us", info.switching_time_us()},
          {"highest_epoch", info.highest_epoch()},
          {"config_version", info.config_version()},
          {"apply_samples", info.apply_samples()},
          {"apply_median_us", info.apply_median_us()},
          {"apply_p90_us", info.apply_p90_us()},
          {"apply_max_us", info.apply_max_us()}};
}

std::string InfoText(const v1::GetInfoResponse& info) {
  std::string apply = "none measured yet";
  if (info.apply_samples() > 0) {
    apply = absl::StrFormat("median %u us, p90 %u us, max %u us (last %u changes)",
                            info.apply_median_us(), info.apply_p90_us(), info.apply_max_us(),
                            info.apply_samples());
  }
  return absl::StrFormat(
      "backend          %s\nvendor           %s\nmodel            %s\nserial           %s\n"
      "firmware         %s\nports            %u\nswitching time   %u us\n"
      "apply time       %s\nhighest epoch    %u\nconfig version   %u\n",
      OrDash(info.backend()), OrDash(info.vendor()), OrDash(info.model()), OrDash(info.serial()),
      OrDash(info.firmware()), info.port_count(), info.switching_time_us(), apply,
      info.highest_epoch(), info.config_version());
}

nlohmann::json CrossConnectsJson(const v1::GetCrossConnectsResponse& cc) {
  return {{"actual", CircuitsJson(cc.actual())},
          {"desired", CircuitsJson(cc.desired())},
          {"epoch", cc.epoch()},
          {"config_version", cc.config_version()},
          {"in_sync", cc.in_sync()}};
}

std::string CrossConnectsText(const v1::GetCrossConnectsResponse& cc) {
  return absl::StrFormat(
      "epoch %u, config version %u, %s\nactual   (%d circuits): %s\ndesired  (%d circuits): %s\n",
      cc.epoch(), cc.config_version(), cc.in_sync() ? "in sync" : "NOT in sync", cc.actual_size(),
      CircuitsText(cc.actual()), cc.desired_size(), CircuitsText(cc.desired()));
}

nlohmann::json ApplyJson(const OcsApplyResult& result, absl::Duration latency) {
  nlohmann::json out = {{"ok", result.ok()},
                        {"code", absl::StatusCodeToString(result.status.code())},
                        {"message", std::string(result.status.message())},
                        {"latency_us", absl::ToInt64Microseconds(latency)}};
  if (!result.has_response) return out;
  const v1::ApplyCrossConnectsResponse& r = result.response;
  nlohmann::json results = nlohmann::json::array();
  for (const v1::CircuitResult& cr : r.results()) {
    results.push_back({{"circuit", {cr.circuit().port_a(), cr.circuit().port_b()}},
                       {"op", OpName(cr.op())},
                       {"code", CodeName(cr.code())},
                       {"message", cr.message()}});
  }
  out["noop"] = r.noop();
  out["epoch"] = r.epoch();
  out["config_version"] = r.config_version();
  out["ports_changed"] = r.ports_changed();
  out["backend_us"] = r.backend_us();
  out["results"] = std::move(results);
  // Unknown (the daemon could not read the switch back) is null, never [].
  out["actual"] = r.actual_unknown() ? nlohmann::json(nullptr) : CircuitsJson(r.actual());
  out["actual_unknown"] = r.actual_unknown();
  out["cleared"] = nlohmann::json::array();
  for (const std::string& c : r.cleared()) out["cleared"].push_back(c);
  return out;
}

std::string ApplyText(const OcsApplyResult& result, absl::Duration latency) {
  std::string out;
  const v1::ApplyCrossConnectsResponse& r = result.response;
  if (result.ok()) {
    if (r.noop()) {
      absl::StrAppend(&out, "no-op: epoch ", r.epoch(), " version ", r.config_version(),
                      " already applied");
    } else {
      absl::StrAppend(&out, "applied epoch ", r.epoch(), " version ", r.config_version(), ": ",
                      r.ports_changed(), " ports changed");
    }
    absl::StrAppend(&out, ", backend ", r.backend_us(), " us, reply in ",
                    absl::ToInt64Microseconds(latency), " us\n");
  } else {
    absl::StrAppend(&out, "apply FAILED: ", result.status.ToString(), "\n");
  }
  if (!result.has_response) return out;
  for (const v1::CircuitResult& cr : r.results()) {
    if (cr.code() == 0 && result.ok()) continue;  // success lines only matter on failure
    absl::StrAppend(&out, "  ", OpName(cr.op()), " ", CircuitText(cr.circuit()), ": ",
                    CodeName(cr.code()), cr.message().empty() ? "" : ": ", cr.message(), "\n");
  }
  for (const std::string& c : r.cleared()) absl::StrAppend(&out, "  cleared ", c, "\n");
  if (r.actual_unknown()) {
    absl::StrAppend(&out, "actual: unknown (the switch could not be read back)\n");
  } else {
    absl::StrAppend(&out, "actual (", r.actual_size(), " circuits): ", CircuitsText(r.actual()),
                    "\n");
  }
  return out;
}

nlohmann::json WatchEventJson(const v1::WatchEvent& event) {
  nlohmann::json out = {{"kind", event.kind() == v1::WatchEvent::SNAPSHOT ? "snapshot"
                                 : event.kind() == v1::WatchEvent::CHANGE ? "change"
                                                                          : "unspecified"},
                        {"epoch", event.epoch()},
                        {"config_version", event.config_version()},
                        {"circuits", event.circuits_unknown() ? nlohmann::json(nullptr)
                                                              : CircuitsJson(event.circuits())},
                        {"circuits_unknown", event.circuits_unknown()},
                        {"added", CircuitsJson(event.added())},
                        {"removed", CircuitsJson(event.removed())},
                        {"error", event.error()}};
  return out;
}

std::string WatchEventText(const v1::WatchEvent& event) {
  std::string out;
  if (event.kind() == v1::WatchEvent::SNAPSHOT) {
    absl::StrAppend(
        &out, "snapshot epoch ", event.epoch(), " version ", event.config_version(), ": ",
        event.circuits_unknown()
            ? std::string("circuits unknown")
            : absl::StrCat(event.circuits_size(), " circuits: ", CircuitsText(event.circuits())));
  } else if (event.circuits_unknown()) {
    absl::StrAppend(&out, "change   epoch ", event.epoch(), " version ", event.config_version(),
                    ": circuits unknown (the switch could not be read back)");
  } else {
    absl::StrAppend(&out, "change   epoch ", event.epoch(), " version ", event.config_version(),
                    ": added ", CircuitsText(event.added()), "; removed ",
                    CircuitsText(event.removed()), "; now ", event.circuits_size(), " circuits");
  }
  if (!event.error().empty()) absl::StrAppend(&out, "; ERROR: ", event.error());
  return out;
}

nlohmann::json HealthJson(const grpc::health::v1::HealthCheckResponse& health) {
  return {{"status", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(health.status())}};
}

std::string HealthText(const grpc::health::v1::HealthCheckResponse& health) {
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(health.status()) + "\n";
}

}  // namespace mixnet::ocs
