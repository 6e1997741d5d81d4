// Validation of ApplyCrossConnectsRequest (see request_validation.h).
#include "ocs_driver/service/request_validation.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mixnet::ocs {

absl::StatusOr<std::vector<Circuit>> ValidateApplyRequest(
    const mixnet::ocs::v1::ApplyCrossConnectsRequest& request, int ports) {
  const size_t bytes = request.ByteSizeLong();
  if (bytes > kMaxApplyRequestBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request of ", bytes, " bytes exceeds the limit of ", kMaxApplyRequestBytes, " bytes"));
  }
  if (request.controller_id().size() > kMaxControllerIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("controller_id of ",
                                                   request.controller_id().size(),
                                                   " bytes exceeds ", kMaxControllerIdBytes));
  }
  if (request.epoch() == 0) return absl::InvalidArgumentError("epoch must be >= 1");
  if (request.epoch() > kMaxEpoch) {
    return absl::InvalidArgumentError(absl::StrCat("epoch ", request.epoch(),
                                                   " exceeds the maximum ", kMaxEpoch,
                                                   " (2^53-1; a negative epoch wrapped?)"));
  }
  if (request.config_version() == 0) {
    return absl::InvalidArgumentError("config_version must be >= 1");
  }
  if (request.circuits_size() > ports / 2) {
    return absl::InvalidArgumentError(absl::StrCat(request.circuits_size(),
                                                   " circuits on a switch of ", ports,
                                                   " ports (at most ", ports / 2, ")"));
  }
  std::vector<Circuit> out;
  std::vector<char> used(static_cast<size_t>(ports) + 1, 0);  // indexed by port, checked in range
  for (int i = 0; i < request.circuits_size(); ++i) {
    const auto& c = request.circuits(i);
    for (uint32_t p : {c.port_a(), c.port_b()}) {
      if (p < 1 || p > static_cast<uint32_t>(ports)) {
        return absl::InvalidArgumentError(absl::StrCat("circuit ", i, " (", c.port_a(), "-",
                                                       c.port_b(), "): port ", p,
                                                       " out of range 1..", ports));
      }
    }
    if (c.port_a() == c.port_b()) {
      return absl::InvalidArgumentError(
          absl::StrCat("circuit ", i, ": self-loop on port ", c.port_a()));
    }
    for (uint32_t p : {c.port_a(), c.port_b()}) {
      if (std::exchange(used[p], 1) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("circuit ", i, " (", c.port_a(), "-",
                                                       c.port_b(), "): port ", p, " used twice"));
      }
    }
    out.push_back(Circuit::Of(static_cast<int>(c.port_a()), static_cast<int>(c.port_b())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mixnet::ocs
