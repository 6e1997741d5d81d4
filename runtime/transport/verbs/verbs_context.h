// The ibverbs resources one verbs Device owns and every Connection of it
// shares: the opened device, its port (attributes, GID), one protection
// domain, one completion channel + completion queue, and the registration
// cache. Opened on the thread that creates the Device; afterwards read-only
// except for the thread-safe CQ reservation and registry. Held by shared_ptr
// so the last Connection keeps it alive after its Device is gone.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/transport/transport.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/memory_registry.h"

namespace mixnet::transport::verbs {

class VerbsContext {
 public:
  // Unavailable with the reason when there is no device / port / GID.
  static absl::StatusOr<std::shared_ptr<VerbsContext>> Open(const DeviceOptions& options);
  ~VerbsContext();
  VerbsContext(const VerbsContext&) = delete;
  VerbsContext& operator=(const VerbsContext&) = delete;

  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  ibv_cq* cq() const { return cq_; }
  ibv_comp_channel* channel() const { return channel_; }
  MemoryRegistry& registry() { return *registry_; }

  const std::string& device_name() const { return device_name_; }
  int port() const { return port_; }
  int gid_index() const { return gid_index_; }
  int traffic_class() const { return traffic_class_; }             // DeviceOptions::ib_tc
  int service_level() const { return service_level_; }             // DeviceOptions::ib_sl
  absl::Duration stall_timeout() const { return stall_timeout_; }  // DeviceOptions
  // "mlx5_0:1" and, for messages, "mlx5_0 port 1".
  std::string short_name() const;
  std::string label() const;
  bool ethernet() const { return link_layer_ == IBV_LINK_LAYER_ETHERNET; }
  uint8_t link_layer() const { return link_layer_; }
  uint16_t lid() const { return lid_; }
  const Gid& gid() const { return gid_; }
  ibv_mtu active_mtu() const { return active_mtu_; }
  uint32_t max_msg_bytes() const { return max_msg_bytes_; }
  int max_qp_wr() const { return max_qp_wr_; }
  bool odp() const { return odp_; }

  // Reserves `n` CQ entries for a queue pair's work requests (the CQ must
  // never overflow). ResourceExhausted when the CQ is full.
  absl::Status ReserveCq(int n);
  void ReleaseCq(int n);

 private:
  VerbsContext() = default;
  absl::Status Init(const DeviceOptions& options);
  absl::Status OpenPort(const DeviceOptions& options);

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::unique_ptr<MemoryRegistry> registry_;
  std::string device_name_;
  int port_ = 1;
  int gid_index_ = 0;
  int traffic_class_ = 0;
  int service_level_ = 0;
  absl::Duration stall_timeout_ = absl::ZeroDuration();
  std::string ifname_;    // the NIC's interface ("" when not known)
  std::string nic_ipv4_;  // its IPv4 address ("" when not known)
  uint8_t link_layer_ = IBV_LINK_LAYER_INFINIBAND;
  uint16_t lid_ = 0;
  Gid gid_{};
  ibv_mtu active_mtu_ = IBV_MTU_1024;
  uint32_t max_msg_bytes_ = 1u << 30;
  int max_qp_wr_ = 1024;
  bool odp_ = false;

  absl::Mutex mu_;
  int cq_capacity_ = 0;
  int cq_reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

// "<label>: <call> failed: <strerror> (errno N)" for verbs calls that return
// an errno value (ibv_modify_qp, ibv_post_send, ...) or set errno.
absl::Status VerbsError(const std::string& what, const char* call, int err);

}  // namespace mixnet::transport::verbs
