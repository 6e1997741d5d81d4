// Registration cache (see memory_registry.h) and its ibv_reg_mr backend.
// Thread-safe; runs on caller threads and on the poller thread.
#include "runtime/transport/verbs/memory_registry.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::transport::verbs {

MrRef& MrRef::operator=(MrRef&& o) noexcept {
  if (this != &o) {
    Reset();
    registry_ = o.registry_;
    entry_ = o.entry_;
    o.registry_ = nullptr;
    o.entry_ = nullptr;
  }
  return *this;
}

void MrRef::Reset() {
  if (entry_ != nullptr) registry_->Release(entry_);
  registry_ = nullptr;
  entry_ = nullptr;
}

MemoryRegistry::MemoryRegistry(std::unique_ptr<RegistrationBackend> backend, Limits limits)
    : backend_(std::move(backend)), limits_(limits) {}

MemoryRegistry::MemoryRegistry(std::unique_ptr<RegistrationBackend> backend)
    : MemoryRegistry(std::move(backend), Limits{}) {}

MemoryRegistry::~MemoryRegistry() {
  absl::MutexLock lock(&mu_);
  for (auto& [addr, e] : by_addr_) {
    if (e->refs > 0) {
      log::Error(
          "verbs: memory registration at 0x{:x} ({} bytes) still in use by {} requests "
          "when its device closed",
          e->reg.addr, e->reg.len, e->refs);
    }
    backend_->Deregister(e->reg);
  }
  by_addr_.clear();
  lru_.clear();
}

void MemoryRegistry::PageHull(uintptr_t addr, size_t len, uintptr_t* start, size_t* hull_len) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t s = addr & ~(page - 1);
  uintptr_t e = (addr + len + page - 1) & ~(page - 1);
  *start = s;
  *hull_len = e - s;
}

MemoryRegistry::Entry* MemoryRegistry::FindLocked(uintptr_t addr, size_t len, bool remote_write,
                                                  bool device_only) {
  const uintptr_t end = addr + len;
  auto it = by_addr_.upper_bound(addr);  // first entry starting after addr
  while (it != by_addr_.begin()) {
    --it;
    Entry* e = it->second.get();
    // Entries further left are shorter than max_len_ and cannot reach `end`.
    if (e->reg.addr + max_len_ < end) break;
    if (e->reg.addr + e->reg.len < end) continue;
    if (remote_write && !e->reg.remote_write) continue;
    if (device_only && !e->reg.device) continue;
    // Pinned idle entries are never kept, so every entry here is usable.
    return e;
  }
  return nullptr;
}

absl::StatusOr<MrRef> MemoryRegistry::Acquire(const void* addr, size_t len, bool remote_write) {
  if (addr == nullptr || len == 0) {
    return absl::InvalidArgumentError("memory registration of an empty or null buffer");
  }
  const auto a = reinterpret_cast<uintptr_t>(addr);
  {
    absl::MutexLock lock(&mu_);
    if (Entry* e = FindLocked(a, len, remote_write)) {
      if (e->idle) {
        lru_.erase(e->lru_pos);
        idle_bytes_ -= e->reg.len;
        e->idle = false;
      }
      ++e->refs;
      ++stats_.hits;
      return MrRef(this, e);
    }
  }
  uintptr_t start;
  size_t hull;
  PageHull(a, len, &start, &hull);
  // Registration pins or maps pages and can take milliseconds: not under mu_.
  absl::StatusOr<Registration> reg = backend_->Register(start, hull, remote_write);
  if (!reg.ok()) return reg.status();
  absl::MutexLock lock(&mu_);
  return MrRef(this, InsertLocked(*reg));
}

MemoryRegistry::Entry* MemoryRegistry::InsertLocked(const Registration& reg) {
  auto e = std::make_unique<Entry>();
  e->reg = reg;
  e->refs = 1;
  Entry* raw = e.get();
  by_addr_.emplace(reg.addr, std::move(e));
  max_len_ = std::max(max_len_, reg.len);
  ++stats_.registrations;
  if (reg.device) device_entries_.fetch_add(1, std::memory_order_relaxed);
  return raw;
}

absl::StatusOr<MrRef> MemoryRegistry::AcquireDevice(const void* addr, size_t len, int dmabuf_fd,
                                                    uint64_t dmabuf_offset) {
  if (addr == nullptr || len == 0) {
    return absl::InvalidArgumentError("GPU memory registration of an empty or null buffer");
  }
  if (MrRef hit = FindDevice(addr, len); hit.valid()) {
    absl::MutexLock lock(&mu_);
    ++stats_.hits;
    return hit;
  }
  const auto a = reinterpret_cast<uintptr_t>(addr);
  absl::StatusOr<Registration> reg = backend_->RegisterDevice(a, len, dmabuf_fd, dmabuf_offset);
  if (!reg.ok()) return reg.status();
  reg->device = true;
  reg->cacheable = false;
  absl::MutexLock lock(&mu_);
  return MrRef(this, InsertLocked(*reg));
}

MrRef MemoryRegistry::FindDevice(const void* addr, size_t len) {
  if (device_entries_.load(std::memory_order_relaxed) == 0 || addr == nullptr || len == 0) {
    return MrRef();
  }
  absl::MutexLock lock(&mu_);
  Entry* e = FindLocked(reinterpret_cast<uintptr_t>(addr), len, /*remote_write=*/false,
                        /*device_only=*/true);
  if (e == nullptr) return MrRef();
  ++e->refs;  // device entries are never idle
  return MrRef(this, e);
}

