// Parses the oracle's JSON input (oracle_input.h) with nlohmann-json.
#include "runtime/planner/oracle_input.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace mixnet::planner {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("oracle input: ", what));
}

// A field given as one number for every host or as a list of n numbers.
absl::StatusOr<std::vector<double>> PerHost(const json& j, const char* key, int n, bool required) {
  if (!j.contains(key)) {
    if (required) return Bad(absl::StrCat("\"", key, "\" is missing"));
    return std::vector<double>(n, 0.0);
  }
  const json& v = j.at(key);
  if (v.is_number()) return std::vector<double>(n, v.get<double>());
  if (!v.is_array() || static_cast<int>(v.size()) != n) {
    return Bad(absl::StrCat("\"", key, "\" must be a number or a list of ", n, " numbers"));
  }
  std::vector<double> out;
  for (size_t h = 0; h < v.size(); ++h) {
    if (!v[h].is_number()) return Bad(absl::StrCat("\"", key, "\"[", h, "] is not a number"));
    out.push_back(v[h].get<double>());
  }
  return out;
}

absl::StatusOr<int> HostIndex(const json& v, const std::vector<std::string>& hosts) {
  if (v.is_number_integer()) {
    const int h = v.get<int>();
    if (h < 0 || h >= static_cast<int>(hosts.size())) {
      return Bad(absl::StrCat("circuit end ", h, " is not a host index 0..", hosts.size() - 1));
    }
    return h;
  }
  if (v.is_string()) {
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (hosts[h] == v.get<std::string>()) return static_cast<int>(h);
    }
    return Bad(absl::StrCat("circuit end \"", v.get<std::string>(), "\" is not a host"));
  }
  return Bad("a circuit end must be a host name or index");
}

}  // namespace

absl::StatusOr<OracleInput> ParseOracleInput(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("not valid JSON");
  if (!j.is_object()) return Bad("the top level must be an object");
  if (!j.contains("bytes") || !j.at("bytes").is_array()) return Bad("\"bytes\" must be a list");
  // Flatten "bytes": n lists of n, or n*n numbers.
  const json& b = j.at("bytes");
  std::vector<double> flat;
  for (size_t r = 0; r < b.size(); ++r) {
    if (b[r].is_array()) {
      for (size_t c = 0; c < b[r].size(); ++c) {
        if (!b[r][c].is_number())
          return Bad(absl::StrCat("bytes[", r, "][", c, "] is not a number"));
        flat.push_back(b[r][c].get<double>());
      }
    } else if (b[r].is_number()) {
      flat.push_back(b[r].get<double>());
    } else {
      return Bad(absl::StrCat("bytes[", r, "] is neither a number nor a list"));
    }
  }
  int n = 0;
  while (n * n < static_cast<int>(flat.size())) ++n;
  if (n * n != static_cast<int>(flat.size()) || n == 0) {
    return Bad(absl::StrCat("\"bytes\" has ", flat.size(), " entries, not n x n"));
  }
  OracleInput in;
  if (j.contains("hosts")) {
    const json& h = j.at("hosts");
    if (!h.is_array() || static_cast<int>(h.size()) != n) {
      return Bad(
          absl::StrCat("\"hosts\" must list ", n, " names (the matrix is ", n, " x ", n, ")"));
    }
    for (const json& name : h) {
      if (!name.is_string()) return Bad("\"hosts\" must be strings");
      in.hosts.push_back(name.get<std::string>());
    }
  } else {
    for (int h = 0; h < n; ++h) in.hosts.push_back(std::to_string(h));
  }
  in.demand = TrafficMatrix(n);
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) in.demand.at(s, d) = flat[static_cast<size_t>(s) * n + d];
  }
  if (absl::Status st = in.demand.Validate(); !st.ok()) return Bad(st.message());
  absl::StatusOr<std::vector<double>> eps = PerHost(j, "eps_gbps", n, true);
  if (!eps.ok()) return eps.status();
  absl::StatusOr<std::vector<double>> ports = PerHost(j, "ocs_ports", n, false);
  if (!ports.ok()) return ports.status();
  absl::StatusOr<std::vector<double>> ocs = PerHost(j, "ocs_gbps", n, false);
  if (!ocs.ok()) return ocs.status();
  for (int h = 0; h < n; ++h) {
    in.fabric.eps_Bps.push_back((*eps)[h] * 1e9 / 8);
    in.fabric.ocs_port_Bps.push_back((*ocs)[h] * 1e9 / 8);
    const double p = (*ports)[h];
    if (p != static_cast<int>(p)) {
      return Bad(absl::StrCat("ocs_ports of host ", in.hosts[h], " is not a whole number"));
    }
    in.fabric.ocs_ports.push_back(static_cast<int>(p));
  }
  if (j.contains("wire_overhead")) {
    if (!j.at("wire_overhead").is_number()) return Bad("\"wire_overhead\" is not a number");
    in.fabric.wire_overhead = j.at("wire_overhead").get<double>();
  }
  if (absl::Status st = in.fabric.Validate(); !st.ok()) return Bad(st.message());
  if (j.contains("circuits")) {
    const json& c = j.at("circuits");
    if (!c.is_array()) return Bad("\"circuits\" must be a list of [a, b] pairs");
    std::vector<UndirectedCircuit> circuits;
    for (size_t i = 0; i < c.size(); ++i) {
      if (!c[i].is_array() || c[i].size() != 2) {
        return Bad(absl::StrCat("circuits[", i, "] is not an [a, b] pair"));
      }
      absl::StatusOr<int> a = HostIndex(c[i][0], in.hosts);
      if (!a.ok()) return a.status();
      absl::StatusOr<int> b2 = HostIndex(c[i][1], in.hosts);
      if (!b2.ok()) return b2.status();
      circuits.push_back({*a, *b2, in.fabric.circuit_Bps(*a, *b2)});
    }
    in.circuits = std::move(circuits);
  }
  return in;
}

}  // namespace mixnet::planner
