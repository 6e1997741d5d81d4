// What the demo's workers sample around each all-to-all to show what bounds
// it: the byte counters of this host's NICs (/proc/self/net/dev, which is
// the calling thread's network namespace), TCP retransmissions
// (/proc/self/net/snmp), the machine's CPU time (/proc/stat), and, for rank 0
// of an oversubscribed fabric, the leaf uplinks' counters in the EPS
// namespace (netlink). Called on the worker's main thread (also by
// mixnet_route_bench's workers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mixnet::netns {
class NlSocket;
}

namespace mixnet::demo {

struct ByteCounters {
  uint64_t rx = 0;
  uint64_t tx = 0;
};

// Counters of `ifnames` in this namespace; NotFound naming a missing one.
absl::StatusOr<std::map<std::string, ByteCounters>> ReadNicCounters(
    const std::vector<std::string>& ifnames);
// Tcp RetransSegs of this namespace.
absl::StatusOr<uint64_t> ReadTcpRetransmits();

struct CpuTimes {
  uint64_t idle = 0;   // idle + iowait jiffies, all CPUs
  uint64_t total = 0;  // all jiffies, all CPUs
};
absl::StatusOr<CpuTimes> ReadCpuTimes();

// Byte counters of links in another namespace (the EPS uplinks), through a
// netlink socket opened there once.
class RemoteLinkCounters {
 public:
  static absl::StatusOr<std::unique_ptr<RemoteLinkCounters>> Open(const std::string& netns,
                                                                  std::vector<std::string> ifnames);
  ~RemoteLinkCounters();
  absl::StatusOr<std::map<std::string, ByteCounters>> Read();

 private:
  RemoteLinkCounters(std::unique_ptr<netns::NlSocket> sock, std::vector<std::string> ifnames);
  std::unique_ptr<netns::NlSocket> sock_;
  std::vector<std::string> ifnames_;
};

// {ifname: [rx, tx]} (the workers' result lines) and back; the reader is
// InvalidArgument for anything else.
nlohmann::json CountersToJson(const std::map<std::string, ByteCounters>& m);
absl::StatusOr<std::map<std::string, ByteCounters>> CountersFromJson(const nlohmann::json& j);

// b - a per interface (interfaces of `b`; missing in `a` counts from 0).
std::map<std::string, ByteCounters> Delta(const std::map<std::string, ByteCounters>& a,
                                          const std::map<std::string, ByteCounters>& b);

}  // namespace mixnet::demo
