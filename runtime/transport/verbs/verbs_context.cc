// Opening an RDMA device, port, PD, completion channel and CQ (see
// verbs_context.h). Runs on the thread that creates the Device; the CQ
// reservation is thread-safe.
#include "runtime/transport/verbs/verbs_context.h"

#include <fcntl.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/verbs/bootstrap.h"
#include "runtime/transport/verbs/nic_adapter.h"

namespace mixnet::transport::verbs {
namespace {

constexpr int kMaxCqEntries = 1 << 16;

absl::Status NoDevice(int err) {
  std::string why;
  if (err == ENOSYS || err == ENOENT) {
    why = "the kernel exposes no RDMA devices (no /sys/class/infiniband_verbs)";
  } else {
    why = absl::StrCat("ibv_get_device_list failed: ", ErrnoText(err), " (errno ", err, ")");
  }
  return absl::UnavailableError(absl::StrCat(
      "verbs: no RDMA device found (", why,
      "; is an RDMA NIC and its driver (e.g. mlx5_ib, or rdma_rxe for soft-RoCE) present?)"));
}

}  // namespace

absl::Status VerbsError(const std::string& what, const char* call, int err) {
  return ErrnoStatus(what, call, err);
}

absl::StatusOr<std::shared_ptr<VerbsContext>> VerbsContext::Open(const DeviceOptions& options) {
  std::shared_ptr<VerbsContext> c(new VerbsContext());
  RETURN_IF_ERROR(c->Init(options));
  return c;
}

std::string VerbsContext::short_name() const { return absl::StrCat(device_name_, ":", port_); }

std::string VerbsContext::label() const {
  return absl::StrCat("verbs ", device_name_, " port ", port_);
}

absl::Status VerbsContext::Init(const DeviceOptions& options) {
  if (options.ib_tc < 0 || options.ib_tc > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("verbs: traffic class ", options.ib_tc, " outside 0..255 (MIXNET_IB_TC)"));
  }
  if (options.ib_sl < 0 || options.ib_sl > 15) {
    return absl::InvalidArgumentError(
        absl::StrCat("verbs: service level ", options.ib_sl, " outside 0..15 (MIXNET_IB_SL)"));
  }
  if (options.ib_port < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "verbs: port ", options.ib_port, " is negative (MIXNET_IB_PORT; 0: the NIC's port)"));
  }
  traffic_class_ = options.ib_tc;
  service_level_ = options.ib_sl;
  stall_timeout_ = options.stall_timeout;
  // The NIC: its interface (given, or the one holding the bind address) and
  // IPv4 address pick the adapter, the port and the GID (nic_adapter.h).
  ifname_ = options.ifname;
  const bool bound = !options.bind_address.empty() && options.bind_address != "0.0.0.0";
  if (ifname_.empty() && bound) {
    absl::StatusOr<std::string> i = InterfaceWithIpv4(options.bind_address);
    if (i.ok()) ifname_ = *i;
  }
  nic_ipv4_ = bound ? options.bind_address : "";
  if (nic_ipv4_.empty() && !ifname_.empty()) {
    absl::StatusOr<std::string> ip = InterfaceIpv4(ifname_);
    if (ip.ok()) nic_ipv4_ = *ip;
  }
  std::string wanted = options.ib_device;
  int mapped_port = 0;
  if (wanted.empty() && !ifname_.empty() && ifname_ != "lo") {
    absl::StatusOr<AdapterPort> ap = AdapterOfInterface(options.sysfs_root, ifname_);
    if (!ap.ok()) {
      return absl::UnavailableError(absl::StrCat("verbs: ", ap.status().message(),
                                                 "; set MIXNET_IB_DEVICE to the adapter to use"));
    }
    wanted = ap->adapter;
    mapped_port = ap->port;
  }
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return NoDevice(errno != 0 ? errno : ENOSYS);
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> guard(list, ibv_free_device_list);
  if (n <= 0) {
    return absl::UnavailableError(
        "verbs: no RDMA device found (ibv_get_device_list returned 0 devices; is an RDMA NIC "
        "and its driver (e.g. mlx5_ib, or rdma_rxe for soft-RoCE) present? `ibv_devices` "
        "lists them)");
  }
  ibv_device* dev = nullptr;
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.emplace_back(ibv_get_device_name(list[i]));
    if (dev == nullptr && (wanted.empty() || wanted == names.back())) {
      dev = list[i];
    }
  }
  if (dev == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "verbs: RDMA device '", wanted, "' not found (",
        options.ib_device.empty() ? absl::StrCat("the adapter sysfs names for ", ifname_)
                                  : std::string("MIXNET_IB_DEVICE"),
        "); available: ", absl::StrJoin(names, ", ")));
  }
  device_name_ = ibv_get_device_name(dev);
  ctx_ = ibv_open_device(dev);
  if (ctx_ == nullptr) {
    int err = errno;
    return absl::UnavailableError(absl::StrCat("verbs: cannot open RDMA device ", device_name_,
                                               ": ibv_open_device failed: ", ErrnoText(err),
                                               " (errno ", err,
                                               "; permissions on /dev/infiniband/uverbs*?)"));
  }
  ibv_device_attr_ex attr{};
  int rc = ibv_query_device_ex(ctx_, nullptr, &attr);
  if (rc != 0) return VerbsError(absl::StrCat("verbs ", device_name_), "ibv_query_device", rc);
  max_qp_wr_ = attr.orig_attr.max_qp_wr;
  const uint32_t odp_needed = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE;
  odp_ = (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0 &&
         (attr.odp_caps.per_transport_caps.rc_odp_caps & odp_needed) == odp_needed;
  port_ = options.ib_port > 0 ? options.ib_port : (mapped_port > 0 ? mapped_port : 1);
  if (port_ > attr.orig_attr.phys_port_cnt) {
    return absl::UnavailableError(
        absl::StrCat("verbs: RDMA device ", device_name_, " has no port ", port_, " (it has ",
                     static_cast<int>(attr.orig_attr.phys_port_cnt), "; ",
                     options.ib_port > 0 ? std::string("MIXNET_IB_PORT")
                                         : absl::StrCat("the port sysfs names for ", ifname_),
                     ")"));
  }
  RETURN_IF_ERROR(OpenPort(options));

  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) return VerbsError(label(), "ibv_alloc_pd", errno);
  channel_ = ibv_create_comp_channel(ctx_);
  if (channel_ == nullptr) return VerbsError(label(), "ibv_create_comp_channel", errno);
  int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoStatus(absl::StrCat(label(), ": completion channel"), "fcntl(O_NONBLOCK)");
  }
  const int cqe = std::max(1, std::min(attr.orig_attr.max_cqe, kMaxCqEntries));
  cq_ = ibv_create_cq(ctx_, cqe, nullptr, channel_, 0);
  if (cq_ == nullptr) return VerbsError(label(), "ibv_create_cq", errno);
  cq_capacity_ = cq_->cqe;
  // Idle registrations are kept (LRU, bounded in bytes) only where they stay
  // valid by themselves: on-demand paging (memory_registry.h).
  MemoryRegistry::Limits limits;
  limits.max_idle_bytes = static_cast<size_t>(options.ib_reg_cache_bytes);
  registry_ =
      std::make_unique<MemoryRegistry>(MakeIbvRegistrationBackend(pd_, odp_, label()), limits);
  return absl::OkStatus();
}

