// Our own clean-room description of the NCCL external network plugin ABI,
// versions 8, 9, 10 and 11, written from the fact sheet
// shared/reference/nccl-net-abi.md (no NCCL header text). Only layouts and
// calling conventions matter to NCCL, so the names here are ours; the sizes and
// offsets are pinned by static_asserts at the bottom.
//
// Threads: types only. Used by the plugin (exports.cc) and by the tests and
// benchmark that drive the plugin through dlopen the way NCCL does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mixnet::nccl_abi {

// ncclResult_t values (4-byte C enum).
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

inline constexpr int kHandleMaxSize = 128;  // bytes of the opaque connection handle
inline constexpr int kPtrHost = 0x1;
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmaBuf = 0x4;
inline constexpr int kMaxRequests = 32;  // outstanding requests NCCL may post per comm
inline constexpr int kMaxDevsPerNic = 4;
inline constexpr int kTrafficClassUndef = -1;
inline constexpr uintptr_t kOptionalRecvCompletion = 0x1;  // may arrive in *request (v9+)
inline constexpr size_t kMaxNetSizeBytes = size_t{1} << 40;

// ncclNetDeviceType: what kind of offload a device offers.
enum NetDeviceType : int { kDeviceHost = 0, kDeviceUnpack = 1 };

// Log levels and subsystem flags of NCCL's logger.
enum LogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};
inline constexpr unsigned long kLogSubsysInit = 0x1;
inline constexpr unsigned long kLogSubsysNet = 0x10;
inline constexpr unsigned long kLogSubsysAll = ~0ul;

using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line,
                        const char* fmt, ...);
using ProfilerCallback = Result (*)(void** event_handle, int type, void* profiler_handle,
                                    int64_t plugin_id, void* ext_data);

// Device handle for offload plugins (same layout in v8..v11). A host plugin
// never touches it.
struct DeviceHandle {
  NetDeviceType type;
  int version;
  void* handle;
  size_t size;
  int needs_proxy_progress;
};

// Physical devices fused into one virtual device (v9+).
struct VDeviceProps {
  int ndevs;
  int devs[kMaxDevsPerNic];
};

// Per-communicator configuration (v10 passes it to connect, v11 to init).
struct CommConfig {
  int traffic_class;
};

// v11 traffic hints (setNetAttr).
struct CommAttr {
  int32_t max_concurrent_peers;
  int32_t min_concurrent_peers;
  int32_t max_flows_per_peer;
  int32_t min_flows_per_peer;
};
struct NetAttr {
  CommAttr send;
  CommAttr recv;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

struct PropertiesV8 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int speed;  // Mbit/s
  int port;
  float latency;  // microseconds, 0 = NCCL's default
  int max_comms;
  int max_recvs;
  NetDeviceType device_type;
  int device_version;
};

// v9 and v10 share this layout.
struct PropertiesV9 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  NetDeviceType device_type;
  int device_version;
  VDeviceProps vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
};

struct PropertiesV11 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  NetDeviceType device_type;
  int device_version;
  VDeviceProps vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int max_multi_request_size;
};

// Members shared by every version from regMr on, in table order.
#define MIXNET_NCCL_REG_MEMBERS                                                                   \
  Result (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);                \
  Result (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, \
                          void** mhandle);                                                        \
  Result (*dereg_mr)(void* comm, void* mhandle);
#define MIXNET_NCCL_TAIL_MEMBERS                                                     \
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, \
                   void** request);                                                  \
  Result (*test)(void* request, int* done, int* sizes);                              \
  Result (*close_send)(void* send_comm);                                             \
  Result (*close_recv)(void* recv_comm);                                             \
  Result (*close_listen)(void* listen_comm);                                         \
  Result (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);           \
  Result (*irecv_consumed)(void* recv_comm, int n, void* request);

