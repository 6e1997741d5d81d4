// RC queue pair creation and state transitions (see queue_pair.h).
#include "runtime/transport/verbs/queue_pair.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::transport::verbs {
namespace {

// Local ACK timeout 4.096 us * 2^18 (about 1 s) and 7 retries, like NCCL's
// defaults; a dead peer is normally noticed sooner through the bootstrap
// socket. RNR retries are unlimited; credits keep the receive queue from
// running dry, so RNR only happens while an ODP page fault is being served,
// hence the short RNR timer.
constexpr uint8_t kAckTimeout = 18;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetry = 7;
constexpr uint8_t kMinRnrTimer = 5;  // 0.06 ms
// With stall detection (OCS NICs) the ACK timeout is cut so that retries end
// within the stall time, but not below 4.096 us x 2^8 (1 ms per try): a
// circuit is one hop, yet the peer's HCA still needs its turn.
constexpr uint8_t kMinAckTimeout = 8;

}  // namespace

uint8_t AckTimeoutFor(absl::Duration stall) {
  if (stall <= absl::ZeroDuration()) return kAckTimeout;
  // The largest t with (retries + 1) x 4.096 us x 2^t within the stall time.
  const double per_try_us = absl::ToDoubleMicroseconds(stall) / (kRetryCount + 1);
  int t = 0;
  while (t < kAckTimeout && 4.096 * std::ldexp(1.0, t + 1) <= per_try_us) ++t;
  return static_cast<uint8_t>(std::max(t, static_cast<int>(kMinAckTimeout)));
}

namespace {

uint32_t RandomPsn() {
  static thread_local std::mt19937 rng(std::random_device{}());
  return rng() & 0xffffff;
}

}  // namespace

absl::StatusOr<std::unique_ptr<QueuePair>> QueuePair::Create(std::shared_ptr<VerbsContext> ctx,
                                                             int send_depth, int recv_depth) {
  send_depth = std::min(send_depth, ctx->max_qp_wr());
  recv_depth = std::min(recv_depth, ctx->max_qp_wr());
  RETURN_IF_ERROR(ctx->ReserveCq(send_depth + recv_depth));
  ibv_qp_init_attr init{};
  init.send_cq = ctx->cq();
  init.recv_cq = ctx->cq();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = static_cast<uint32_t>(send_depth);
  init.cap.max_recv_wr = static_cast<uint32_t>(recv_depth);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(ctx->pd(), &init);
  if (qp == nullptr) {
    int err = errno;
    ctx->ReleaseCq(send_depth + recv_depth);
    return VerbsError(ctx->label(), "ibv_create_qp(RC)", err);
  }
  std::unique_ptr<QueuePair> q(new QueuePair(ctx, qp, send_depth, recv_depth, RandomPsn()));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(ctx->port());
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc =
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    return VerbsError(absl::StrCat(ctx->label(), " QP ", qp->qp_num), "ibv_modify_qp(INIT)", rc);
  }
  return q;
}

QueuePair::QueuePair(std::shared_ptr<VerbsContext> ctx, ibv_qp* qp, int send_depth, int recv_depth,
                     uint32_t psn)
    : ctx_(std::move(ctx)), qp_(qp), send_depth_(send_depth), recv_depth_(recv_depth), psn_(psn) {}

QueuePair::~QueuePair() {
  uint32_t qpn = qp_->qp_num;
  int rc = ibv_destroy_qp(qp_);
  if (rc != 0) {
    log::Warn("{}: ibv_destroy_qp of QP {} failed: {} (errno {})", ctx_->label(), qpn,
              ErrnoText(rc), rc);
  }
  ctx_->ReleaseCq(send_depth_ + recv_depth_);
}

QpInfo QueuePair::LocalInfo(uint32_t recv_window, uint32_t slot_bytes) const {
  QpInfo i;
  i.qpn = qp_->qp_num;
  i.psn = psn_;
  i.lid = ctx_->lid();
  i.mtu = static_cast<uint8_t>(ctx_->active_mtu());
  i.link_layer = ctx_->link_layer();
  i.gid = ctx_->gid();
  i.recv_window = recv_window;
  i.slot_bytes = slot_bytes;
  i.name = ctx_->short_name();
  return i;
}

absl::Status QueuePair::Connect(const QpInfo& remote, const std::string& peer, int traffic_class) {
  const std::string what = absl::StrCat(ctx_->label(), " QP ", qp_->qp_num, " to ", peer, " (",
                                        remote.name, " QP ", remote.qpn, ")");
  if (remote.link_layer != ctx_->link_layer()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": link layers differ (local ", ctx_->ethernet() ? "Ethernet/RoCE" : "InfiniBand",
        ", remote ", remote.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet/RoCE" : "InfiniBand",
        ")"));
  }
  if (remote.mtu < IBV_MTU_256 || remote.mtu > IBV_MTU_4096) {
    return absl::DataLossError(absl::StrCat(what, ": peer sent invalid MTU code ", remote.mtu));
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(ctx_->active_mtu(), static_cast<ibv_mtu>(remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = kMinRnrTimer;
  a.ah_attr.port_num = static_cast<uint8_t>(ctx_->port());
  a.ah_attr.sl = static_cast<uint8_t>(ctx_->service_level());
  a.ah_attr.src_path_bits = 0;
  a.ah_attr.dlid = remote.lid;
  // RoCE always routes by GID; InfiniBand by LID within the subnet.
  if (ctx_->ethernet() || remote.lid == 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(ctx_->gid_index());
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = static_cast<uint8_t>(traffic_class);
    a.ah_attr.grh.flow_label = 0;
  }
  int rc = ibv_modify_qp(qp_, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) return VerbsError(what, "ibv_modify_qp(RTR)", rc);
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = AckTimeoutFor(ctx_->stall_timeout());
  s.retry_cnt = kRetryCount;
  s.rnr_retry = kRnrRetry;
  s.sq_psn = psn_;
  s.max_rd_atomic = 1;
  rc = ibv_modify_qp(qp_, &s,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return VerbsError(what, "ibv_modify_qp(RTS)", rc);
  return absl::OkStatus();
}

absl::Status QueuePair::ToError() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE);
  if (rc != 0) {
    return VerbsError(absl::StrCat(ctx_->label(), " QP ", qp_->qp_num), "ibv_modify_qp(ERR)", rc);
  }
  return absl::OkStatus();
}

}  // namespace mixnet::transport::verbs
