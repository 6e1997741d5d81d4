// The plugin's interface when MIXNET_SOCKET_IFNAME is not set, chosen the way
// NCCL's socket transport chooses when NCCL_SOCKET_IFNAME is not set, so a
// multi-host job works out of the box: among the interfaces that are up and
// have an IPv4 address, in the system's order, IPoIB ones (ib*) first, then
// any other that is neither loopback nor docker-style (docker*, virbr*,
// veth*: container bridges and their pair ends, which carry the same
// addresses on every host and reach no other host); only when there is none,
// a docker-style one, then loopback. One interface is chosen (NCCL's rail
// layout across several needs MIXNET_SOCKET_IFNAME).
// Runs on NCCL's init thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mixnet::nccl {

// One interface as the system lists it (first IPv4 address; empty: none).
struct InterfaceEntry {
  std::string name;
  std::string ip;
  bool up = false;
  bool loopback = false;  // IFF_LOOPBACK
};

struct InterfaceChoice {
  std::string ifname;
  std::string ip;
  // For the INFO log: what was chosen, why, and what was passed over.
  std::string explanation;
};

// Pure: the choice among `interfaces` (system order). NotFound when no
// interface is up with an IPv4 address.
absl::StatusOr<InterfaceChoice> ChooseInterface(const std::vector<InterfaceEntry>& interfaces);

// This network namespace's interfaces (getifaddrs), in the system's order.
absl::StatusOr<std::vector<InterfaceEntry>> ListInterfaces();

}  // namespace mixnet::nccl
