// An in-process simulation of the libibverbs calls the verbs transport makes,
// so its protocol runs end to end on machines without RDMA hardware. Linked
// into a test binary instead of libibverbs. It models: devices and ports,
// PDs, memory registrations (lkey/rkey checked on every access), completion
// queues with a completion channel, RC queue pairs with state checks, queue
// depth limits (work requests count until their completion is polled), SEND,
// RDMA WRITE, RDMA WRITE WITH IMMEDIATE and RDMA READ delivered in order by a "wire"
// thread, receiver-not-ready waits, and flushing on ERR. GPU memory: dma-buf
// registrations (the NIC reaches the pages through the fd, mmapped here) and
// peer memory (ranges the test maps to a NIC-side view), so a test can give
// the transport "GPU" buffers the CPU cannot touch. One global mutex.
#include "tests/transport/verbs/fake_ibverbs.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#undef ibv_reg_mr
#undef ibv_query_port

namespace {

struct FakeMr {
  ibv_mr mr{};
  uintptr_t addr = 0;
  size_t len = 0;
  int access = 0;
  // Where the "NIC" reaches byte `addr`: the address itself for host
  // memory; for GPU memory (dma-buf or peer memory) a mapping of its own,
  // because the CPU's address of such memory is not accessible.
  uint8_t* view = nullptr;
  void* mapping = nullptr;  // dma-buf: the fake's mmap of the fd
  size_t mapping_len = 0;
};

// Peer memory (nvidia-peermem): GPU address ranges that ibv_reg_mr resolves
// to the NIC-side view the test gave (fake_ibverbs_add_peer_memory).
struct PeerRange {
  uintptr_t addr;
  size_t len;
  uint8_t* view;
};

struct FakeCq {
  ibv_cq cq{};
  std::deque<ibv_wc> q;
  bool armed = false;
};

struct FakeChannel {
  ibv_comp_channel ch{};
  int wr_fd = -1;
  FakeCq* cq = nullptr;
};

struct Recv {
  uint64_t wr_id;
  ibv_sge sge;
};

struct Send {
  uint64_t wr_id;
  ibv_wr_opcode opcode;
  bool signaled;
  std::vector<ibv_sge> sges;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t imm;
  // Dark fabric: when this send first found no path (its retries started).
  std::chrono::steady_clock::time_point dark_since{};
};

struct FakeQp {
  ibv_qp qp{};
  ibv_qp_cap cap{};
  uint32_t dest_qpn = 0;
  int sq_outstanding = 0;  // posted, CQE not yet polled
  int rq_outstanding = 0;
  bool sq_sig_all = false;
  int ack_timeout = 0;  // IBV_QP_TIMEOUT exponent and retry count, set at RTS
  int retry_cnt = 0;
  std::deque<Recv> recvs;
  std::deque<Send> sends;  // waiting for the wire thread
};

// Never destroyed: the detached wire thread waits on them until exit.
std::mutex& g_mu = *new std::mutex;
std::condition_variable& g_cv = *new std::condition_variable;
int g_num_devices = 1;
int g_ethernet = 0;
struct Rtr {
  int sl, global, tc;
};
std::vector<Rtr>& g_rtrs = *new std::vector<Rtr>;
struct Rts {
  int timeout, retry_cnt;
};
std::vector<Rts>& g_rtss = *new std::vector<Rts>;
std::vector<ibv_device*>& g_devices = *new std::vector<ibv_device*>;    // lives until exit
std::map<uint32_t, FakeQp*>& g_qps = *new std::map<uint32_t, FakeQp*>;  // outlive exit (threads)
std::map<uint32_t, FakeMr*>& g_mrs = *new std::map<uint32_t, FakeMr*>;  // by key (lkey == rkey)
uint32_t g_next_qpn = 100;
uint32_t g_next_key = 1000;
std::atomic<uint64_t> g_rnr{0};
std::atomic<uint64_t> g_errors{0};
bool g_dark = false;  // fake_ibverbs_set_dark
uint64_t g_reg_mr_calls = 0;
bool g_dmabuf = true;  // fake_ibverbs_set_dmabuf
uint64_t g_reads = 0;  // RDMA READs delivered
std::vector<PeerRange>& g_peer = *new std::vector<PeerRange>;
std::thread* g_wire = nullptr;

void PushCqe(FakeCq* cq, const ibv_wc& wc) {
  if (static_cast<int>(cq->q.size()) >= cq->cq.cqe) {
    std::fprintf(stderr, "fake_ibverbs: CQ overrun (%d entries)\n", cq->cq.cqe);
    std::abort();
  }
  cq->q.push_back(wc);
  if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) ++g_errors;
  if (cq->armed && cq->cq.channel != nullptr) {
    cq->armed = false;
    auto* ch = reinterpret_cast<FakeChannel*>(cq->cq.channel);
    char b = 1;
    ssize_t n = write(ch->wr_fd, &b, 1);
    (void)n;
  }
}

