// Whole-cluster planning, region by region (see cluster_planner.h). Any thread.
#include "runtime/planner/cluster_planner.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet::planner {

absl::StatusOr<ClusterPlanner> ClusterPlanner::Create(
    const cluster::ClusterSpec& spec, int alpha,
    const std::vector<std::vector<std::string>>& host_groups) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  if (!host_groups.empty()) {
    for (size_t i = 0; i < host_groups.size(); ++i) {
      groups.emplace_back(absl::StrCat("group", i), host_groups[i]);
    }
  } else {
    for (const cluster::RegionSpec& r : spec.regions) groups.emplace_back(r.name, r.hosts);
  }
  std::vector<RegionInput> inputs;
  std::set<std::string> seen;
  for (const auto& [name, hosts] : groups) {
    RegionInput in;
    in.name = name;
    for (const std::string& host : hosts) {
      const cluster::HostSpec* h = spec.FindHost(host);
      if (h == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("region '", name, "': host '", host, "' is not in the cluster spec"));
      }
      if (!seen.insert(host).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("region '", name, "': host ", host, " is in more than one region"));
      }
      in.hosts.push_back(host);
      std::vector<OcsPort> ports;
      double eps = 0;
      for (const cluster::NicSpec& nic : h->nics) {
        if (nic.role == cluster::NicRole::kOcs) {
          ports.push_back(OcsPort{nic.name, nic.ocs_switch, nic.ocs_port, nic.gbps});
        } else {
          eps += nic.gbps * 1e9 / 8;
        }
      }
      in.ports.push_back(std::move(ports));
      in.eps_Bps.push_back(eps);
    }
    inputs.push_back(std::move(in));
  }
  return FromRegions(std::move(inputs), alpha);
}

absl::StatusOr<ClusterPlanner> ClusterPlanner::FromRegions(std::vector<RegionInput> regions,
                                                           int alpha) {
  ClusterPlanner p;
  for (size_t r = 0; r < regions.size(); ++r) {
    ASSIGN_OR_RETURN(Region region, Region::Create(std::move(regions[r]), alpha));
    const int ri = static_cast<int>(p.regions_.size());
    for (int h = 0; h < region.hosts(); ++h) {
      const std::vector<OcsPort>& ports = region.input().ports[h];
      for (int k = 0; k < static_cast<int>(ports.size()); ++k) {
        auto [it, added] =
            p.switch_ids_.emplace(ports[k].ocs_switch, static_cast<int>(p.owners_.size()));
        if (added) p.owners_.emplace_back();
        std::vector<Owner>& owners = p.owners_[it->second];
        if (static_cast<int>(owners.size()) <= ports[k].port) owners.resize(ports[k].port + 1);
        Owner& o = owners[ports[k].port];
        if (o.region >= 0) {
          const Region& other = o.region == ri ? region : p.regions_[o.region];
          return absl::InvalidArgumentError(absl::StrCat(
              "OCS port ", ports[k].ocs_switch, ":", ports[k].port, " is cabled twice: host ",
              other.input().hosts[o.ref.host], " of region '", other.input().name, "' and host ",
              region.input().hosts[h], " of region '", region.input().name, "'"));
        }
        o = Owner{ri, PortRef{h, k}};
      }
    }
    std::vector<size_t> base(region.hosts());
    for (int h = 0; h < region.hosts(); ++h) {
      base[h] = p.ports_;
      p.ports_ += region.input().ports[h].size();
    }
    p.port_base_.push_back(std::move(base));
    p.regions_.push_back(std::move(region));
  }
  return p;
}

