// What a verbs adapter can do with GPU memory (GPUDirect RDMA), probed once
// when its Device is created (caller's thread): whether dma-buf registration
// works on it, and whether a peer-memory kernel module is loaded. The NCCL
// plugin advertises GPU pointers from this (plugins/nccl_net/gpu_direct.h).
#pragma once

#include <string>

#include "runtime/transport/transport.h"

struct ibv_pd;

namespace mixnet::transport::verbs {

// dma-buf: ibv_reg_dmabuf_mr(pd, 0, 0, 0, fd -1) must fail for the bad fd
// (EBADF, EINVAL), not because the kernel or provider lacks dma-buf
// (EOPNOTSUPP, EPROTONOSUPPORT, ENOSYS). Peer memory: one of
// <sysfs_root>/kernel/mm/memory_peers/{nv_mem,nvidia-peermem}/version or
// <sysfs_root>/module/{nvidia_peermem,nv_peer_mem}/version exists.
// `label` names the adapter in `why`.
DeviceMemorySupport ProbeDeviceMemory(ibv_pd* pd, const std::string& sysfs_root,
                                      const std::string& label);

}  // namespace mixnet::transport::verbs
