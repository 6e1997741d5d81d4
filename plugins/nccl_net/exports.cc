// The four exported function tables (ncclNetPlugin_v8 .. _v11): thin adapters
// from each version's calling convention to the Plugin core. Every entry point
// goes through Edge(), which turns the core's absl::Status into ncclResult_t
// (via ToNcclResult, the one conversion) and never lets an exception escape
// into NCCL. Threads: whichever NCCL thread calls (see plugin.h).
#include <algorithm>
#include <exception>

#include "plugins/nccl_net/nccl_net_abi.h"
#include "plugins/nccl_net/plugin.h"
#include "plugins/nccl_net/result.h"
#include "runtime/common/status.h"

namespace mixnet::nccl {
namespace {

using namespace nccl_abi;  // NOLINT: the ABI types are the vocabulary of this file

template <typename Fn>
Result Edge(const char* call, Fn&& fn) {
  try {
    return ToNcclResult(fn(), call);
  } catch (const std::exception& e) {
    return ToNcclResult(absl::InternalError(std::string("exception: ") + e.what()), call);
  } catch (...) {
    return ToNcclResult(absl::InternalError("unknown exception"), call);
  }
}

Plugin& P() { return Plugin::Get(); }

// Fields common to every properties version.
template <typename Props>
absl::Status FillCommon(int dev, Props* props) {
  if (props == nullptr) return absl::InvalidArgumentError("getProperties: props is NULL");
  ASSIGN_OR_RETURN(DeviceInfo d, P().Properties(dev));
  *props = Props{};
  props->name = const_cast<char*>(d.name);
  props->pci_path = nullptr;  // virtual NIC: no PCI function
  props->guid = d.guid;
  props->ptr_support = d.ptr_support;
  props->reg_is_global = 0;
  props->speed = d.speed_mbps;
  props->port = 0;
  props->latency = 0;
  props->max_comms = d.max_comms;
  props->max_recvs = d.max_recvs;
  props->device_type = kDeviceHost;
  props->device_version = 0;
  if constexpr (!std::is_same_v<Props, PropertiesV8>) {
    props->force_flush = 0;
    props->vprops.ndevs = 1;
    props->vprops.devs[0] = dev;
    props->max_p2p_bytes = d.max_p2p_bytes;
    props->max_coll_bytes = d.max_p2p_bytes;
  }
  if constexpr (std::is_same_v<Props, PropertiesV11>) props->max_multi_request_size = 1;
  return absl::OkStatus();
}

// ---- entry points shared by several versions ----
Result InitLegacy(Logger logger) {
  return Edge("init", [&] { return P().Init(logger); });
}
Result InitV10(Logger logger, ProfilerCallback) {  // a NULL profiler is fine: we never call it
  return Edge("init", [&] { return P().Init(logger); });
}
Result InitV11(void** ctx, uint64_t comm_id, CommConfig* config, Logger logger, ProfilerCallback) {
  return Edge("init", [&]() -> absl::Status {
    if (ctx != nullptr) *ctx = nullptr;
    RETURN_IF_ERROR(P().Init(logger));
    return P().NewContext(ctx, comm_id, config);
  });
}
Result Finalize(void* ctx) {
  return Edge("finalize", [&] { return P().FreeContext(ctx); });
}
Result SetNetAttr(void* ctx, NetAttr* attr) {
  return Edge("setNetAttr", [&] { return P().SetNetAttr(ctx, attr); });
}
Result Devices(int* ndev) {
  return Edge("devices", [&] { return P().Devices(ndev); });
}
template <typename Props>
Result GetProperties(int dev, Props* props) {
  return Edge("getProperties", [&] { return FillCommon(dev, props); });
}
Result ListenLegacy(int dev, void* handle, void** listen_comm) {
  return Edge("listen", [&] { return P().Listen(nullptr, false, dev, handle, listen_comm); });
}
Result ListenV11(void* ctx, int dev, void* handle, void** listen_comm) {
  return Edge("listen", [&] { return P().Listen(ctx, true, dev, handle, listen_comm); });
}
Result ConnectLegacy(int dev, void* handle, void** send_comm, DeviceHandle**) {
  return Edge("connect", [&] { return P().Connect(nullptr, false, dev, handle, send_comm); });
}
Result ConnectV10(int dev, CommConfig* config, void* handle, void** send_comm, DeviceHandle**) {
  const int tc = config != nullptr ? config->traffic_class : kTrafficClassUndef;
  return Edge("connect", [&] { return P().Connect(nullptr, false, dev, handle, send_comm, tc); });
}
Result ConnectV11(void* ctx, int dev, void* handle, void** send_comm, DeviceHandle**) {
  return Edge("connect", [&] { return P().Connect(ctx, true, dev, handle, send_comm); });
}
Result Accept(void* listen_comm, void** recv_comm, DeviceHandle**) {
  return Edge("accept", [&] { return P().Accept(listen_comm, recv_comm); });
}
Result RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return Edge("regMr", [&] { return P().RegMr(comm, data, size, type, mhandle); });
}
Result RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                   void** mhandle) {
  return Edge("regMrDmaBuf",
              [&] { return P().RegMrDmaBuf(comm, data, size, type, offset, fd, mhandle); });
}
Result DeregMr(void* comm, void* mhandle) {
  return Edge("deregMr", [&] { return P().DeregMr(comm, mhandle); });
}
Result IsendV8(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  return Edge("isend", [&]() -> absl::Status {
    if (size < 0) {
      if (request != nullptr) *request = nullptr;
      return absl::InvalidArgumentError("isend: negative size");
    }
    return P().Isend(comm, data, static_cast<size_t>(size), tag, mhandle, request);
  });
}
Result IsendV9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return Edge("isend", [&] { return P().Isend(comm, data, size, tag, mhandle, request); });
}
Result IsendV10(void* comm, void* data, size_t size, int tag, void* mhandle, void*,
                void** request) {
  return Edge("isend", [&] { return P().Isend(comm, data, size, tag, mhandle, request); });
}
Result IrecvV8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles,
               void** request) {
  return Edge("irecv", [&]() -> absl::Status {
    size_t wide[kMaxRecvsLimit];
    const bool convert = sizes != nullptr && n >= 1 && n <= kMaxRecvsLimit;
    if (convert) {
      for (int i = 0; i < n; ++i) {
        if (sizes[i] < 0) return absl::InvalidArgumentError("irecv: negative size");
        wide[i] = static_cast<size_t>(sizes[i]);
      }
    }
    return P().Irecv(comm, n, data, convert ? wide : nullptr, tags, mhandles, request);
  });
}
Result IrecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
               void** request) {
  return Edge("irecv", [&] { return P().Irecv(comm, n, data, sizes, tags, mhandles, request); });
}
Result IrecvV10(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                void** request) {
  return Edge("irecv", [&] { return P().Irecv(comm, n, data, sizes, tags, mhandles, request); });
}
Result Iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return Edge("iflush", [&] { return P().Iflush(comm, n, data, sizes, mhandles, request); });
}
Result Test(void* request, int* done, int* sizes) {
  return Edge("test", [&] { return P().Test(request, done, sizes); });
}
Result CloseSend(void* comm) {
  return Edge("closeSend", [&] { return P().CloseSend(comm); });
}
Result CloseRecv(void* comm) {
  return Edge("closeRecv", [&] { return P().CloseRecv(comm); });
}
Result CloseListen(void* comm) {
  return Edge("closeListen", [&] { return P().CloseListen(comm); });
}

}  // namespace
}  // namespace mixnet::nccl

