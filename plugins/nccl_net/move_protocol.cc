// Wire form of the lane-move control messages (see move_protocol.h). Any thread.
#include "plugins/nccl_net/move_protocol.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace mixnet::nccl {
namespace {

using nlohmann::json;

constexpr std::pair<ControlType, const char*> kNames[] = {
    {ControlType::kMove, "MOVE"},
    {ControlType::kReady, "READY"},
    {ControlType::kRefuse, "REFUSE"},
    {ControlType::kLaneUp, "LANE_UP"},
    {ControlType::kLaneFailed, "LANE_FAILED"},
    {ControlType::kDone, "DONE"},
    {ControlType::kAck, "ACK"},
    {ControlType::kLost, "LOST"},
    {ControlType::kRecover, "RECOVER"},
    {ControlType::kResent, "RESENT"},
    {ControlType::kRelayOpen, "RELAY_OPEN"},
    {ControlType::kRelayReady, "RELAY_READY"},
};

bool HasCounts(ControlType t) {
  return t == ControlType::kMove || t == ControlType::kReady || t == ControlType::kAck ||
         t == ControlType::kRecover || t == ControlType::kResent;
}

json PathJson(const LanePath& p) {
  json j = {{"local_nic", p.local_nic}, {"remote_nic", p.remote_nic}, {"direct", p.direct}};
  if (p.split_min_bytes > 0) j["split_min"] = p.split_min_bytes;
  if (p.direct) {
    j["switch"] = p.circuit.ocs_switch;
    j["port_a"] = p.circuit.port_a;
    j["port_b"] = p.circuit.port_b;
  }
  if (p.direct || p.gbps > 0) j["gbps"] = p.gbps;
  if (!p.stripes.empty()) {
    json stripes = json::array();
    for (const StripePath& s : p.stripes) {
      json e = {{"local_nic", s.local_nic},       {"remote_nic", s.remote_nic},
                {"switch", s.circuit.ocs_switch}, {"port_a", s.circuit.port_a},
                {"port_b", s.circuit.port_b},     {"gbps", s.gbps}};
      if (s.relay()) {
        e["relay_host"] = s.relay_host;
        e["relay_in_nic"] = s.relay_in_nic;
        e["relay_out_nic"] = s.relay_out_nic;
        e["first_direct"] = s.first_direct;
        e["second_direct"] = s.second_direct;
        e["first_switch"] = s.first_circuit.ocs_switch;
        e["first_port_a"] = s.first_circuit.port_a;
        e["first_port_b"] = s.first_circuit.port_b;
      }
      stripes.push_back(std::move(e));
    }
    j["stripes"] = std::move(stripes);
  }
  return j;
}

LanePath PathFromJson(const json& j) {
  LanePath p;
  p.local_nic = j.at("local_nic").get<std::string>();
  p.remote_nic = j.at("remote_nic").get<std::string>();
  p.direct = j.at("direct").get<bool>();
  p.split_min_bytes = j.value("split_min", uint64_t{0});
  if (p.direct) {
    p.circuit.ocs_switch = j.at("switch").get<std::string>();
    p.circuit.port_a = j.at("port_a").get<int>();
    p.circuit.port_b = j.at("port_b").get<int>();
  }
  p.gbps = j.value("gbps", 0.0);
  if (j.contains("stripes")) {
    for (const json& e : j.at("stripes")) {
      StripePath s;
      s.local_nic = e.at("local_nic").get<std::string>();
      s.remote_nic = e.at("remote_nic").get<std::string>();
      s.circuit.ocs_switch = e.at("switch").get<std::string>();
      s.circuit.port_a = e.at("port_a").get<int>();
      s.circuit.port_b = e.at("port_b").get<int>();
      s.gbps = e.at("gbps").get<double>();
      if (e.contains("relay_host")) {
        s.relay_host = e.at("relay_host").get<std::string>();
        s.relay_in_nic = e.at("relay_in_nic").get<std::string>();
        s.relay_out_nic = e.at("relay_out_nic").get<std::string>();
        s.first_direct = e.at("first_direct").get<bool>();
        s.second_direct = e.at("second_direct").get<bool>();
        s.first_circuit.ocs_switch = e.at("first_switch").get<std::string>();
        s.first_circuit.port_a = e.at("first_port_a").get<int>();
        s.first_circuit.port_b = e.at("first_port_b").get<int>();
      }
      p.stripes.push_back(std::move(s));
    }
  }
  return p;
}

bool SameCircuitSpec(const cluster::CircuitSpec& a, const cluster::CircuitSpec& b) {
  return a.ocs_switch == b.ocs_switch && a.port_a == b.port_a && a.port_b == b.port_b;
}

std::string CircuitName(const cluster::CircuitSpec& c) {
  return absl::StrCat(c.ocs_switch, ":", c.port_a, "-", c.port_b);
}

}  // namespace

