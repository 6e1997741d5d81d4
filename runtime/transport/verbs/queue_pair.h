// One reliable-connected (RC) queue pair: creation on the device's PD and CQ,
// and the INIT -> RTR -> RTS -> ERR transitions. Created and connected on the
// thread that calls Device::Connect; ToError() and destruction may run on any
// thread (the owning connection serializes them).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/verbs_context.h"

namespace mixnet::transport::verbs {

// The RC local ACK timeout exponent (4.096 us x 2^t per try, 7 retries) for
// a device whose paths are dropped after `stall` without answer
// (MIXNET_PATH_STALL_MS on OCS NICs): the largest t whose 8 tries fit in
// `stall`, at least 8; without stall detection (zero) 18, about 1 s per try
// and 8.6 s in all, like NCCL's default.
uint8_t AckTimeoutFor(absl::Duration stall);

class QueuePair {
 public:
  // Creates the QP (in INIT) with room for `send_depth` / `recv_depth` work
  // requests, reserving that many CQ entries.
  static absl::StatusOr<std::unique_ptr<QueuePair>> Create(std::shared_ptr<VerbsContext> ctx,
                                                           int send_depth, int recv_depth);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  ibv_qp* qp() const { return qp_; }
  uint32_t qpn() const { return qp_->qp_num; }
  int send_depth() const { return send_depth_; }
  int recv_depth() const { return recv_depth_; }

  // What the peer needs to connect to this QP.
  QpInfo LocalInfo(uint32_t recv_window, uint32_t slot_bytes) const;
  // RTR then RTS towards `remote`. `peer` names it in errors.
  // `traffic_class`: the GRH's (global routes: RoCE, or IB across subnets);
  // the service level is the device's (VerbsContext::service_level).
  absl::Status Connect(const QpInfo& remote, const std::string& peer, int traffic_class);
  // Moves to ERR: outstanding work requests complete with IBV_WC_WR_FLUSH_ERR.
  absl::Status ToError();

 private:
  QueuePair(std::shared_ptr<VerbsContext> ctx, ibv_qp* qp, int send_depth, int recv_depth,
            uint32_t psn);

  const std::shared_ptr<VerbsContext> ctx_;
  ibv_qp* const qp_;
  const int send_depth_;
  const int recv_depth_;
  const uint32_t psn_;
};

}  // namespace mixnet::transport::verbs
