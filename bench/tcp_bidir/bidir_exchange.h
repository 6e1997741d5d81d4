// A two-host exchange on the emulated cluster for the TCP transport: both
// hosts send each other one message at the same time over one shaped link
// pair (EPS through the bridge, or an OCS circuit), the way an all-to-all
// of two ranks does (each posts its receive, then its send). It measures
// the time, the floor (the bytes that crossed the busier NIC over its rate)
// and whether the two directions were in flight at once: the share of the
// slower direction's bytes that had crossed its NIC when the faster one
// finished (1 when both ran side by side, near 0 when one waited for the
// other). Used by mixnet_tcp_bidir_bench and tests/transport's
// tcp_bidir_netns_test. Needs root (network namespaces).
//
// Threads: BidirFabric's methods run on the caller's thread and start helper
// threads (one per host, inside its namespace, plus a NIC-counter sampler)
// that they join before returning; the transport devices run their own
// progress threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "emulation/emulated_fabric.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/transport/transport.h"

namespace mixnet::bench {

// Two hosts h0, h1, each with an EPS NIC eps0 (10.31.0.x, through the
// bridge) and an OCS NIC ocs0 (10.32.0.x, a circuit between their ports),
// every link at `gbps` in each direction.
std::string BidirSpecYaml(double gbps);

// TCP congestion control for the host namespaces: cubic (the emulation's
// default) when this machine lets a namespace choose it
// (net.ipv4.tcp_allowed_congestion_control), else reno (always allowed;
// loss-based like cubic).
std::string AllowedCongestionControl();

struct BidirOptions {
  std::string link = "eps";                      // "eps" or "circuit"
  size_t bytes = 8 << 20;                        // per direction
  size_t eager_bytes = 64 << 10;                 // DeviceOptions::eager_bytes of both ends
  int sockets_per_connection = 2;                // DeviceOptions::sockets_per_connection
  size_t chunk_bytes = 256 << 10;                // DeviceOptions::chunk_bytes
  absl::Duration skew = absl::Milliseconds(20);  // h1 posts this much after h0
  absl::Duration timeout = absl::Seconds(60);    // every wait
};

struct BidirResult {
  double seconds = 0;          // first post to the last receive completed
  double floor_seconds = 0;    // max over the two NICs of tx bytes / rate
  double done_s[2] = {0, 0};   // receive completed on h0 (h1 -> h0) and on h1 (h0 -> h1)
  double start_s[2] = {0, 0};  // when 5% of the bytes towards h0 / h1 had crossed the sender's NIC
  uint64_t nic_bytes[2] = {0, 0};  // tx bytes of h1's NIC (towards h0) and of h0's (towards h1)
  // Share of the slower direction's NIC bytes that had crossed when the
  // faster direction's receive completed.
  double overlap = 0;
  uint64_t retransmits = 0;  // TCP RetransSegs of both hosts during the exchange
  double ratio() const { return floor_seconds > 0 ? seconds / floor_seconds : 0; }
};

// An emulated two-host fabric (BidirSpecYaml) that runs exchanges.
class BidirFabric {
 public:
  // Brings the namespaces up under `prefix` (torn down by the destructor),
  // the hosts running TCP congestion control `congestion`.
  static absl::StatusOr<std::unique_ptr<BidirFabric>> Up(double gbps, const std::string& prefix,
                                                         const std::string& congestion);
  ~BidirFabric();
  BidirFabric(const BidirFabric&) = delete;
  BidirFabric& operator=(const BidirFabric&) = delete;

  // Connects a fresh device pair with `o`'s settings, runs one exchange,
  // checks every byte that arrived and closes the connection.
  absl::StatusOr<BidirResult> Exchange(const BidirOptions& o);
  absl::Status Down();
  const std::string& prefix() const { return fabric_->prefix(); }
  double rate_bytes_per_s() const { return gbps_ * 1e9 / 8; }

 private:
  BidirFabric(double gbps, std::unique_ptr<emulation::EmulatedFabric> fabric)
      : gbps_(gbps), fabric_(std::move(fabric)) {}
  const double gbps_;
  std::unique_ptr<emulation::EmulatedFabric> fabric_;
};

}  // namespace mixnet::bench