const char* ControlTypeName(ControlType t) {
  for (const auto& [type, name] : kNames) {
    if (type == t) return name;
  }
  return "?";
}

std::string EncodeControl(const ControlMessage& m) {
  json j = {{"type", ControlTypeName(m.type)}, {"move", m.move_id}};
  switch (m.type) {
    case ControlType::kMove:
      j["target"] = PathJson(m.target);
      j["epoch"] = m.epoch;
      if (m.onto_home) j["home"] = true;
      if (m.reuse_id != 0) j["reuse"] = m.reuse_id;
      break;
    case ControlType::kReady: {
      if (m.onto_home) j["home"] = true;
      if (m.reuse_id != 0) j["reuse"] = m.reuse_id;
      j["address"] = json::binary(std::vector<uint8_t>(m.address.begin(), m.address.end()));
      if (!m.stripe_addresses.empty()) {
        json a = json::array();
        for (const std::string& s : m.stripe_addresses) {
          a.push_back(json::binary(std::vector<uint8_t>(s.begin(), s.end())));
        }
        j["stripe_addresses"] = std::move(a);
      }
      break;
    }
    case ControlType::kRefuse:
    case ControlType::kLaneFailed:
      j["reason"] = m.reason;
      break;
    case ControlType::kRelayOpen:
      j["address"] = json::binary(std::vector<uint8_t>(m.address.begin(), m.address.end()));
      j["relay_in_nic"] = m.relay_in_nic;
      j["relay_out_nic"] = m.relay_out_nic;
      j["downstream"] = m.downstream_id;
      j["name"] = m.name;
      break;
    case ControlType::kRelayReady:
      j["address"] = json::binary(std::vector<uint8_t>(m.address.begin(), m.address.end()));
      j["reason"] = m.reason;
      break;
    case ControlType::kLost:
      j["reason"] = m.reason;
      j["generation"] = m.generation;
      break;
    case ControlType::kRecover:
    case ControlType::kResent: {
      j["generation"] = m.generation;
      json missing = json::array();
      for (const auto& [tag, seqs] : m.missing) missing.push_back({tag, seqs});
      j["missing"] = std::move(missing);
      break;
    }
    default:
      break;
  }
  if (HasCounts(m.type)) {
    json counts = json::array();
    for (const auto& [tag, n] : m.counts) counts.push_back({tag, n});
    j["counts"] = std::move(counts);
  }
  std::vector<uint8_t> bytes = json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

absl::StatusOr<ControlMessage> DecodeControl(const char* data, size_t size) {
  json j = json::from_cbor(data, data + size, /*strict=*/true, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lane control message of ", size, " bytes is not valid CBOR"));
  }
  try {
    ControlMessage m;
    const std::string type = j.at("type").get<std::string>();
    auto it = std::find_if(std::begin(kNames), std::end(kNames),
                           [&](const auto& e) { return type == e.second; });
    if (it == std::end(kNames)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown lane control message '", type, "'"));
    }
    m.type = it->first;
    m.move_id = j.at("move").get<uint64_t>();
    if (m.type == ControlType::kMove) {
      m.target = PathFromJson(j.at("target"));
      m.epoch = j.at("epoch").get<uint64_t>();
    }
    if (m.type == ControlType::kMove || m.type == ControlType::kReady) {
      m.onto_home = j.value("home", false);
      m.reuse_id = j.value("reuse", uint64_t{0});
    }
    if (m.type == ControlType::kReady) {
      const auto& bin = j.at("address").get_binary();
      m.address.assign(bin.begin(), bin.end());
      if (j.contains("stripe_addresses")) {
        for (const json& e : j.at("stripe_addresses")) {
          const auto& b = e.get_binary();
          m.stripe_addresses.emplace_back(b.begin(), b.end());
        }
      }
    }
    if (m.type == ControlType::kRelayOpen || m.type == ControlType::kRelayReady) {
      const auto& bin = j.at("address").get_binary();
      m.address.assign(bin.begin(), bin.end());
    }
    if (m.type == ControlType::kRelayOpen) {
      m.relay_in_nic = j.at("relay_in_nic").get<std::string>();
      m.relay_out_nic = j.at("relay_out_nic").get<std::string>();
      m.downstream_id = j.at("downstream").get<uint64_t>();
      m.name = j.at("name").get<std::string>();
    }
    if (m.type == ControlType::kRefuse || m.type == ControlType::kLaneFailed ||
        m.type == ControlType::kLost || m.type == ControlType::kRelayReady) {
      m.reason = j.at("reason").get<std::string>();
    }
    if (m.type == ControlType::kLost || m.type == ControlType::kRecover ||
        m.type == ControlType::kResent) {
      m.generation = j.at("generation").get<uint64_t>();
    }
    if (m.type == ControlType::kRecover || m.type == ControlType::kResent) {
      for (const json& e : j.at("missing")) {
        m.missing[e.at(0).get<uint32_t>()] = e.at(1).get<std::vector<uint64_t>>();
      }
    }
    if (HasCounts(m.type)) {
      for (const json& e : j.at("counts"))
        m.counts[e.at(0).get<uint32_t>()] = e.at(1).get<uint64_t>();
    }
    return m;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed lane control message: ", e.what()));
  }
}

uint64_t RandomId() {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = nullptr;
  absl::MutexLock lock(&mu);
  if (rng == nullptr) {
    std::random_device rd;
    rng = new std::mt19937_64((uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid()));
  }
  uint64_t v = 0;
  while (v == 0) v = (*rng)();
  return v;
}

TagCounts SwitchPoint(const TagCounts& a, const TagCounts& b) {
  TagCounts m = a;
  for (const auto& [tag, n] : b) m[tag] = std::max(m[tag], n);
  return m;
}

bool LanePath::SameConnections(const LanePath& o) const {
  if (local_nic != o.local_nic || remote_nic != o.remote_nic || direct != o.direct ||
      (direct && !SameCircuitSpec(circuit, o.circuit)) || stripes.size() != o.stripes.size()) {
    return false;
  }
  for (size_t i = 0; i < stripes.size(); ++i) {
    const StripePath &a = stripes[i], &b = o.stripes[i];
    if (a.local_nic != b.local_nic || a.remote_nic != b.remote_nic ||
        !SameCircuitSpec(a.circuit, b.circuit) || a.relay_host != b.relay_host ||
        a.relay_in_nic != b.relay_in_nic || a.relay_out_nic != b.relay_out_nic ||
        a.first_direct != b.first_direct || a.second_direct != b.second_direct ||
        (a.first_direct && !SameCircuitSpec(a.first_circuit, b.first_circuit))) {
      return false;
    }
  }
  return true;
}

bool LanePath::SameAs(const LanePath& o) const {
  if (split_min_bytes != o.split_min_bytes || !SameConnections(o)) return false;
  // A lane with relays carries the routing's shares in its weights: a new
  // routing that moves any connection's share by more than kRelayShareSlack
  // of the bytes wants a new lane (smaller changes keep the lane and its
  // weights; a move costs a few round trips and a relay set-up).
  const bool relays =
      std::any_of(stripes.begin(), stripes.end(), [](const StripePath& p) { return p.relay(); });
  if (!relays) return true;
  auto fractions = [](const LanePath& p) {
    std::vector<double> w{p.gbps};
    for (const StripePath& s : p.stripes) w.push_back(s.gbps);
    double total = 0;
    for (double x : w) total += x;
    for (double& x : w) x = total > 0 ? x / total : 0;
    return w;
  };
  const std::vector<double> fa = fractions(*this), fb = fractions(o);
  for (size_t i = 0; i < fa.size(); ++i) {
    if (std::abs(fa[i] - fb[i]) > kRelayShareSlack) return false;
  }
  return true;
}

std::string LanePath::Describe() const {
  std::string s = absl::StrCat(local_nic.empty() ? "?" : local_nic, " -> ",
                               remote_nic.empty() ? "?" : remote_nic);
  const std::string split =
      split_min_bytes > 0 ? absl::StrCat(", split from ", split_min_bytes, " B") : "";
  if (direct) {
    absl::StrAppend(&s, " (circuit ", CircuitName(circuit), split, ")");
  } else {
    absl::StrAppend(&s, " (EPS", split, ")");
  }
  for (const StripePath& p : stripes) {
    if (p.relay()) {
      absl::StrAppend(
          &s, " + ", p.local_nic, " -> ", p.relay_host, " ", p.relay_in_nic, "/", p.relay_out_nic,
          " -> ", p.remote_nic, " (relay ",
          p.first_direct ? absl::StrCat("circuit ", CircuitName(p.first_circuit))
                         : std::string("EPS"),
          " then ",
          p.second_direct ? absl::StrCat("circuit ", CircuitName(p.circuit)) : std::string("EPS"),
          ")");
    } else {
      absl::StrAppend(&s, " + ", p.local_nic, " -> ", p.remote_nic, " (circuit ",
                      CircuitName(p.circuit), ")");
    }
  }
  return s;
}

}  // namespace mixnet::nccl
