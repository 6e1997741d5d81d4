// The request path of the NCCL plugin core (see plugin.h): memory
// registration, isend/irecv mapped onto transport Isend/Irecv on the lane
// the path mover picks, and test. Requests with parts on guarded lanes
// complete through the failover rules (lane_recovery.h). Threads: NCCL's
// proxy progress threads (a comm is used by one at a time); the mover thread
// may hold the comm's mutex meanwhile.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "plugins/nccl_net/plugin.h"
#include "plugins/nccl_net/plugin_util.h"
#include "runtime/common/status.h"

namespace mixnet::nccl {
namespace {

// A comm whose lane failed (its peer died or closed, or a control message
// could not be sent) takes no more requests: posting would otherwise wait
// forever for a move that cannot finish.
absl::Status LaneHealth(const Comm& comm, const char* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu) {
  if (!comm.lane_failed) return absl::OkStatus();
  const transport::Connection* conn = comm.lane->connection.get();
  if (conn == nullptr) {  // closed once the failure ended a request (lane_recovery.h)
    return absl::UnavailableError(absl::StrCat(call, ": the comm over ", comm.lane->path.Describe(),
                                               " failed and its connections are closed"));
  }
  absl::Status h = conn->health();
  return absl::UnavailableError(absl::StrCat(call, ": the connection to ", conn->peer_name(),
                                             " over ", comm.lane->path.Describe(), " failed",
                                             h.ok() ? std::string() : ": " + h.ToString()));
}

// Fills in what a failover needs to post part i again (lane_recovery.h);
// before CountPosted, so the part's number is the tag's count so far.
void Describe(const Comm& comm, Request& r, int i, void* data, size_t size, uint32_t tag)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu) {
  r.data[i] = data;
  r.sizes[i] = size;
  r.tags[i] = tag;
  auto it = comm.posted.find(tag);
  uint64_t seq = it == comm.posted.end() ? 0 : it->second;
  for (int k = 0; k < i; ++k) seq += r.tags[k] == tag ? 1 : 0;
  r.seqs[i] = seq;
  r.guarded |= r.lanes[i] != comm.home;
}

// A guarded lane whose connection already failed: fail over instead of
// posting there (the post would fail, or wait for nothing).
bool DeadGuarded(const Comm& comm, const std::shared_ptr<Lane>& lane)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu) {
  if (lane == comm.home) return false;
  if (lane->connection == nullptr || lane->peer_closed || !lane->connection->health().ok()) {
    return true;
  }
  // A striped lane is down when any of its circuits is (multipath.h).
  if (lane->stripes.size() != lane->path.stripes.size()) return true;
  for (const std::unique_ptr<transport::Connection>& s : lane->stripes) {
    if (s == nullptr || !s->health().ok()) return true;
  }
  return false;
}

}  // namespace

MemHandle::~MemHandle() {
  {
    absl::MutexLock lock(&mu);
    pins.clear();  // the registrations go before the fd
  }
  if (dmabuf_fd >= 0) close(dmabuf_fd);
}

absl::Status PinOnLane(MemHandle* m, const std::shared_ptr<Lane>& lane) {
  if (m == nullptr || lane == nullptr || lane->connection == nullptr || m->size == 0) {
    return absl::OkStatus();
  }
  absl::MutexLock lock(&m->mu);
  auto it = m->pins.find(lane.get());
  if (it != m->pins.end() && !it->second.lane.expired()) return absl::OkStatus();
  // With each of the lane's connections: a striped lane's circuits may sit
  // on other adapters.
  auto regs = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  std::vector<transport::Connection*> conns{lane->connection.get()};
  for (const std::unique_ptr<transport::Connection>& s : lane->stripes) {
    if (s != nullptr) conns.push_back(s.get());
  }
  const bool gpu = m->type == nccl_abi::kPtrCuda;
  for (transport::Connection* conn : conns) {
    absl::StatusOr<std::shared_ptr<const void>> reg =
        gpu ? conn->RegisterDeviceMemory(m->data, m->size, m->dmabuf_fd, m->dmabuf_offset)
            : conn->RegisterMemory(m->data, m->size);
    if (!reg.ok()) {
      return Annotate(
          reg.status(),
          absl::StrCat("registering ", m->size, gpu ? " bytes of GPU memory" : " bytes", " at 0x",
                       absl::Hex(reinterpret_cast<uintptr_t>(m->data)), " on lane ",
                       lane->path.Describe(), " (", conn->peer_name(), ")"));
    }
    regs->push_back(*std::move(reg));
  }
  m->pins[lane.get()] = MemHandle::Pin{lane, std::shared_ptr<const void>(regs, regs.get())};
  return absl::OkStatus();
}