ibv_wc MakeWc(uint64_t wr_id, ibv_wc_status st, ibv_wc_opcode op, uint32_t qpn, uint32_t len) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.qp_num = qpn;
  wc.byte_len = len;
  return wc;
}

// The MR for [addr, addr + len) under key, with `access` bits, or nullptr.
FakeMr* CheckMr(uint32_t key, uintptr_t addr, size_t len, int access, ibv_pd* pd) {
  auto it = g_mrs.find(key);
  if (it == g_mrs.end()) return nullptr;
  FakeMr* m = it->second;
  if (m->mr.pd != pd) return nullptr;
  if (addr < m->addr || addr + len > m->addr + m->len) return nullptr;
  if ((m->access & access) != access) return nullptr;
  return m;
}

// The NIC's pointer to `addr` inside registration `m`.
uint8_t* NicPtr(const FakeMr* m, uintptr_t addr) { return m->view + (addr - m->addr); }

void FlushQp(FakeQp* q) {
  for (const Recv& r : q->recvs) {
    PushCqe(reinterpret_cast<FakeCq*>(q->qp.recv_cq),
            MakeWc(r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, q->qp.qp_num, 0));
  }
  q->recvs.clear();
  for (const Send& s : q->sends) {
    PushCqe(reinterpret_cast<FakeCq*>(q->qp.send_cq),
            MakeWc(s.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, q->qp.qp_num, 0));
  }
  q->sends.clear();
}

void ToError(FakeQp* q) {
  q->qp.state = IBV_QPS_ERR;
  FlushQp(q);
}

// Fails the head send of q with `st` and moves q to ERR.
void FailHead(FakeQp* q, ibv_wc_status st) {
  Send s = q->sends.front();
  q->sends.pop_front();
  PushCqe(reinterpret_cast<FakeCq*>(q->qp.send_cq),
          MakeWc(s.wr_id, st, IBV_WC_SEND, q->qp.qp_num, 0));
  ToError(q);
}