void MemoryRegistry::EraseLocked(Entry* e) {
  if (e->reg.device) device_entries_.fetch_sub(1, std::memory_order_relaxed);
  auto [lo, hi] = by_addr_.equal_range(e->reg.addr);
  for (auto it = lo; it != hi; ++it) {
    if (it->second.get() == e) {
      by_addr_.erase(it);
      return;
    }
  }
}

void MemoryRegistry::EvictLocked(std::list<Registration>* out) {
  while (!lru_.empty() &&
         (lru_.size() > limits_.max_idle_entries || idle_bytes_ > limits_.max_idle_bytes)) {
    Entry* e = lru_.back();
    lru_.pop_back();
    idle_bytes_ -= e->reg.len;
    out->push_back(e->reg);
    EraseLocked(e);
  }
}

void MemoryRegistry::Release(Entry* e) {
  std::list<Registration> dead;
  {
    absl::MutexLock lock(&mu_);
    if (--e->refs > 0) return;
    if (e->reg.cacheable) {
      lru_.push_front(e);
      e->lru_pos = lru_.begin();
      e->idle = true;
      idle_bytes_ += e->reg.len;
      EvictLocked(&dead);
    } else {
      dead.push_back(e->reg);
      EraseLocked(e);
    }
  }
  for (const Registration& r : dead) backend_->Deregister(r);
}

MemoryRegistry::Stats MemoryRegistry::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.entries = by_addr_.size();
  s.idle_entries = lru_.size();
  s.idle_bytes = idle_bytes_;
  return s;
}

namespace {

class IbvBackend : public RegistrationBackend {
 public:
  IbvBackend(ibv_pd* pd, bool odp, std::string label)
      : pd_(pd), odp_(odp), label_(std::move(label)) {}

  absl::StatusOr<Registration> Register(uintptr_t addr, size_t len, bool remote_write) override {
    void* p = reinterpret_cast<void*>(addr);
    const int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    Registration r;
    r.addr = addr;
    r.len = len;
    ibv_mr* mr = nullptr;
    if (odp_) {
      mr = ibv_reg_mr(pd_, p, len, full | IBV_ACCESS_ON_DEMAND);
      r.cacheable = mr != nullptr;
      if (mr != nullptr) Prefetch(mr, addr, len);
    }
    if (mr == nullptr) mr = ibv_reg_mr(pd_, p, len, full);
    int err = errno;
    r.remote_write = mr != nullptr;
    if (mr == nullptr && !remote_write) {
      // A send source in read-only memory cannot take write access.
      mr = ibv_reg_mr(pd_, p, len, 0);
      if (mr == nullptr) err = errno;
    }
    if (mr == nullptr) {
      absl::Status s =
          ErrnoStatus(absl::StrCat(label_, ": registering ", len, " bytes at 0x", absl::Hex(addr)),
                      "ibv_reg_mr", err);
      if (err == ENOMEM || err == EPERM) {
        s = absl::Status(
            s.code(), absl::StrCat(s.message(), " (locked-memory limit too low? see ulimit -l)"));
      }
      return s;
    }
    r.lkey = mr->lkey;
    r.rkey = mr->rkey;
    r.handle = mr;
    return r;
  }

  absl::StatusOr<Registration> RegisterDevice(uintptr_t addr, size_t len, int fd,
                                              uint64_t offset) override {
    const int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    ibv_mr* mr = fd >= 0 ? ibv_reg_dmabuf_mr(pd_, offset, len, addr, fd, full)
                         : ibv_reg_mr(pd_, reinterpret_cast<void*>(addr), len, full);
    if (mr == nullptr) {
      const int err = errno;
      absl::Status s = ErrnoStatus(
          absl::StrCat(label_, ": registering ", len, " bytes of GPU memory at 0x", absl::Hex(addr),
                       fd >= 0 ? absl::StrCat(" (dma-buf fd ", fd, ", offset ", offset, ")")
                               : std::string(" (peer memory)")),
          fd >= 0 ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr", err);
      if (fd < 0 && (err == EFAULT || err == EINVAL)) {
        s = absl::Status(s.code(), absl::StrCat(s.message(),
                                                " (is the nvidia-peermem module loaded? "
                                                "without it GPU memory needs dma-buf)"));
      }
      return s;
    }
    Registration r;
    r.addr = addr;
    r.len = len;
    r.lkey = mr->lkey;
    r.rkey = mr->rkey;
    r.remote_write = true;
    r.device = true;
    r.handle = mr;
    return r;
  }

  void Deregister(const Registration& r) override {
    int rc = ibv_dereg_mr(static_cast<ibv_mr*>(r.handle));
    if (rc != 0) {
      log::Warn("{}: ibv_dereg_mr of {} bytes at 0x{:x} failed: {} (errno {})", label_, r.len,
                r.addr, ErrnoText(rc), rc);
    }
  }

 private:
  // Maps the pages into the NIC now rather than by page faults during the
  // first transfer. Best effort.
  void Prefetch(ibv_mr* mr, uintptr_t addr, size_t len) {
    constexpr size_t kChunk = size_t{1} << 30;
    for (size_t off = 0; off < len; off += kChunk) {
      ibv_sge sge{};
      sge.addr = addr + off;
      sge.length = static_cast<uint32_t>(std::min(kChunk, len - off));
      sge.lkey = mr->lkey;
      if (ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge,
                        1) != 0) {
        return;
      }
    }
  }

  ibv_pd* const pd_;
  const bool odp_;
  const std::string label_;
};

}  // namespace

std::unique_ptr<RegistrationBackend> MakeIbvRegistrationBackend(ibv_pd* pd, bool odp,
                                                                std::string label) {
  return std::make_unique<IbvBackend>(pd, odp, std::move(label));
}

}  // namespace mixnet::transport::verbs