struct NetV8 {
  const char* name;
  Result (*init)(Logger logger);
  Result (*devices)(int* ndev);
  Result (*get_properties)(int dev, PropertiesV8* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  MIXNET_NCCL_REG_MEMBERS
  Result (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                  void** request);
  MIXNET_NCCL_TAIL_MEMBERS
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger logger);
  Result (*devices)(int* ndev);
  Result (*get_properties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  MIXNET_NCCL_REG_MEMBERS
  Result (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** request);
  MIXNET_NCCL_TAIL_MEMBERS
  Result (*make_vdevice)(int* d, VDeviceProps* props);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger logger, ProfilerCallback profiler);
  Result (*devices)(int* ndev);
  Result (*get_properties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, CommConfig* config, void* handle, void** send_comm,
                    DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  MIXNET_NCCL_REG_MEMBERS
  Result (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                  void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** phandles, void** request);
  MIXNET_NCCL_TAIL_MEMBERS
  Result (*make_vdevice)(int* d, VDeviceProps* props);
};

struct NetV11 {
  const char* name;
  Result (*init)(void** ctx, uint64_t comm_id, CommConfig* config, Logger logger,
                 ProfilerCallback profiler);
  Result (*devices)(int* ndev);
  Result (*get_properties)(int dev, PropertiesV11* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  Result (*connect)(void* ctx, int dev, void* handle, void** send_comm,
                    DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  MIXNET_NCCL_REG_MEMBERS
  Result (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                  void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** phandles, void** request);
  MIXNET_NCCL_TAIL_MEMBERS
  Result (*make_vdevice)(int* d, VDeviceProps* props);
  Result (*finalize)(void* ctx);
  Result (*set_net_attr)(void* ctx, NetAttr* attr);
};

#undef MIXNET_NCCL_REG_MEMBERS
#undef MIXNET_NCCL_TAIL_MEMBERS

// Exported symbol names, probed by NCCL newest first.
inline constexpr const char* kSymbolV8 = "ncclNetPlugin_v8";
inline constexpr const char* kSymbolV9 = "ncclNetPlugin_v9";
inline constexpr const char* kSymbolV10 = "ncclNetPlugin_v10";
inline constexpr const char* kSymbolV11 = "ncclNetPlugin_v11";

// Layouts pinned to the fact sheet (LP64).
static_assert(sizeof(DeviceHandle) == 32);
static_assert(sizeof(VDeviceProps) == 20);
static_assert(sizeof(CommConfig) == 4);
static_assert(sizeof(CommAttr) == 16);
static_assert(sizeof(NetAttr) == 44);
static_assert(sizeof(PropertiesV8) == 64);
static_assert(offsetof(PropertiesV8, speed) == 32 && offsetof(PropertiesV8, latency) == 40);
static_assert(offsetof(PropertiesV8, max_recvs) == 48 &&
              offsetof(PropertiesV8, device_version) == 56);
static_assert(sizeof(PropertiesV9) == 104);
static_assert(offsetof(PropertiesV9, force_flush) == 32 && offsetof(PropertiesV9, vprops) == 64);
static_assert(offsetof(PropertiesV9, max_p2p_bytes) == 88 &&
              offsetof(PropertiesV9, max_coll_bytes) == 96);
static_assert(sizeof(PropertiesV11) == 112);
static_assert(offsetof(PropertiesV11, max_multi_request_size) == 104);
static_assert(sizeof(NetV8) == 19 * 8 && offsetof(NetV8, isend) == 10 * 8);
static_assert(offsetof(NetV8, irecv_consumed) == 18 * 8);
static_assert(sizeof(NetV9) == 20 * 8 && offsetof(NetV9, make_vdevice) == 19 * 8);
static_assert(sizeof(NetV10) == 20 * 8 && offsetof(NetV10, test) == 13 * 8);
static_assert(sizeof(NetV11) == 22 * 8 && offsetof(NetV11, finalize) == 20 * 8);
static_assert(offsetof(NetV11, set_net_attr) == 21 * 8);

}  // namespace mixnet::nccl_abi