// Tries to deliver q's first send. False when it must wait (RNR, or a dark
// fabric before the send's RC retries run out).
bool DeliverOne(FakeQp* q) {
  Send& s = q->sends.front();
  if (g_dark) {
    // No ACK ever comes: the send is retried retry_cnt times, each after the
    // ACK timeout of 4.096 us x 2^timeout, then fails.
    const auto now = std::chrono::steady_clock::now();
    if (s.dark_since == std::chrono::steady_clock::time_point{}) s.dark_since = now;
    const double budget_us = 4.096 * std::ldexp(1.0, q->ack_timeout) * (q->retry_cnt + 1);
    if (now - s.dark_since < std::chrono::duration<double, std::micro>(budget_us)) return false;
    FailHead(q, IBV_WC_RETRY_EXC_ERR);
    return true;
  }
  auto pit = g_qps.find(q->dest_qpn);
  if (pit == g_qps.end() || pit->second->qp.state == IBV_QPS_ERR ||
      pit->second->qp.state < IBV_QPS_RTR) {
    FailHead(q, IBV_WC_RETRY_EXC_ERR);
    return true;
  }
  FakeQp* peer = pit->second;
  size_t total = 0;
  std::vector<const uint8_t*> srcs;
  for (const ibv_sge& g : s.sges) {
    const FakeMr* m = CheckMr(g.lkey, g.addr, g.length, 0, q->qp.pd);
    if (m == nullptr) {
      FailHead(q, IBV_WC_LOC_PROT_ERR);
      return true;
    }
    srcs.push_back(NicPtr(m, g.addr));
    total += g.length;
  }
  if (s.opcode == IBV_WR_RDMA_READ) {
    // The responder's memory into the local SGEs (which need local write).
    const FakeMr* from = CheckMr(s.rkey, s.remote_addr, total, IBV_ACCESS_REMOTE_READ, peer->qp.pd);
    if (from == nullptr) {
      FailHead(q, IBV_WC_REM_ACCESS_ERR);
      return true;
    }
    const uint8_t* src = NicPtr(from, s.remote_addr);
    for (const ibv_sge& g : s.sges) {
      const FakeMr* to = CheckMr(g.lkey, g.addr, g.length, IBV_ACCESS_LOCAL_WRITE, q->qp.pd);
      if (to == nullptr) {
        FailHead(q, IBV_WC_LOC_PROT_ERR);
        return true;
      }
      std::memcpy(NicPtr(to, g.addr), src, g.length);
      src += g.length;
    }
    ++g_reads;
    PushCqe(reinterpret_cast<FakeCq*>(q->qp.send_cq),
            MakeWc(s.wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, q->qp.qp_num,
                   static_cast<uint32_t>(total)));
    q->sends.pop_front();
    return true;
  }
  const bool needs_recv = s.opcode == IBV_WR_SEND || s.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (needs_recv && peer->recvs.empty()) {
    ++g_rnr;
    return false;
  }
  auto gather = [&](uint8_t* dst) {
    for (size_t i = 0; i < s.sges.size(); ++i) {
      std::memcpy(dst, srcs[i], s.sges[i].length);
      dst += s.sges[i].length;
    }
  };
  if (s.opcode == IBV_WR_RDMA_WRITE || s.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    const FakeMr* target =
        CheckMr(s.rkey, s.remote_addr, total, IBV_ACCESS_REMOTE_WRITE, peer->qp.pd);
    if (target == nullptr) {
      FailHead(q, IBV_WC_REM_ACCESS_ERR);
      return true;
    }
    gather(NicPtr(target, s.remote_addr));
  }
  if (needs_recv) {
    Recv r = peer->recvs.front();
    peer->recvs.pop_front();
    ibv_wc rwc =
        MakeWc(r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, peer->qp.qp_num, static_cast<uint32_t>(total));
    if (s.opcode == IBV_WR_SEND) {
      const FakeMr* slot = total > r.sge.length ? nullptr
                                                : CheckMr(r.sge.lkey, r.sge.addr, total,
                                                          IBV_ACCESS_LOCAL_WRITE, peer->qp.pd);
      if (slot == nullptr) {
        PushCqe(reinterpret_cast<FakeCq*>(peer->qp.recv_cq),
                MakeWc(r.wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, peer->qp.qp_num, 0));
        ToError(peer);
        FailHead(q, IBV_WC_REM_INV_REQ_ERR);
        return true;
      }
      gather(NicPtr(slot, r.sge.addr));
    } else {
      rwc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      rwc.wc_flags = IBV_WC_WITH_IMM;
      rwc.imm_data = s.imm;
    }
    PushCqe(reinterpret_cast<FakeCq*>(peer->qp.recv_cq), rwc);
  }
  if (s.signaled) {
    ibv_wc_opcode op = s.opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
    PushCqe(reinterpret_cast<FakeCq*>(q->qp.send_cq),
            MakeWc(s.wr_id, IBV_WC_SUCCESS, op, q->qp.qp_num, static_cast<uint32_t>(total)));
  } else {
    --q->sq_outstanding;  // never polled
  }
  q->sends.pop_front();
  return true;
}