absl::Status Plugin::RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (!registry_.Contains(comm, Kind::kSend) && !registry_.Contains(comm, Kind::kRecv)) {
    return NotLive("regMr", comm, "send or recv comm");
  }
  if (mhandle == nullptr) return NullOut("regMr", "mhandle");
  *mhandle = nullptr;
  if (type != nccl_abi::kPtrHost && type != nccl_abi::kPtrCuda) {
    return absl::InvalidArgumentError(absl::StrCat("regMr: unknown memory type ", type));
  }
  if (data == nullptr && size != 0) return absl::InvalidArgumentError("regMr: NULL buffer");
  // GPU memory without a dma-buf: peer memory (the lanes' adapters refuse
  // it, with the reason, when they cannot).
  return RegisterHandle(comm, std::make_unique<MemHandle>(comm, data, size, type), mhandle);
}

absl::Status Plugin::RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, void** mhandle) {
  if (!registry_.Contains(comm, Kind::kSend) && !registry_.Contains(comm, Kind::kRecv)) {
    return NotLive("regMrDmaBuf", comm, "send or recv comm");
  }
  if (mhandle == nullptr) return NullOut("regMrDmaBuf", "mhandle");
  *mhandle = nullptr;
  if (type != nccl_abi::kPtrCuda) {
    return absl::InvalidArgumentError(absl::StrCat("regMrDmaBuf: memory type ", type,
                                                   " (only NCCL_PTR_CUDA comes as a dma-buf)"));
  }
  if (data == nullptr && size != 0) return absl::InvalidArgumentError("regMrDmaBuf: NULL buffer");
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("regMrDmaBuf: bad fd ", fd));
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return ErrnoStatus(absl::StrCat("regMrDmaBuf: duplicating fd ", fd), "fcntl", errno);
  return RegisterHandle(comm, std::make_unique<MemHandle>(comm, data, size, type, own, offset),
                        mhandle);
}

absl::Status Plugin::RegisterHandle(void* comm, std::unique_ptr<MemHandle> m, void** mhandle) {
  {
    // Registered now with the lanes the comm has (and later with others).
    auto* c = static_cast<Comm*>(comm);
    absl::MutexLock lock(&c->mu);
    const char* call = m->dmabuf_fd >= 0 ? "regMrDmaBuf" : "regMr";
    RETURN_IF_ERROR(Annotate(PinOnLane(m.get(), c->lane), call));
    RETURN_IF_ERROR(Annotate(PinOnLane(m.get(), c->home), call));
  }
  registry_.Add(m.get(), Kind::kMemory);
  *mhandle = m.release();
  return absl::OkStatus();
}

absl::Status Plugin::DeregMr(void* comm, void* mhandle) {
  if (!registry_.Remove(mhandle, Kind::kMemory))
    return NotLive("deregMr", mhandle, "memory handle");
  delete static_cast<MemHandle*>(mhandle);
  return absl::OkStatus();
}

