// ExpertPlacement construction and checks (see expert_placement.h).
#include "runtime/locality/expert_placement.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace mixnet {

absl::StatusOr<ExpertPlacement> ExpertPlacement::Create(PlacementTables tables) {
  const int hosts = static_cast<int>(tables.hosts.size());
  if (hosts == 0) return absl::InvalidArgumentError("expert placement: no hosts");
  if (tables.rank_host.empty()) return absl::InvalidArgumentError("expert placement: no ranks");
  if (tables.expert_rank.empty()) {
    return absl::InvalidArgumentError("expert placement: no experts");
  }
  if (tables.host_region.empty()) tables.host_region.assign(hosts, "");
  if (static_cast<int>(tables.host_region.size()) != hosts) {
    return absl::InvalidArgumentError(absl::StrCat("expert placement: host_region has ",
                                                   tables.host_region.size(), " entries for ",
                                                   hosts, " hosts"));
  }
  absl::flat_hash_map<std::string, int> seen;
  for (int h = 0; h < hosts; ++h) {
    if (tables.hosts[h].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: hosts[", h, "] is empty"));
    }
    auto [it, inserted] = seen.emplace(tables.hosts[h], h);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: hosts[", h, "] '",
                                                     tables.hosts[h], "' repeats hosts[",
                                                     it->second, "]"));
    }
  }
  std::vector<int> ranks_on_host(hosts, 0);
  for (size_t r = 0; r < tables.rank_host.size(); ++r) {
    const int h = tables.rank_host[r];
    if (h < 0 || h >= hosts) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: rank_host[", r, "] = ", h,
                                                     " out of range [0, ", hosts, ")"));
    }
    ++ranks_on_host[h];
  }
  for (int h = 0; h < hosts; ++h) {
    if (ranks_on_host[h] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert placement: host ", h, " '", tables.hosts[h], "' has no EP rank"));
    }
  }
  const int ranks = static_cast<int>(tables.rank_host.size());
  for (size_t e = 0; e < tables.expert_rank.size(); ++e) {
    const int r = tables.expert_rank[e];
    if (r < 0 || r >= ranks) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: expert_rank[", e, "] = ", r,
                                                     " out of range [0, ", ranks, ")"));
    }
  }

  ExpertPlacement p;
  p.host_region_id_.assign(hosts, -1);
  p.host_local_.assign(hosts, -1);
  for (int h = 0; h < hosts; ++h) {
    const std::string& name = tables.host_region[h];
    if (name.empty()) continue;
    int id = p.FindRegion(name);
    if (id < 0) {
      id = static_cast<int>(p.region_names_.size());
      p.region_names_.push_back(name);
      p.region_hosts_.emplace_back();
    }
    p.host_region_id_[h] = id;
    p.host_local_[h] = static_cast<int>(p.region_hosts_[id].size());
    p.region_hosts_[id].push_back(h);
  }
  p.t_ = std::move(tables);
  return p;
}

int ExpertPlacement::FindRegion(const std::string& name) const {
  for (size_t i = 0; i < region_names_.size(); ++i) {
    if (region_names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<ExpertPlacement> ExpertPlacement::FromCluster(
    const cluster::ClusterSpec& spec, const ClusterPlacementOptions& options) {
  if (options.num_experts <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert placement: num_experts must be > 0, got ", options.num_experts));
  }
  if (options.ranks_per_host < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert placement: ranks_per_host must be >= 0, got ", options.ranks_per_host));
  }
  std::vector<std::string> names = options.hosts;
  if (names.empty() && !options.region.empty()) {
    const cluster::RegionSpec* region = nullptr;
    for (const auto& r : spec.regions) {
      if (r.name == options.region) region = &r;
    }
    if (region == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: region '", options.region,
                                                     "' not in spec '", spec.name, "'"));
    }
    names = region->hosts;
  }
  if (names.empty()) {
    for (const auto& h : spec.hosts) names.push_back(h.name);
  }

  PlacementTables t;
  for (size_t i = 0; i < names.size(); ++i) {
    const cluster::HostSpec* host = spec.FindHost(names[i]);
    if (host == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: hosts[", i, "] '", names[i],
                                                     "' not in spec '", spec.name, "'"));
    }
    const int ranks = options.ranks_per_host > 0 ? options.ranks_per_host : host->gpus;
    if (ranks <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert placement: host '", host->name, "' has ", ranks, " GPUs"));
    }
    t.hosts.push_back(host->name);
    t.host_region.push_back(host->region);
    for (int k = 0; k < ranks; ++k) t.rank_host.push_back(static_cast<int>(i));
  }
  const int ranks = static_cast<int>(t.rank_host.size());
  if (options.num_experts % ranks != 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert placement: ", options.num_experts,
                                                   " experts do not split evenly over ", ranks,
                                                   " EP ranks"));
  }
  const int per_rank = options.num_experts / ranks;
  for (int e = 0; e < options.num_experts; ++e) t.expert_rank.push_back(e / per_rank);
  return Create(std::move(t));
}

}  // namespace mixnet
