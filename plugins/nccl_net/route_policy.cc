// Static route policy (see route_policy.h). Thread: NCCL's proxy service thread.
#include "plugins/nccl_net/route_policy.h"

#include "absl/strings/str_cat.h"

namespace mixnet::nccl {
namespace {

class StaticRoutePolicy : public RoutePolicy {
 public:
  explicit StaticRoutePolicy(int nic_count) : nic_count_(nic_count) {}
  absl::StatusOr<PathChoice> Choose(int requested_nic, const HandleInfo& peer) override {
    if (requested_nic < 0 || requested_nic >= nic_count_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", requested_nic, " out of range (plugin has ", nic_count_, " devices)"));
    }
    PathChoice c;
    c.local_nic = requested_nic;
    c.remote = peer;
    c.epoch = 0;
    c.why = absl::StrCat("static: NCCL chose dev ", requested_nic, ", peer NIC ", peer.nic);
    return c;
  }
  uint64_t epoch() const override { return 0; }

 private:
  const int nic_count_;
};

}  // namespace

std::unique_ptr<RoutePolicy> MakeStaticRoutePolicy(int nic_count) {
  return std::make_unique<StaticRoutePolicy>(nic_count);
}

}  // namespace mixnet::nccl
