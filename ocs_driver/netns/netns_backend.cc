// The netns OcsBackend over NetnsOcs (see netns_backend.h). Service thread.
#include "ocs_driver/netns/netns_backend.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ocs_driver/netns/netns_ocs.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

class NetnsBackend : public OcsBackend {
 public:
  NetnsBackend(std::unique_ptr<NetnsOcs> ocs, int ports, absl::Duration switching_time)
      : ocs_(std::move(ocs)), ports_(ports), switching_time_(switching_time) {}

  absl::StatusOr<BackendInfo> Info() override {
    BackendInfo info;
    info.backend = "netns";
    info.vendor = "MixNet";
    info.model = "netns";
    info.serial = ocs_->netns();
    info.firmware = "linux tc (u32 + mirred)";
    info.ports = ports_;
    info.switching_time = switching_time_;
    return info;
  }

  absl::StatusOr<std::vector<Circuit>> Read() override {
    ASSIGN_OR_RETURN(std::vector<PortPair> pairs, ocs_->List());
    std::vector<Circuit> out;
    for (const PortPair& p : pairs) {
      absl::StatusOr<int> a = NetnsOcs::PortNumber(p.a), b = NetnsOcs::PortNumber(p.b);
      if (!a.ok() || !b.ok()) {
        log::Warn("netns {}: circuit {}-{} joins interfaces that are not ports p<N>; ignored",
                  ocs_->netns(), p.a, p.b);
        continue;
      }
      out.push_back(Circuit::Of(*a, *b));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  absl::Status Change(const std::vector<Circuit>& remove, const std::vector<Circuit>& add,
                      std::vector<CircuitOutcome>& outcomes) override {
    outcomes.clear();
    absl::StatusOr<std::vector<PortPair>> current = ocs_->List();
    absl::Status status = current.status();
    if (status.ok()) {
      std::set<std::pair<std::string, std::string>> gone;
      for (const Circuit& c : remove) {
        gone.insert({NetnsOcs::PortName(c.a), NetnsOcs::PortName(c.b)});
      }
      std::vector<PortPair> desired;
      for (const PortPair& p : *current) {
        if (!gone.count({p.a, p.b}) && !gone.count({p.b, p.a})) desired.push_back(p);
      }
      for (const Circuit& c : add) {
        desired.push_back({NetnsOcs::PortName(c.a), NetnsOcs::PortName(c.b)});
      }
      status = ocs_->Apply(desired, switching_time_).status();
    }
    // One netlink batch: all or nothing.
    for (const Circuit& c : remove) outcomes.push_back({c, false, status});
    for (const Circuit& c : add) outcomes.push_back({c, true, status});
    return status;
  }

 private:
  const std::unique_ptr<NetnsOcs> ocs_;
  const int ports_;
  const absl::Duration switching_time_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<OcsBackend>> OpenNetnsBackend(const NetnsBackendOptions& options) {
  if (options.ports < 0) return absl::InvalidArgumentError("netns: negative --ports");
  ASSIGN_OR_RETURN(std::unique_ptr<NetnsOcs> ocs, NetnsOcs::Open(options.netns));
  int ports = options.ports;
  if (ports == 0) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ocs->Ports());
    for (const std::string& n : names) {
      absl::StatusOr<int> p = NetnsOcs::PortNumber(n);
      if (p.ok()) ports = std::max(ports, *p);
    }
    if (ports < 2) {
      return absl::FailedPreconditionError(
          absl::StrCat("netns ", options.netns, ": fewer than 2 ports p<N> found; give --ports"));
    }
  }
  return std::unique_ptr<OcsBackend>(
      new NetnsBackend(std::move(ocs), ports, options.switching_time));
}

}  // namespace mixnet::ocs
