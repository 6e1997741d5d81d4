// The version-independent core of the NCCL net plugin: every NCCL call in
// absl::Status form over the runtime's transports. exports.cc adapts it to the
// v8..v11 function tables and converts its statuses in one place (result.h).
//
// One Plugin per process, created on first use and never destroyed (the
// library is linked with -z nodelete, so NCCL's dlclose cannot unmap code that
// transport threads still run). Threads: see the ABI fact sheet §6.1: init and
// devices on the creating thread, listen/connect/accept/regMr/close on proxy
// service threads, isend/irecv/test on proxy progress threads. Shared state is
// guarded; a comm is used by one thread at a time, as NCCL does.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "plugins/nccl_net/comm.h"
#include "plugins/nccl_net/gpu_direct.h"
#include "plugins/nccl_net/nccl_net_abi.h"
#include "plugins/nccl_net/nic.h"
#include "plugins/nccl_net/path_mover.h"
#include "plugins/nccl_net/plugin_config.h"
#include "plugins/nccl_net/route_policy.h"
#include "runtime/control/worker_agent.h"

namespace mixnet::nccl {

// What getProperties reports, before the per-version struct layout.
struct DeviceInfo {
  const char* name = nullptr;
  uint64_t guid = 0;
  int speed_mbps = 0;
  int max_comms = 0;
  int max_recvs = 1;
  size_t max_p2p_bytes = 0;
  int ptr_support = nccl_abi::kPtrHost;  // gpu_direct.h
};

class Plugin {
 public:
  static Plugin& Get();

  absl::Status Init(nccl_abi::Logger logger);
  absl::Status Devices(int* ndev);
  absl::StatusOr<DeviceInfo> Properties(int dev);

  // v11 per-communicator contexts. FreeContext(NULL) is fine (failed init).
  absl::Status NewContext(void** ctx, uint64_t comm_id, const nccl_abi::CommConfig* config);
  absl::Status FreeContext(void* ctx);
  absl::Status SetNetAttr(void* ctx, const nccl_abi::NetAttr* attr);

  // `ctx` is checked when `need_ctx` (v11); older versions pass none.
  absl::Status Listen(void* ctx, bool need_ctx, int dev, void* handle, void** listen_comm);
  // Leaves *send_comm / *recv_comm NULL until the connection is up.
  // `traffic_class`: NCCL's (v10 passes it here; v11 in `ctx`, which wins).
  absl::Status Connect(void* ctx, bool need_ctx, int dev, void* handle, void** send_comm,
                       int traffic_class = nccl_abi::kTrafficClassUndef);
  absl::Status Accept(void* listen_comm, void** recv_comm);

  absl::Status RegMr(void* comm, void* data, size_t size, int type, void** mhandle);
  // `fd` is NCCL's (closed when the call returns): duplicated for the lanes
  // the buffer meets later.
  absl::Status RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle);
  absl::Status DeregMr(void* comm, void* mhandle);

  // Leave *request NULL when the comm already holds its maximum of requests.
  absl::Status Isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request);
  absl::Status Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                     void** mhandles, void** request);
  // GPU receives (NCCL calls it only for those, and only where a flush is
  // needed): an RDMA read of each through every adapter that may have
  // written it (transport::Connection::FlushDeviceWrites).
  absl::Status Iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles,
                      void** request);
  absl::Status Test(void* request, int* done, int* sizes);

  absl::Status CloseSend(void* send_comm);
  absl::Status CloseRecv(void* recv_comm);
  absl::Status CloseListen(void* listen_comm);

 private:
  Plugin() = default;
  absl::Status CheckDev(int dev) const;
  absl::Status CheckContext(void* ctx, bool need_ctx, const char* call) const;
  absl::Status CheckMemHandle(void* mhandle, const char* call) const;
  absl::Status CloseComm(void* comm, Kind kind);
  // Starts DialPeer for a connect on the Dialing() pool.
  absl::StatusOr<std::shared_ptr<DialTask>> StartDial(const PathChoice& path, int traffic_class);
  // Drops connects NCCL stopped polling (see dials_).
  void SweepDials();
  // With a cluster spec: NICs from it, the path mover, and (with a
  // controller) the worker agent that drives it.
  absl::Status InitFabric();
  // The transport device of a local NIC by cluster-spec name.
  absl::StatusOr<transport::Device*> SpecDevice(const std::string& nic);
  // Registers a new comm (and its first lane) with the registry and mover.
  void AddComm(Comm* comm, Kind kind, std::unique_ptr<transport::Connection> connection,
               LanePath path);
  // The warm-up sweep (with a controller; MIXNET_NCCL_WARM_PATHS_MS): a send
  // comm to `peer_host` is up; once every other host of this host's region
  // has one, asks the agent for the sweep on warm_thread_ (once).
  void NoteSendComm(const std::string& peer_host);

  // What getProperties reports for device dev (computed on its first call:
  // it creates the device to ask its adapter).
  absl::StatusOr<GpuDirect> GpuDirectOf(int dev);
  absl::Status RegisterHandle(void* comm, std::unique_ptr<MemHandle> m, void** mhandle);

  absl::Mutex init_mu_;
  bool initialized_ ABSL_GUARDED_BY(init_mu_) = false;
  // Written once under init_mu_, read-only afterwards (readers check ready_).
  std::atomic<bool> ready_{false};
  PluginConfig config_;
  CudaProbe cuda_;  // at init, when GPUDirect may be on
  absl::Mutex gpu_mu_;
  absl::flat_hash_map<int, GpuDirect> gpu_ ABSL_GUARDED_BY(gpu_mu_);
  // NCCL's devices are nics_[0, device_count_); with a spec the host's OCS
  // NICs follow (reachable only by moving a comm onto a circuit).
  std::vector<std::unique_ptr<Nic>> nics_;
  int device_count_ = 0;
  std::unique_ptr<RoutePolicy> routes_;
  std::unique_ptr<PathMover> mover_;             // with a spec
  std::unique_ptr<control::WorkerAgent> agent_;  // with a spec and a controller
  // The warm-up sweep: the other hosts of this host's region (set at init;
  // empty: none asked), those a send comm reached, and the thread that asks
  // and waits (started once; never joined: the plugin is never destroyed).
  std::vector<std::string> warm_peers_;
  absl::Mutex warm_mu_;
  absl::flat_hash_set<std::string> warm_reached_ ABSL_GUARDED_BY(warm_mu_);
  bool warm_asked_ ABSL_GUARDED_BY(warm_mu_) = false;
  std::thread warm_thread_ ABSL_GUARDED_BY(warm_mu_);

  Registry registry_;
  std::atomic<uint64_t> next_id_{0};

  // This end as the handshake presents it (set at init; `nic` per listen comm).
  Identity self_;

  // Connects in progress, by the token kept in the connector's handle
  // buffer. One that NCCL has not polled for the connect timeout is
  // abandoned: dropped (its connection, if made, closed) by the next
  // listen/connect/accept, and a later poll with its handle fails.
  struct PendingDial {
    std::shared_ptr<DialTask> task;
    absl::Time last_polled;
  };
  absl::Mutex dial_mu_;
  absl::flat_hash_map<uint64_t, PendingDial> dials_ ABSL_GUARDED_BY(dial_mu_);
};

}  // namespace mixnet::nccl