absl::StatusOr<std::vector<std::vector<PlannedCircuit>>> ClusterPlanner::SplitCircuits(
    const std::vector<cluster::CircuitSpec>& circuits) const {
  std::vector<std::vector<PlannedCircuit>> out(regions_.size());
  for (size_t r = 0; r < regions_.size(); ++r) {
    size_t ports = 0;
    for (const std::vector<OcsPort>& p : regions_[r].input().ports) ports += p.size();
    out[r].reserve(ports / 2);
  }
  std::vector<char> used(ports_, 0);  // per port, flat (port_base_)
  // Circuits come grouped by switch: look a name up once per run of them.
  const std::string* last_name = nullptr;
  const std::vector<Owner>* last_owners = nullptr;
  for (size_t i = 0; i < circuits.size(); ++i) {
    const cluster::CircuitSpec& c = circuits[i];
    auto what = [&] {
      return absl::StrCat("circuits[", i, "] (", c.ocs_switch, " ", c.port_a, "-", c.port_b, ")");
    };
    if (last_name == nullptr || *last_name != c.ocs_switch) {
      auto sw = switch_ids_.find(c.ocs_switch);
      last_name = &c.ocs_switch;
      last_owners = sw == switch_ids_.end() ? nullptr : &owners_[sw->second];
    }
    Owner ends[2];
    const int ports[2] = {c.port_a, c.port_b};
    for (int e = 0; e < 2; ++e) {
      const std::vector<Owner>* owners = last_owners;
      if (owners == nullptr || ports[e] < 0 || ports[e] >= static_cast<int>(owners->size()) ||
          (*owners)[ports[e]].region < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what(), ": port ", c.ocs_switch, ":", ports[e], " is not an OCS port of any region"));
      }
      ends[e] = (*owners)[ports[e]];
      char& u = used[port_base_[ends[e].region][ends[e].ref.host] + ends[e].ref.port];
      if (u) {
        return absl::InvalidArgumentError(absl::StrCat(what(), ": port ", c.ocs_switch, ":",
                                                       ports[e], " is used by another circuit"));
      }
      u = 1;
    }
    if (ends[0].region != ends[1].region) {
      return absl::InvalidArgumentError(
          absl::StrCat(what(), ": crosses regions '", regions_[ends[0].region].input().name,
                       "' and '", regions_[ends[1].region].input().name, "'"));
    }
    if (ends[0].ref.host == ends[1].ref.host) {
      return absl::InvalidArgumentError(
          absl::StrCat(what(), ": both ends are on host ",
                       regions_[ends[0].region].input().hosts[ends[0].ref.host]));
    }
    out[ends[0].region].push_back(PlannedCircuit{ends[0].ref, ends[1].ref});
  }
  return out;
}

absl::StatusOr<ClusterDecision> ClusterPlanner::Plan(
    const std::vector<TrafficMatrix>& demands,
    const std::vector<std::vector<PlannedCircuit>>& current, const PlannerOptions& planner,
    const DecideOptions& decide) const {
  if (demands.size() != regions_.size() || current.size() != regions_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster plan: ", regions_.size(), " regions but ", demands.size(),
                     " traffic matrices and ", current.size(), " current circuit sets"));
  }
  ClusterDecision out;
  out.regions.reserve(regions_.size());
  size_t ports = 0;
  for (const Region& r : regions_) {
    for (const std::vector<OcsPort>& p : r.input().ports) ports += p.size();
  }
  out.circuits.reserve(ports / 2);
  for (size_t r = 0; r < regions_.size(); ++r) {
    ASSIGN_OR_RETURN(RegionPlan plan, PlanRegion(regions_[r], demands[r], current[r], planner));
    const Decision d = Decide(plan, decide);
    for (const PlannedCircuit& c : d.reconfigure ? plan.circuits : current[r]) {
      out.circuits.push_back(regions_[r].ToSpec(c));
    }
    out.regions.push_back(RegionDecision{std::move(plan), d});
  }
  return out;
}

absl::StatusOr<ClusterDecision> ClusterPlanner::Plan(
    const std::vector<TrafficMatrix>& demands, const std::vector<cluster::CircuitSpec>& current,
    const PlannerOptions& planner, const DecideOptions& decide) const {
  ASSIGN_OR_RETURN(std::vector<std::vector<PlannedCircuit>> split, SplitCircuits(current));
  return Plan(demands, split, planner, decide);
}

}  // namespace mixnet::planner
