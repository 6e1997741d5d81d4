// CreateDevice: the one place that maps a transport name to an implementation.
#include "absl/strings/str_cat.h"
#include "runtime/common/lock_checks.h"
#include "runtime/common/settings.h"
#include "runtime/transport/tcp/tcp_device.h"
#include "runtime/transport/transport.h"
#ifdef MIXNET_HAVE_VERBS
#include "runtime/transport/verbs/verbs_device.h"
#endif

namespace mixnet::transport {

absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const std::string& kind,
                                                     const DeviceOptions& options) {
  ApplyLockChecks();
  if (kind == "tcp") {
    absl::StatusOr<std::unique_ptr<tcp::TcpDevice>> d = tcp::TcpDevice::Create(options);
    if (!d.ok()) return d.status();
    return std::unique_ptr<Device>(std::move(*d));
  }
  if (kind == "local") {
    absl::StatusOr<std::unique_ptr<tcp::TcpDevice>> d = tcp::TcpDevice::CreateLocal(options);
    if (!d.ok()) return d.status();
    return std::unique_ptr<Device>(std::move(*d));
  }
  if (kind == "verbs") {
#ifdef MIXNET_HAVE_VERBS
    return CreateVerbsDevice(options);
#else
    return absl::UnavailableError(
        "verbs transport not compiled in: libibverbs headers were not found at build time "
        "(apt-get install libibverbs-dev, then reconfigure)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", kind, "' (expected tcp, verbs or local)"));
}

DeviceOptions DeviceOptionsFromSettings() {
  const Settings& s = GetSettings();
  DeviceOptions o;
  o.sockets_per_connection = static_cast<int>(s.sockets_per_path);
  o.chunk_bytes = static_cast<size_t>(s.chunk_bytes);
  o.socket_buffer_bytes = static_cast<size_t>(s.socket_buffer_bytes);
  o.eager_bytes = static_cast<size_t>(s.eager_bytes);
  o.local_eager_bytes = static_cast<size_t>(s.local_eager_bytes);
  o.progress_spin = absl::Microseconds(s.progress_spin_us);
  o.ib_device = s.ib_device;
  o.ib_port = static_cast<int>(s.ib_port);
  o.ib_gid_index = static_cast<int>(s.ib_gid_index);
  o.ib_tc = static_cast<int>(s.ib_tc);
  o.control_tos = static_cast<int>(s.control_tc);
  o.ib_sl = static_cast<int>(s.ib_sl);
  o.ib_unexpected_bytes = s.ib_unexpected_bytes;
  o.ib_reg_cache_bytes = s.ib_reg_cache_bytes;
  return o;
}

}  // namespace mixnet::transport
