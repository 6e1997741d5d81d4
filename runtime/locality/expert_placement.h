// ExpertPlacement: where each MoE expert lives (expert -> EP rank -> host) and
// which region (OCS domain) each host belongs to. Built once per job, either
// from the cluster spec (ranks laid out host by host, experts in contiguous
// blocks per rank, as Megatron and DeepSpeed place them) or from explicit
// tables. Immutable after construction; safe to share across threads.
//
// Indices: hosts are numbered 0..num_hosts()-1 in the placement's order,
// EP ranks 0..num_ranks()-1, experts 0..num_experts()-1, regions
// 0..num_regions()-1 in order of first appearance. A region's matrix uses
// region-local host indices: position in RegionHosts(region).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet {

// Explicit placement tables (all indices 0-based).
struct PlacementTables {
  std::vector<std::string> hosts;        // host names, index = host id
  std::vector<std::string> host_region;  // region name per host; "" = in no region
  std::vector<int> rank_host;            // EP rank -> host id
  std::vector<int> expert_rank;          // expert -> EP rank
};

// How to derive a placement from a cluster spec.
struct ClusterPlacementOptions {
  int num_experts = 0;
  // EP ranks per host; 0 = each host's `gpus`.
  int ranks_per_host = 0;
  // The EP group's hosts in rank order. Empty: the hosts of `region`, or every
  // host of the spec (in spec order) when `region` is empty too.
  std::vector<std::string> hosts;
  std::string region;
};

class ExpertPlacement {
 public:
  // InvalidArgument naming the offending entry when a table is empty, an
  // index is out of range, a host name repeats or a host has no rank.
  static absl::StatusOr<ExpertPlacement> Create(PlacementTables tables);
  // Experts are split into equal contiguous blocks: rank r holds experts
  // [r * E / R, (r + 1) * E / R). InvalidArgument when E is not a multiple of
  // the number of ranks, a host is unknown, or counts are not positive.
  static absl::StatusOr<ExpertPlacement> FromCluster(const cluster::ClusterSpec& spec,
                                                     const ClusterPlacementOptions& options);

  int num_experts() const { return static_cast<int>(t_.expert_rank.size()); }
  int num_ranks() const { return static_cast<int>(t_.rank_host.size()); }
  int num_hosts() const { return static_cast<int>(t_.hosts.size()); }
  int num_regions() const { return static_cast<int>(region_names_.size()); }

  int RankOfExpert(int expert) const { return t_.expert_rank[expert]; }
  int HostOfRank(int rank) const { return t_.rank_host[rank]; }
  int HostOfExpert(int expert) const { return t_.rank_host[t_.expert_rank[expert]]; }
  const std::string& HostName(int host) const { return t_.hosts[host]; }

  // Region id of a host, -1 when the host is in no region.
  int RegionOfHost(int host) const { return host_region_id_[host]; }
  // Position of a host inside its region's matrix (-1 when in no region).
  int LocalIndex(int host) const { return host_local_[host]; }
  const std::string& RegionName(int region) const { return region_names_[region]; }
  // Region id by name, or -1.
  int FindRegion(const std::string& name) const;
  // Host ids of a region in region-local order.
  const std::vector<int>& RegionHosts(int region) const { return region_hosts_[region]; }

  const PlacementTables& tables() const { return t_; }

 private:
  PlacementTables t_;
  std::vector<int> host_region_id_;
  std::vector<int> host_local_;
  std::vector<std::string> region_names_;
  std::vector<std::vector<int>> region_hosts_;
};

}  // namespace mixnet