void WireLoop() {
  std::unique_lock<std::mutex> lock(g_mu);
  while (true) {
    bool progress = false;
    bool waiting = false;
    for (auto& [qpn, q] : g_qps) {
      // A few per round, so connections interleave.
      for (int i = 0; i < 4 && !q->sends.empty() && q->qp.state == IBV_QPS_RTS; ++i) {
        if (!DeliverOne(q)) {
          waiting = true;
          break;
        }
        progress = true;
      }
    }
    if (progress) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    } else if (waiting) {
      g_cv.wait_for(lock, std::chrono::microseconds(200));
    } else {
      g_cv.wait(lock);
    }
  }
}

// Once per process: devices are opened from several rank threads at once,
// and a second wire thread (and a lost std::thread object) is what an
// unguarded check let through under ASan.
void StartWire() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_wire = new std::thread(WireLoop);
    g_wire->detach();
  });
}

int FakePollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* c = reinterpret_cast<FakeCq*>(cq);
  int got = 0;
  while (got < n && !c->q.empty()) {
    wc[got] = c->q.front();
    c->q.pop_front();
    auto it = g_qps.find(wc[got].qp_num);
    if (it != g_qps.end()) {
      if (wc[got].opcode & IBV_WC_RECV) {
        --it->second->rq_outstanding;
      } else {
        --it->second->sq_outstanding;
      }
    }
    ++got;
  }
  return got;
}

int FakeReqNotify(ibv_cq* cq, int) {
  std::lock_guard<std::mutex> lock(g_mu);
  reinterpret_cast<FakeCq*>(cq)->armed = true;
  return 0;
}

int FakePostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  for (; wr != nullptr; wr = wr->next) {
    if (q->qp.state == IBV_QPS_ERR) {
      PushCqe(reinterpret_cast<FakeCq*>(q->qp.send_cq),
              MakeWc(wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, q->qp.qp_num, 0));
      ++q->sq_outstanding;
      continue;
    }
    if (q->qp.state != IBV_QPS_RTS) {
      *bad = wr;
      return EINVAL;
    }
    if (q->sq_outstanding >= static_cast<int>(q->cap.max_send_wr)) {
      std::fprintf(stderr, "fake_ibverbs: send queue of QP %u full (%d)\n", q->qp.qp_num,
                   q->sq_outstanding);
      *bad = wr;
      return ENOMEM;
    }
    Send s{};
    s.wr_id = wr->wr_id;
    s.opcode = wr->opcode;
    s.signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    s.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    s.remote_addr = wr->wr.rdma.remote_addr;
    s.rkey = wr->wr.rdma.rkey;
    s.imm = wr->imm_data;
    q->sends.push_back(std::move(s));
    ++q->sq_outstanding;
  }
  g_cv.notify_all();
  return 0;
}

int FakePostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  for (; wr != nullptr; wr = wr->next) {
    if (q->qp.state == IBV_QPS_RESET) {
      *bad = wr;
      return EINVAL;
    }
    if (q->rq_outstanding >= static_cast<int>(q->cap.max_recv_wr) || wr->num_sge != 1) {
      std::fprintf(stderr, "fake_ibverbs: receive queue of QP %u full\n", q->qp.qp_num);
      *bad = wr;
      return ENOMEM;
    }
    ++q->rq_outstanding;
    if (q->qp.state == IBV_QPS_ERR) {
      PushCqe(reinterpret_cast<FakeCq*>(q->qp.recv_cq),
              MakeWc(wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, q->qp.qp_num, 0));
      continue;
    }
    q->recvs.push_back(Recv{wr->wr_id, wr->sg_list[0]});
  }
  g_cv.notify_all();
  return 0;
}

}  // namespace