absl::Status Plugin::Isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                           void** request) {
  if (!registry_.Contains(send_comm, Kind::kSend)) return NotLive("isend", send_comm, "send comm");
  if (request == nullptr) return NullOut("isend", "request");
  *request = nullptr;
  RETURN_IF_ERROR(CheckMemHandle(mhandle, "isend"));
  if (data == nullptr && size != 0) return absl::InvalidArgumentError("isend: NULL buffer");
  if (size > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("isend: ", size, " bytes exceeds maxP2pBytes"));
  }
  auto* comm = static_cast<Comm*>(send_comm);
  absl::MutexLock lock(&comm->mu);
  if (static_cast<int>(comm->live.size()) >= comm->max_requests) return absl::OkStatus();  // retry
  const uint32_t wire_tag = static_cast<uint32_t>(tag);
  RETURN_IF_ERROR(LaneHealth(*comm, "isend"));
  std::shared_ptr<Lane> lane;
  if (!LanesFor(*comm, &wire_tag, 1, &lane)) {
    if (mover_ != nullptr) mover_->Advance(*comm);
    return absl::OkStatus();  // moving to another lane: retry
  }
  if (mover_ != nullptr && DeadGuarded(*comm, lane)) {
    mover_->Failover(*comm, absl::StrCat("isend: lane ", lane->path.Describe(), " is down"));
    return absl::OkStatus();  // retry once the failover is through
  }
  // A registered buffer is registered with the lane (and home, which split
  // pieces and failovers use) once, not per message.
  auto* m = static_cast<MemHandle*>(mhandle);
  RETURN_IF_ERROR(Annotate(PinOnLane(m, lane), "isend"));
  RETURN_IF_ERROR(Annotate(PinOnLane(m, comm->home), "isend"));
  auto r = std::make_unique<Request>();
  r->comm = comm;
  r->n = 1;
  r->order = comm->next_order++;
  r->lanes[0] = lane;
  Describe(*comm, *r, 0, const_cast<void*>(data), size, wire_tag);
  // A split lane cuts the part over it and home (multipath.h).
  const double eps_share = mover_ != nullptr && lane->path.split_min_bytes > 0
                               ? mover_->HomeShare(*comm, lane->path)
                               : 0.0;
  absl::Status posted = PostSendPart(*comm, *r, 0, eps_share);
  if (!posted.ok()) {
    if (r->parts[0] != nullptr) {
      // Out on the lane, but its header or second piece could not follow
      // on home: the comm failed. Keep the request's buffers until it
      // closes (NCCL never sees this request).
      comm->failed_posts.push_back(std::move(r));
      return posted;
    }
    if (mover_ != nullptr && lane != comm->home) {
      // The guarded lane died since the check above: nothing left, so fail
      // over and let NCCL retry (lane_recovery.h).
      mover_->Failover(*comm, absl::StrCat("isend: lane ", lane->path.Describe(),
                                           " failed: ", posted.ToString()));
      return absl::OkStatus();
    }
    return posted;
  }
  CountPosted(*comm, &wire_tag, 1, &lane);
  comm->sent_bytes += size;
  comm->live.insert(r.get());
  registry_.Add(r.get(), Kind::kRequest);
  *request = r.release();
  return absl::OkStatus();
}

absl::Status Plugin::Irecv(void* recv_comm, int n, void** data, const size_t* sizes,
                           const int* tags, void** mhandles, void** request) {
  if (!registry_.Contains(recv_comm, Kind::kRecv)) return NotLive("irecv", recv_comm, "recv comm");
  if (request == nullptr) return NullOut("irecv", "request");
  *request = nullptr;  // it may hold NCCL's optional-completion marker
  if (n < 1 || n > config_.max_recvs) {
    return absl::InvalidArgumentError(
        absl::StrCat("irecv: n = ", n, " outside 1..maxRecvs (", config_.max_recvs, ")"));
  }
  if (data == nullptr || sizes == nullptr || tags == nullptr) {
    return absl::InvalidArgumentError("irecv: NULL data, sizes or tags array");
  }
  for (int i = 0; i < n; ++i) {
    if (mhandles != nullptr) RETURN_IF_ERROR(CheckMemHandle(mhandles[i], "irecv"));
    if (data[i] == nullptr && sizes[i] != 0) {
      return absl::InvalidArgumentError(absl::StrCat("irecv: buffer ", i, " is NULL"));
    }
  }
  auto* comm = static_cast<Comm*>(recv_comm);
  absl::MutexLock lock(&comm->mu);
  if (static_cast<int>(comm->live.size()) >= comm->max_requests) return absl::OkStatus();  // retry
  std::array<uint32_t, kMaxRecvsLimit> wire_tags;
  for (int i = 0; i < n; ++i) wire_tags[i] = static_cast<uint32_t>(tags[i]);
  RETURN_IF_ERROR(LaneHealth(*comm, "irecv"));
  auto r = std::make_unique<Request>();
  if (!LanesFor(*comm, wire_tags.data(), n, r->lanes.data())) {
    if (mover_ != nullptr) mover_->Advance(*comm);
    return absl::OkStatus();  // moving to another lane: retry
  }
  for (int i = 0; i < n; ++i) {
    if (mover_ != nullptr && DeadGuarded(*comm, r->lanes[i])) {
      mover_->Failover(*comm,
                       absl::StrCat("irecv: lane ", r->lanes[i]->path.Describe(), " is down"));
      return absl::OkStatus();  // retry once the failover is through
    }
  }
  if (mhandles != nullptr) {
    for (int i = 0; i < n; ++i) {
      auto* m = static_cast<MemHandle*>(mhandles[i]);
      RETURN_IF_ERROR(Annotate(PinOnLane(m, r->lanes[i]), "irecv"));
      RETURN_IF_ERROR(Annotate(PinOnLane(m, comm->home), "irecv"));
    }
  }
  r->comm = comm;
  r->n = n;
  r->order = comm->next_order++;
  for (int i = 0; i < n; ++i) Describe(*comm, *r, i, data[i], sizes[i], wire_tags[i]);
  // A guarded lane that dies since the check above fails over (NCCL
  // retries when nothing was posted yet); home failing fails the comm.
  ASSIGN_OR_RETURN(std::unique_ptr<Request> posted, PostReceive(mover_.get(), *comm, std::move(r)));
  if (posted == nullptr) return absl::OkStatus();  // retry
  registry_.Add(posted.get(), Kind::kRequest);
  *request = posted.release();
  return absl::OkStatus();
}

