// Registration cache for user buffers (MemoryRegion): ibv_reg_mr on demand,
// entries looked up by address range, idle entries kept in an LRU list bounded
// by count and bytes. Thread-safe (one mutex; registration itself runs outside
// it). Used by caller threads (Isend/Irecv) and the poller thread.
//
// Correctness rule. A pinned (non-ODP) registration maps the physical pages a
// buffer had when it was registered; if the program frees the buffer and gets
// new memory at the same address, a cached pinned MR would silently point at
// the old pages. So:
//  - An entry is registered over the page-aligned hull of the buffer that
//    caused it, and is reused for a range inside it only while some request
//    using it is in flight (that request keeps those pages mapped, so every
//    page of the new range - each of which holds a byte of that buffer - still
//    has the pages it was registered with).
//  - Idle entries are kept (and reused) only when the registration follows the
//    address space by itself: on-demand-paging (ODP) MRs. Idle pinned entries
//    are deregistered at once.
// The backend decides per registration whether it is "cacheable" (ODP).
//
// Device (GPU) memory is registered only on request (AcquireDevice: through
// a dma-buf fd, or by peer memory), over exactly the range asked for, and
// marked `device`: the CPU cannot touch it, so the connection never copies
// into or out of such a range (FindDevice tells it which ranges those are).
// Such an entry is never idle-cached: it lives while its holder (the NCCL
// plugin's regMr handle) keeps it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

struct ibv_pd;

namespace mixnet::transport::verbs {

struct Registration {
  uintptr_t addr = 0;
  size_t len = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  bool remote_write = false;  // registered with IBV_ACCESS_REMOTE_WRITE
  bool cacheable = false;     // stays valid when idle (ODP)
  bool device = false;        // GPU memory: only the NIC may access it
  void* handle = nullptr;     // backend's object (ibv_mr*)
};

// Performs registrations. Implementations must be thread-safe.
class RegistrationBackend {
 public:
  virtual ~RegistrationBackend() = default;
  // Registers [addr, addr + len). `remote_write`: the peer will RDMA-write
  // into it. May grant more access than asked.
  virtual absl::StatusOr<Registration> Register(uintptr_t addr, size_t len, bool remote_write) = 0;
  // Registers GPU memory [addr, addr + len), with remote write access:
  // through the dma-buf `fd` at `offset` when fd >= 0 (ibv_reg_dmabuf_mr,
  // iova = addr), else by peer memory (ibv_reg_mr on the device pointer).
  virtual absl::StatusOr<Registration> RegisterDevice(uintptr_t addr, size_t len, int fd,
                                                      uint64_t offset) {
    (void)addr;
    (void)len;
    (void)fd;
    (void)offset;
    return absl::UnimplementedError("this registration backend cannot register GPU memory");
  }
  virtual void Deregister(const Registration& r) = 0;
};

// Registers through ibv_reg_mr on `pd`: with IBV_ACCESS_ON_DEMAND when `odp`
// (cacheable), falling back to a pinned registration; sends from read-only
// memory fall back to local-only access. `label` names the device in errors.
std::unique_ptr<RegistrationBackend> MakeIbvRegistrationBackend(ibv_pd* pd, bool odp,
                                                                std::string label);

class MemoryRegistry;

// One cached registration (internal to MemoryRegistry; `reg` is immutable).
struct RegistryEntry {
  Registration reg;
  int refs = 0;  // MrRefs alive
  bool idle = false;
  std::list<RegistryEntry*>::iterator lru_pos;  // valid while idle
};

// A registration in use by one request. Move-only; releases on destruction.
class MrRef {
 public:
  MrRef() = default;
  MrRef(MrRef&& o) noexcept { *this = std::move(o); }
  MrRef& operator=(MrRef&& o) noexcept;
  MrRef(const MrRef&) = delete;
  MrRef& operator=(const MrRef&) = delete;
  ~MrRef() { Reset(); }

  bool valid() const { return entry_ != nullptr; }
  uint32_t lkey() const { return entry_->reg.lkey; }
  uint32_t rkey() const { return entry_->reg.rkey; }
  const Registration& registration() const { return entry_->reg; }
  void Reset();

 private:
  friend class MemoryRegistry;
  MrRef(MemoryRegistry* reg, RegistryEntry* entry) : registry_(reg), entry_(entry) {}
  MemoryRegistry* registry_ = nullptr;
  RegistryEntry* entry_ = nullptr;
};

class MemoryRegistry {
 public:
  struct Limits {
    size_t max_idle_entries = 1024;
    size_t max_idle_bytes = size_t{64} << 30;
  };
  struct Stats {
    uint64_t registrations = 0;  // backend Register calls that succeeded
    uint64_t hits = 0;           // Acquire served by an existing entry
    size_t entries = 0;          // live registrations
    size_t idle_entries = 0;
    size_t idle_bytes = 0;
  };

  MemoryRegistry(std::unique_ptr<RegistrationBackend> backend, Limits limits);
  explicit MemoryRegistry(std::unique_ptr<RegistrationBackend> backend);
  // Every MrRef must be gone by now; idle entries are deregistered.
  ~MemoryRegistry();

  // A registration covering [addr, addr + len), len > 0.
  absl::StatusOr<MrRef> Acquire(const void* addr, size_t len, bool remote_write);
  // A device registration of exactly [addr, addr + len) (see the header
  // comment), reusing a live device entry that covers it.
  absl::StatusOr<MrRef> AcquireDevice(const void* addr, size_t len, int dmabuf_fd,
                                      uint64_t dmabuf_offset);
  // The live device registration covering [addr, addr + len), or an invalid
  // MrRef when the range is not (wholly) registered GPU memory. Cheap when
  // no device memory is registered at all (one atomic load).
  MrRef FindDevice(const void* addr, size_t len);
  Stats stats() const;

  // Page-aligned hull of [addr, addr + len).
  static void PageHull(uintptr_t addr, size_t len, uintptr_t* start, size_t* hull_len);

 private:
  friend class MrRef;
  using Entry = RegistryEntry;
  void Release(Entry* e);
  Entry* FindLocked(uintptr_t addr, size_t len, bool remote_write, bool device_only = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new entry for `reg`, with one reference.
  Entry* InsertLocked(const Registration& reg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes idle entries beyond the limits; returns them for deregistration.
  void EvictLocked(std::list<Registration>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<RegistrationBackend> backend_;
  const Limits limits_;
  mutable absl::Mutex mu_;
  // Entries by start address (several may share one).
  std::multimap<uintptr_t, std::unique_ptr<Entry>> by_addr_ ABSL_GUARDED_BY(mu_);
  std::list<Entry*> lru_ ABSL_GUARDED_BY(mu_);  // idle entries, most recent first
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t max_len_ ABSL_GUARDED_BY(mu_) = 0;  // longest entry ever, bounds the search
  std::atomic<int> device_entries_{0};
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet::transport::verbs