using namespace mixnet::nccl;  // NOLINT

// The tables NCCL looks up with dlsym. getDeviceMr, irecvConsumed and
// makeVDevice are NULL: no device offload and no NIC fusion.
extern "C" {

__attribute__((visibility("default"))) mixnet::nccl_abi::NetV8 ncclNetPlugin_v8 = {
    "mixnet",     InitLegacy,    Devices,   GetProperties<mixnet::nccl_abi::PropertiesV8>,
    ListenLegacy, ConnectLegacy, Accept,    RegMr,
    RegMrDmaBuf,  DeregMr,       IsendV8,   IrecvV8,
    Iflush,       Test,          CloseSend, CloseRecv,
    CloseListen,  nullptr,       nullptr};

__attribute__((visibility("default"))) mixnet::nccl_abi::NetV9 ncclNetPlugin_v9 = {
    "mixnet",     InitLegacy,    Devices,   GetProperties<mixnet::nccl_abi::PropertiesV9>,
    ListenLegacy, ConnectLegacy, Accept,    RegMr,
    RegMrDmaBuf,  DeregMr,       IsendV9,   IrecvV9,
    Iflush,       Test,          CloseSend, CloseRecv,
    CloseListen,  nullptr,       nullptr,   nullptr};

__attribute__((visibility("default"))) mixnet::nccl_abi::NetV10 ncclNetPlugin_v10 = {
    "mixnet",     InitV10,    Devices,   GetProperties<mixnet::nccl_abi::PropertiesV9>,
    ListenLegacy, ConnectV10, Accept,    RegMr,
    RegMrDmaBuf,  DeregMr,    IsendV10,  IrecvV10,
    Iflush,       Test,       CloseSend, CloseRecv,
    CloseListen,  nullptr,    nullptr,   nullptr};

__attribute__((visibility("default"))) mixnet::nccl_abi::NetV11 ncclNetPlugin_v11 = {
    "mixnet",    InitV11,    Devices,   GetProperties<mixnet::nccl_abi::PropertiesV11>,
    ListenV11,   ConnectV11, Accept,    RegMr,
    RegMrDmaBuf, DeregMr,    IsendV10,  IrecvV10,
    Iflush,      Test,       CloseSend, CloseRecv,
    CloseListen, nullptr,    nullptr,   nullptr,
    Finalize,    SetNetAttr};

}  // extern "C"
