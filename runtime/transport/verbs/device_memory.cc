// GPU memory support of a verbs adapter (see device_memory.h). Caller's
// thread, once per Device.
#include "runtime/transport/verbs/device_memory.h"

#include <infiniband/verbs.h>
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet::transport::verbs {

DeviceMemorySupport ProbeDeviceMemory(ibv_pd* pd, const std::string& sysfs_root,
                                      const std::string& label) {
  DeviceMemorySupport out;
  errno = 0;
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  const int err = errno;
  std::string dmabuf;
  if (mr != nullptr) {
    ibv_dereg_mr(mr);
    out.dmabuf = true;
    dmabuf = "dma-buf registration works";
  } else if (err == EOPNOTSUPP || err == EPROTONOSUPPORT || err == ENOSYS || err == 0) {
    dmabuf = absl::StrCat("no dma-buf registration (ibv_reg_dmabuf_mr: ", ErrnoText(err),
                          "; needs Linux >= 5.12 and a provider that supports it)");
  } else {
    out.dmabuf = true;
    dmabuf = absl::StrCat("dma-buf registration supported (the probe's bad fd gave ",
                          ErrnoText(err), ")");
  }
  std::string peer = "no peer-memory module (nvidia-peermem) loaded";
  for (const char* f :
       {"/kernel/mm/memory_peers/nv_mem/version", "/kernel/mm/memory_peers/nvidia-peermem/version",
        "/module/nvidia_peermem/version", "/module/nv_peer_mem/version"}) {
    struct stat st {};
    const std::string path = sysfs_root + f;
    if (stat(path.c_str(), &st) == 0) {
      out.peer_memory = true;
      peer = absl::StrCat("peer memory loaded (", path, ")");
      break;
    }
  }
  out.why = absl::StrCat(label, ": ", dmabuf, "; ", peer);
  return out;
}

}  // namespace mixnet::transport::verbs
