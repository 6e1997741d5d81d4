// The rail-optimised fabric over the flow solver (see rail_fabric.h). Main
// thread.
#include "sim/rail_fabric.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "sim/flow_solver.h"

namespace mixnet::sim {
namespace {

class RailFabric final : public Fabric {
 public:
  RailFabric(const FabricOptions& o, const Layout& l)
      : l_(l),
        rails_(o.nics_per_server),
        group_(o.rail_group_servers),
        nic_Bps_(o.link_gbps * kBytesPerGbit),
        groups_((l.servers + group_ - 1) / group_),
        leaf_Bps_(group_ * nic_Bps_ / o.rail_spine_oversub) {}
  FabricKind kind() const override { return FabricKind::kRail; }
  std::string Routing() const override { return "rail"; }

  absl::StatusOr<PhaseTime> AllToAll(const std::vector<TrafficMatrix>& actual,
                                     const std::vector<TrafficMatrix>&,
                                     const A2AOptions& a) override {
    Bytes bytes;
    const int n = l_.region_servers;
    const bool by_rank = a.ranks != nullptr && a.ranks->size() == actual.size();
    for (int r = 0; r < static_cast<int>(actual.size()); ++r) {
      const int base = r * n;
      if (!by_rank) {
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j)
            if (i != j) Spread(bytes, base + i, base + j, actual[r].at(i, j));
        continue;
      }
      // Rank i's GPU t (region GPU i TP + t) sends 1/TP of rank i's bytes to
      // rank j's GPU t, on the destination GPU's rail.
      const TrafficMatrix& m = (*a.ranks)[r];
      for (int i = 0; i < m.hosts(); ++i)
        for (int j = 0; j < m.hosts(); ++j) {
          const double b = i == j ? 0 : m.at(i, j) / l_.tp;
          if (!(b > 0)) continue;
          for (int t = 0; t < l_.tp; ++t) {
            const int gi = i * l_.tp + t, gj = j * l_.tp + t;
            const int si = base + gi / kGpusPerServer, sj = base + gj / kGpusPerServer;
            if (si != sj) bytes[{si, sj, gj % kGpusPerServer % rails_}] += b;
          }
        }
    }
    return PhaseTime{.seconds = Solve(bytes)};
  }

  // Server-to-server bytes (DP rings, pipeline sends) are GPU t to GPU t:
  // an equal share on every rail.
  double Transfer(const std::vector<ServerFlow>& flows) override {
    Bytes bytes;
    for (const ServerFlow& f : flows) Spread(bytes, f.src, f.dst, f.bytes);
    return Solve(bytes);
  }

 private:
  // (source server, destination server, rail) -> bytes.
  using Bytes = std::map<std::tuple<int, int, int>, double>;

  void Spread(Bytes& bytes, int src, int dst, double b) const {
    if (src == dst || !(b > 0)) return;
    for (int k = 0; k < rails_; ++k) bytes[{src, dst, k}] += b / rails_;
  }

  // Links: server s's NIC k up 2 (s rails + k), down + 1; then leaf (k, g)
  // up to the spine and down from it, when there is more than one leaf per rail.
  double Solve(const Bytes& bytes) const {
    FlowNetwork net;
    for (int s = 0; s < l_.servers; ++s)
      for (int k = 0; k < rails_; ++k) {
        net.AddLink(nic_Bps_);
        net.AddLink(nic_Bps_);
      }
    const int leaf_base = 2 * l_.servers * rails_;
    if (groups_ > 1)
      for (int i = 0; i < rails_ * groups_; ++i) {
        net.AddLink(leaf_Bps_);
        net.AddLink(leaf_Bps_);
      }
    for (const auto& [key, b] : bytes) {
      const auto [src, dst, k] = key;
      const int up = 2 * (src * rails_ + k), down = 2 * (dst * rails_ + k) + 1;
      const int gs = src / group_, gd = dst / group_;
      if (gs == gd) {
        net.AddFlow(b, {up, down});
      } else {
        net.AddFlow(b, {up, leaf_base + 2 * (k * groups_ + gs),
                        leaf_base + 2 * (k * groups_ + gd) + 1, down});
      }
    }
    return SolveMaxMin(net).completion_s;
  }

  Layout l_;
  int rails_;
  int group_;
  double nic_Bps_;
  int groups_;
  double leaf_Bps_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Fabric>> MakeRailFabric(const FabricOptions& o, const Layout& l) {
  if (o.rail_group_servers < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("rail: ", o.rail_group_servers, " servers per rail leaf (at least 1)"));
  if (!(o.rail_spine_oversub >= 1))
    return absl::InvalidArgumentError(
        absl::StrCat("rail: spine oversubscription ", o.rail_spine_oversub, " < 1"));
  if (o.nics_per_server < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("rail: ", o.nics_per_server, " NICs (rails) per server"));
  return std::unique_ptr<Fabric>(std::make_unique<RailFabric>(o, l));
}

}  // namespace mixnet::sim