absl::Status VerbsContext::OpenPort(const DeviceOptions& options) {
  ibv_port_attr pa{};
  int rc = ibv_query_port(ctx_, static_cast<uint8_t>(port_), &pa);
  if (rc != 0) return VerbsError(label(), "ibv_query_port", rc);
  if (pa.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrCat(label(), " is not active (state ",
                                               ibv_port_state_str(pa.state),
                                               "); is its link up? `ibv_devinfo` shows it"));
  }
  link_layer_ = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                         : IBV_LINK_LAYER_INFINIBAND;
  lid_ = pa.lid;
  active_mtu_ = pa.active_mtu;
  max_msg_bytes_ = pa.max_msg_sz == 0 ? (1u << 30) : pa.max_msg_sz;
  // The GID table, then the entry for this NIC (nic_adapter.h).
  std::vector<GidEntry> table;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx_, static_cast<uint32_t>(port_), static_cast<uint32_t>(i), &e, 0) !=
        0) {
      continue;
    }
    GidEntry g;
    g.index = i;
    g.roce_v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
    std::memcpy(g.raw.data(), e.gid.raw, 16);
    g.ndev_ifindex = e.ndev_ifindex;
    table.push_back(g);
  }
  const uint32_t ifindex = ifname_.empty() ? 0 : if_nametoindex(ifname_.c_str());
  const std::string what =
      ifname_.empty() ? label() : absl::StrCat(label(), " (interface ", ifname_, ")");
  ASSIGN_OR_RETURN(gid_index_, ChooseGid(table, pa.gid_tbl_len, ethernet(), options.ib_gid_index,
                                         nic_ipv4_, ifindex, what));
  ibv_gid g{};
  rc = ibv_query_gid(ctx_, static_cast<uint8_t>(port_), gid_index_, &g);
  if (rc != 0) return VerbsError(absl::StrCat(label(), " GID ", gid_index_), "ibv_query_gid", rc);
  std::memcpy(gid_.data(), g.raw, 16);
  const bool zero = std::all_of(gid_.begin(), gid_.end(), [](uint8_t b) { return b == 0; });
  if (ethernet() && zero) {
    return absl::UnavailableError(absl::StrCat(
        label(), ": GID index ", gid_index_,
        " is empty; RoCE needs an IP address on the port's network interface, or another "
        "MIXNET_IB_GID_INDEX (`show_gids` lists them)"));
  }
  if (!ethernet() && lid_ == 0) {
    return absl::UnavailableError(
        absl::StrCat(label(), " has LID 0 (no subnet manager on the InfiniBand fabric?)"));
  }
  return absl::OkStatus();
}

VerbsContext::~VerbsContext() {
  registry_.reset();
  if (cq_ != nullptr) {
    int rc = ibv_destroy_cq(cq_);
    if (rc != 0) log::Warn("{}: ibv_destroy_cq failed: {}", label(), ErrnoText(rc));
  }
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (pd_ != nullptr) {
    int rc = ibv_dealloc_pd(pd_);
    if (rc != 0) log::Warn("{}: ibv_dealloc_pd failed: {}", label(), ErrnoText(rc));
  }
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

absl::Status VerbsContext::ReserveCq(int n) {
  absl::MutexLock lock(&mu_);
  if (cq_reserved_ + n > cq_capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        label(), ": completion queue full (", cq_reserved_, " of ", cq_capacity_,
        " entries reserved, a connection needs ", n, "); too many connections on one device"));
  }
  cq_reserved_ += n;
  return absl::OkStatus();
}

void VerbsContext::ReleaseCq(int n) {
  absl::MutexLock lock(&mu_);
  cq_reserved_ -= n;
}

}  // namespace mixnet::transport::verbs