absl::Status Plugin::Iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles,
                            void** request) {
  if (!registry_.Contains(recv_comm, Kind::kRecv)) return NotLive("iflush", recv_comm, "recv comm");
  if (request == nullptr) return NullOut("iflush", "request");
  *request = nullptr;  // done when this returns: nothing for NCCL to test
  if (n < 0 || n > config_.max_recvs) {
    return absl::InvalidArgumentError(absl::StrCat("iflush: n = ", n, " outside 0..maxRecvs"));
  }
  if (n == 0 || data == nullptr || sizes == nullptr || mhandles == nullptr) {
    return absl::OkStatus();
  }
  // Every adapter that may have written a GPU receive reads it once: the
  // lanes its handle is registered with (a striped lane's circuits too).
  // The reads are local (microseconds), so they are waited for here.
  std::vector<std::unique_ptr<transport::Request>> reads;
  auto* comm = static_cast<Comm*>(recv_comm);
  absl::ReleasableMutexLock comm_lock(&comm->mu);  // lanes change under it (moves)
  for (int i = 0; i < n; ++i) {
    if (sizes[i] <= 0 || mhandles[i] == nullptr) continue;
    RETURN_IF_ERROR(CheckMemHandle(mhandles[i], "iflush"));
    auto* m = static_cast<MemHandle*>(mhandles[i]);
    if (m->type != nccl_abi::kPtrCuda) continue;
    std::vector<std::shared_ptr<const Lane>> lanes;
    {
      absl::MutexLock lock(&m->mu);
      for (auto& [key, pin] : m->pins) {
        if (std::shared_ptr<const Lane> l = pin.lane.lock()) lanes.push_back(std::move(l));
      }
    }
    for (const std::shared_ptr<const Lane>& lane : lanes) {
      std::vector<transport::Connection*> conns{lane->connection.get()};
      for (const auto& st : lane->stripes) conns.push_back(st.get());
      for (transport::Connection* c : conns) {
        if (c == nullptr) continue;
        absl::StatusOr<std::unique_ptr<transport::Request>> r =
            c->FlushDeviceWrites(data[i], static_cast<size_t>(sizes[i]));
        if (!r.ok()) return Annotate(r.status(), absl::StrCat("iflush on ", c->peer_name()));
        if (*r != nullptr) reads.push_back(*std::move(r));
      }
    }
  }
  comm_lock.Release();
  for (auto& r : reads) {
    absl::Status st = r->Wait(config_.connect_timeout);
    if (!st.ok()) return Annotate(st, "iflush: the RDMA read that flushes GPU writes");
  }
  return absl::OkStatus();
}

absl::Status Plugin::Test(void* request, int* done, int* sizes) {
  if (!registry_.Contains(request, Kind::kRequest)) return NotLive("test", request, "request");
  if (done == nullptr) return NullOut("test", "done");
  auto* r = static_cast<Request*>(request);
  Comm* comm = r->comm;
  *done = 0;
  if (!r->guarded) {
    // Only on the home lane: its parts are never touched by a failover, so
    // they are checked without the comm's lock.
    for (int i = 0; i < r->n; ++i) {
      if (!r->parts[i]->Done()) return absl::OkStatus();
    }
  }
  absl::Status status;
  {
    absl::MutexLock lock(&comm->mu);
    if (r->guarded && (mover_ == nullptr || !mover_->Complete(*comm, *r))) return absl::OkStatus();
    status = RequestResult(*comm, *r, sizes);
    comm->live.erase(r);
    for (int i = 0; i < r->n; ++i) --r->lanes[i]->outstanding;
    if (mover_ != nullptr) {
      if (!comm->is_send) mover_->NoteDone(*comm, *r);
      if (comm->move != nullptr) mover_->Advance(*comm);
    }
  }
  registry_.Remove(r, Kind::kRequest);
  delete r;
  *done = 1;
  return status;
}

}  // namespace mixnet::nccl
