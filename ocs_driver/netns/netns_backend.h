// The `netns` backend of mixnet-ocsd: the emulated OCS of the emulated cluster
// (a network namespace whose interfaces "p<port>" are switch ports), adapted
// from NetnsOcs to the OcsBackend interface. Duplex port p is interface "p<p>".
// Change computes the whole desired set (current - remove + add) and hands it
// to NetnsOcs::ApplyReporting with dark_for = the switching time, so the
// changed ports go dark for that long; unchanged circuits are not touched
// (one-way redirects anywhere are removed and listed in report.cleared). It is
// not all-or-nothing: netlink batches are not transactions (and with a
// switching time there are two, with the sleep between), so each circuit's
// outcome is decided by reading the circuits back afterwards, with the
// kernel's error for the failed requests of its ports as the message.
//
// Threading: one call at a time (the service serialises backend calls);
// NetnsOcs locks itself as well.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ocs_driver/backend.h"

namespace mixnet::ocs {

struct NetnsBackendOptions {
  std::string netns;              // the OCS namespace (must exist)
  int ports = 0;                  // 0: the highest p<N> present
  absl::Duration switching_time;  // changed ports are dark this long
};

// Opens the namespace; NotFound when it does not exist, FailedPrecondition
// when it has no p<N> ports and none were given.
absl::StatusOr<std::unique_ptr<OcsBackend>> OpenNetnsBackend(const NetnsBackendOptions& options);

}  // namespace mixnet::ocs