extern "C" {

void fake_ibverbs_configure(int num_devices, int ethernet) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_num_devices = num_devices;
  g_ethernet = ethernet;
}
uint64_t fake_ibverbs_rnr_events() { return g_rnr.load(); }
uint64_t fake_ibverbs_error_completions() { return g_errors.load(); }
int64_t fake_ibverbs_live_mrs() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int64_t>(g_mrs.size());
}
int fake_ibverbs_rts_count() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int>(g_rtss.size());
}
void fake_ibverbs_rts(int i, int* timeout, int* retry_cnt) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Rts& r = g_rtss.at(static_cast<size_t>(i));
  *timeout = r.timeout;
  *retry_cnt = r.retry_cnt;
}
int fake_ibverbs_rtr_count() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int>(g_rtrs.size());
}
void fake_ibverbs_rtr(int i, int* sl, int* global, int* traffic_class) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Rtr& r = g_rtrs.at(static_cast<size_t>(i));
  *sl = r.sl;
  *global = r.global;
  *traffic_class = r.tc;
}
uint64_t fake_ibverbs_reg_mr_calls() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_reg_mr_calls;
}
void fake_ibverbs_set_dark(int dark) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_dark = dark != 0;
  g_cv.notify_all();
}
uint64_t fake_ibverbs_rdma_reads() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_reads;
}
void fake_ibverbs_set_dmabuf(int supported) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_dmabuf = supported != 0;
}
void fake_ibverbs_add_peer_memory(void* gpu_addr, size_t len, void* nic_view) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_peer.push_back(
      PeerRange{reinterpret_cast<uintptr_t>(gpu_addr), len, static_cast<uint8_t*>(nic_view)});
}
void fake_ibverbs_clear_peer_memory() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_peer.clear();
}
int64_t fake_ibverbs_live_qps() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int64_t>(g_qps.size());
}

ibv_device** ibv_get_device_list(int* num) {
  std::lock_guard<std::mutex> lock(g_mu);
  while (static_cast<int>(g_devices.size()) < g_num_devices) {
    auto* d = new ibv_device{};
    std::snprintf(d->name, sizeof(d->name), "fake%zu", g_devices.size());
    g_devices.push_back(d);
  }
  auto** list = static_cast<ibv_device**>(calloc(g_num_devices + 1, sizeof(ibv_device*)));
  for (int i = 0; i < g_num_devices; ++i) list[i] = g_devices[i];
  if (num != nullptr) *num = g_num_devices;
  return list;
}

void ibv_free_device_list(ibv_device** list) { free(list); }

const char* ibv_get_device_name(ibv_device* d) { return d->name; }

ibv_context* ibv_open_device(ibv_device* d) {
  auto* c = new ibv_context{};
  c->device = d;
  c->ops.poll_cq = FakePollCq;
  c->ops.req_notify_cq = FakeReqNotify;
  c->ops.post_send = FakePostSend;
  c->ops.post_recv = FakePostRecv;
  c->abi_compat = nullptr;
  c->num_comp_vectors = 1;
  StartWire();
  return c;
}

int ibv_close_device(ibv_context* c) {
  delete c;
  return 0;
}

int ibv_query_device(ibv_context*, ibv_device_attr* a) {
  std::memset(a, 0, sizeof(*a));
  a->max_qp_wr = 16384;
  a->max_cqe = 1 << 20;
  a->phys_port_cnt = 1;
  a->max_sge = 30;
  return 0;
}

