// The netns OcsBackend over NetnsOcs (see netns_backend.h). Service thread.
#include "ocs_driver/netns/netns_backend.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
                      ChangeReport& report) override {
    report = ChangeReport{};
    for (const Circuit& c : remove) report.outcomes.push_back({c, false, absl::OkStatus()});
    for (const Circuit& c : add) report.outcomes.push_back({c, true, absl::OkStatus()});
    if (report.outcomes.empty()) return absl::OkStatus();
    std::vector<PortPair> gone, wanted;
    for (const Circuit& c : remove) {
      gone.push_back({NetnsOcs::PortName(c.a), NetnsOcs::PortName(c.b)});
    }
    for (const Circuit& c : add) {
      wanted.push_back({NetnsOcs::PortName(c.a), NetnsOcs::PortName(c.b)});
    }
    NetnsOcs::ApplyReport done;
    // One read of the kernel: the change is computed from what it holds.
    absl::Status applied = ocs_->ChangeReporting(gone, wanted, switching_time_, done);
    for (const Redirect& r : done.cleared) {
      report.cleared.push_back(absl::StrCat("one-way redirect ", r.from, " -> ", r.to, " (no ",
                                            r.to, " -> ", r.from, ")"));
      log::Warn("netns {}: removed one-way redirect {} -> {}", ocs_->netns(), r.from, r.to);
    }
    // Netlink batches are not transactions: what the kernel holds now
    // decides each circuit; the failed requests of its ports say why.
    absl::StatusOr<std::vector<Circuit>> after = Read();
    if (!after.ok()) {
      report.read_back = Annotate(after.status(), "reading the circuits back after the change");
      for (CircuitOutcome& o : report.outcomes) {
        o.status = !applied.ok() ? applied : report.read_back;
      }
      return !applied.ok() ? applied : report.read_back;
    }
    report.after = *after;
    absl::Status first;
    for (CircuitOutcome& o : report.outcomes) {
      const bool held = std::binary_search(after->begin(), after->end(), o.circuit);
      if (held == o.add) {
        o.status = absl::OkStatus();
        continue;
      }
      std::vector<std::string> why;
      absl::StatusCode code = absl::StatusCode::kInternal;
      for (int p : {o.circuit.b, o.circuit.a}) {
        auto it = done.failed.find(NetnsOcs::PortName(p));
        if (it == done.failed.end()) continue;
        why.insert(why.begin(), std::string(it->second.message()));
        code = it->second.code();  // a's when both failed
      }
      const std::string what =
          absl::StrCat(o.add ? "add" : "remove", " circuit ", o.circuit.a, "-", o.circuit.b, ": ",
                       o.add ? "not held" : "still held", " after the change");
      if (!why.empty()) {
        o.status = absl::Status(code, absl::StrCat("netns ", ocs_->netns(), ": ", what, ": ",
                                                   absl::StrJoin(why, "; ")));
      } else if (!applied.ok()) {
        o.status = Annotate(applied, absl::StrCat("netns ", ocs_->netns(), ": ", what));
      } else {
        o.status = absl::InternalError(absl::StrCat("netns ", ocs_->netns(), ": ", what));
      }
      if (first.ok()) first = o.status;
    }
    if (first.ok() && !applied.ok()) {
      log::Warn("netns {}: {} but every circuit verified", ocs_->netns(), applied.ToString());
    }
    return first;
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
