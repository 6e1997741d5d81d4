// Duplex circuits over one-way connections (see duplex.h). Pure functions.
#include "ocs_driver/polatis/duplex.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace mixnet::ocs::polatis {

std::string CircuitText(const Circuit& c) { return absl::StrCat("{", c.a, ",", c.b, "}"); }

std::vector<OneWay> ConnectionsOf(const Circuit& c, int ingress_ports) {
  return {{c.a, ingress_ports + c.b}, {c.b, ingress_ports + c.a}};
}

std::vector<Circuit> CircuitsOf(const std::vector<OneWay>& connections, int ingress_ports,
                                int ports, std::vector<std::string>* leftovers) {
  std::map<int, int> peer;  // ingress -> duplex peer, inside the duplex range
  for (const auto& [in, eg] : connections) {
    int b = eg - ingress_ports;
    if (in < 1 || in > ports || b < 1 || b > ports) {
      if (leftovers) {
        leftovers->push_back(absl::StrCat("ingress ", in, " -> egress ", eg,
                                          " is outside the duplex port range 1..", ports));
      }
      continue;
    }
    if (in == b) {
      if (leftovers) {
        leftovers->push_back(absl::StrCat("ingress ", in, " -> egress ", eg, " loops duplex port ",
                                          in, " back to itself"));
      }
      continue;
    }
    peer[in] = b;
  }
  std::vector<Circuit> circuits;
  for (const auto& [a, b] : peer) {
    auto back = peer.find(b);
    if (back != peer.end() && back->second == a) {
      if (a < b) circuits.push_back(Circuit{a, b});
      continue;
    }
    if (leftovers) {
      leftovers->push_back(absl::StrCat(
          "one-way connection ingress ", a, " -> egress ", ingress_ports + b, " (duplex ", a,
          " -> ", b, ") has no reverse ingress ", b, " -> egress ", ingress_ports + a));
    }
  }
  std::sort(circuits.begin(), circuits.end());
  return circuits;
}

std::vector<OneWay> LeftoversOn(const std::vector<OneWay>& connections, int ingress_ports,
                                int ports, const std::set<int>& touched) {
  std::set<OneWay> all(connections.begin(), connections.end());
  std::vector<OneWay> out;
  for (const auto& [in, eg] : all) {
    const int b = eg - ingress_ports;
    const bool in_circuit = in >= 1 && in <= ports && b >= 1 && b <= ports && b != in &&
                            all.count({b, ingress_ports + in});
    if (in_circuit) continue;
    if (touched.count(in) || touched.count(b)) out.push_back({in, eg});
  }
  return out;
}

std::vector<OneWay> LeftoversToClear(const std::vector<OneWay>& connections, int ingress_ports,
                                     int ports, const std::set<int>& touched,
                                     const std::vector<Circuit>& remove) {
  std::set<OneWay> removing;
  for (const Circuit& c : remove) {
    for (const OneWay& x : ConnectionsOf(c, ingress_ports)) removing.insert(x);
  }
  std::vector<OneWay> out;
  for (const OneWay& l : LeftoversOn(connections, ingress_ports, ports, touched)) {
    if (!removing.count(l)) out.push_back(l);
  }
  return out;
}

std::string OneWayText(const OneWay& c, int ingress_ports) {
  const int b = c.second - ingress_ports;
  if (b == c.first) {
    return absl::StrCat("ingress ", c.first, " -> egress ", c.second, " (loops duplex port ",
                        c.first, " to itself)");
  }
  return absl::StrCat("ingress ", c.first, " -> egress ", c.second, " (duplex ", c.first, " -> ", b,
                      ", one-way)");
}

absl::Status VerifyOutcomes(
    const std::set<OneWay>& held, int ingress_ports, std::vector<CircuitOutcome>& outcomes,
    const std::function<absl::Status(const CircuitOutcome&, const std::string& state)>& why) {
  absl::Status first;
  for (auto& o : outcomes) {
    std::vector<OneWay> cs = ConnectionsOf(o.circuit, ingress_ports);
    int present = 0;
    for (const auto& x : cs) present += static_cast<int>(held.count(x));
    if (o.add ? present == 2 : present == 0) {
      o.status = absl::OkStatus();
      continue;
    }
    std::string state = absl::StrCat(present, " of its 2 connections (ingress ", cs[0].first,
                                     "->egress ", cs[0].second, ", ingress ", cs[1].first,
                                     "->egress ", cs[1].second, ") held after the change");
    o.status = why(o, state);
    if (o.status.ok()) o.status = absl::InternalError(state);
    if (first.ok()) first = o.status;
  }
  return first;
}

}  // namespace mixnet::ocs::polatis