int ibv_query_port(ibv_context* c, uint8_t port, struct _compat_ibv_port_attr* compat) {
  if (port != 1) return EINVAL;
  auto* a = reinterpret_cast<ibv_port_attr*>(compat);  // the caller passes a full one
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = 16;
  a->max_msg_sz = 1u << 31;
  a->lid = static_cast<uint16_t>(1 + (c->device->name[4] - '0'));
  a->link_layer = g_ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

// Index 0: link-local (RoCE v1 on Ethernet); on Ethernet index 1 is a RoCE v2
// GID holding 127.0.0.<n>; the rest are empty.
int ibv_query_gid(ibv_context* c, uint8_t, int index, ibv_gid* gid) {
  std::memset(gid, 0, sizeof(*gid));
  const uint8_t n = static_cast<uint8_t>(1 + (c->device->name[4] - '0'));
  if (index == 0) {
    gid->raw[0] = 0xfe;
    gid->raw[1] = 0x80;
    gid->raw[15] = n;
  } else if (index == 1 && g_ethernet) {
    gid->raw[10] = gid->raw[11] = 0xff;
    gid->raw[12] = 127;
    gid->raw[15] = n;
  }
  return 0;
}

int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t,
                      size_t) {
  std::memset(e, 0, sizeof(*e));
  if (index > 1 || (index == 1 && !g_ethernet)) return ENODATA;
  ibv_query_gid(c, static_cast<uint8_t>(port), static_cast<int>(index), &e->gid);
  e->gid_index = index;
  e->port_num = port;
  e->gid_type =
      g_ethernet ? (index == 1 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1) : IBV_GID_TYPE_IB;
  return 0;
}

const char* ibv_port_state_str(ibv_port_state s) {
  return s == IBV_PORT_ACTIVE ? "ACTIVE" : "DOWN";
}

const char* ibv_wc_status_str(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_WR_FLUSH_ERR:
      return "Work Request Flushed Error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    default:
      return "other error";
  }
}

ibv_pd* ibv_alloc_pd(ibv_context* c) {
  auto* pd = new ibv_pd{};
  pd->context = c;
  return pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [k, m] : g_mrs) {
    if (m->mr.pd == pd) return EBUSY;
  }
  delete pd;
  return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t, unsigned int access) {
  if (addr == nullptr || len == 0 || (access & IBV_ACCESS_ON_DEMAND)) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_reg_mr_calls;
  auto* m = new FakeMr();
  m->addr = reinterpret_cast<uintptr_t>(addr);
  m->len = len;
  m->access = static_cast<int>(access);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = m->mr.rkey = g_next_key++;
  m->view = static_cast<uint8_t*>(addr);
  for (const PeerRange& p : g_peer) {
    // Peer memory: the kernel module resolves the GPU pages.
    if (m->addr >= p.addr && m->addr + len <= p.addr + p.len) {
      m->view = p.view + (m->addr - p.addr);
    }
  }
  g_mrs[m->mr.lkey] = m;
  return &m->mr;
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd,
                          int access) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_dmabuf) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (fd < 0) {
    errno = EBADF;
    return nullptr;
  }
  if (len == 0 || iova == 0 || (access & IBV_ACCESS_ON_DEMAND)) {
    errno = EINVAL;
    return nullptr;
  }
  // The "NIC" reaches the memory through the fd, as a real one does through
  // the exporter's pages, never through the CPU's address `iova`.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset & ~(uint64_t{page} - 1);
  const size_t map_len = static_cast<size_t>(offset - start) + len;
  void* map =
      mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  if (map == MAP_FAILED) return nullptr;  // errno from mmap
  ++g_reg_mr_calls;
  auto* m = new FakeMr();
  m->addr = static_cast<uintptr_t>(iova);
  m->len = len;
  m->access = access;
  m->mapping = map;
  m->mapping_len = map_len;
  m->view = static_cast<uint8_t*>(map) + (offset - start);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = reinterpret_cast<void*>(iova);
  m->mr.length = len;
  m->mr.lkey = m->mr.rkey = g_next_key++;
  g_mrs[m->mr.lkey] = m;
  return &m->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  return ibv_reg_mr_iova2(pd, addr, len, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned>(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_mrs.find(mr->lkey);
  if (it == g_mrs.end()) return EINVAL;
  if (it->second->mapping != nullptr) munmap(it->second->mapping, it->second->mapping_len);
  delete it->second;
  g_mrs.erase(it);
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  auto* ch = new FakeChannel();
  ch->ch.context = c;
  ch->ch.fd = fds[0];
  ch->wr_fd = fds[1];
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* c) {
  auto* ch = reinterpret_cast<FakeChannel*>(c);
  close(ch->ch.fd);
  close(ch->wr_fd);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_ctx, ibv_comp_channel* ch, int) {
  auto* cq = new FakeCq();
  cq->cq.context = c;
  cq->cq.channel = ch;
  cq->cq.cq_context = cq_ctx;
  cq->cq.cqe = cqe;
  if (ch != nullptr) reinterpret_cast<FakeChannel*>(ch)->cq = cq;
  return &cq->cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [n, q] : g_qps) {
    if (q->qp.send_cq == cq || q->qp.recv_cq == cq) return EBUSY;
  }
  delete reinterpret_cast<FakeCq*>(cq);
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* c, ibv_cq** cq, void** cq_ctx) {
  char b;
  if (read(c->fd, &b, 1) != 1) return -1;
  auto* ch = reinterpret_cast<FakeChannel*>(c);
  *cq = &ch->cq->cq;
  *cq_ctx = ch->cq->cq.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq*, unsigned int) {}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (init->qp_type != IBV_QPT_RC || init->cap.max_send_wr > 16384 ||
      init->cap.max_recv_wr > 16384) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  auto* q = new FakeQp();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = init->send_cq;
  q->qp.recv_cq = init->recv_cq;
  q->qp.qp_num = g_next_qpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->cap = init->cap;
  q->sq_sig_all = init->sq_sig_all != 0;
  g_qps[q->qp.qp_num] = q;
  return &q->qp;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state from = q->qp.state;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      if (from != IBV_QPS_RESET || !(mask & IBV_QP_PORT) || !(mask & IBV_QP_ACCESS_FLAGS)) {
        return EINVAL;
      }
      break;
    case IBV_QPS_RTR:
      if (from != IBV_QPS_INIT || !(mask & IBV_QP_DEST_QPN) || !(mask & IBV_QP_AV) ||
          !(mask & IBV_QP_PATH_MTU) || !(mask & IBV_QP_RQ_PSN)) {
        return EINVAL;
      }
      if (g_ethernet && !a->ah_attr.is_global) return EINVAL;  // RoCE needs a GRH
      q->dest_qpn = a->dest_qp_num;
      g_rtrs.push_back(Rtr{a->ah_attr.sl, a->ah_attr.is_global, a->ah_attr.grh.traffic_class});
      break;
    case IBV_QPS_RTS:
      if (from != IBV_QPS_RTR || !(mask & IBV_QP_SQ_PSN)) return EINVAL;
      if (mask & IBV_QP_TIMEOUT) {
        g_rtss.push_back(Rts{a->timeout, a->retry_cnt});
        q->ack_timeout = a->timeout;
      }
      if (mask & IBV_QP_RETRY_CNT) q->retry_cnt = a->retry_cnt;
      break;
    case IBV_QPS_ERR:
      ToError(q);
      return 0;
    default:
      return EINVAL;
  }
  q->qp.state = a->qp_state;
  g_cv.notify_all();
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  // Like mlx5: completions of this QP still in its CQs are dropped.
  for (ibv_cq* cq : {q->qp.send_cq, q->qp.recv_cq}) {
    auto& dq = reinterpret_cast<FakeCq*>(cq)->q;
    for (auto it = dq.begin(); it != dq.end();) {
      it = it->qp_num == q->qp.qp_num ? dq.erase(it) : it + 1;
    }
  }
  g_qps.erase(q->qp.qp_num);
  delete q;
  return 0;
}

}  // extern "C"
