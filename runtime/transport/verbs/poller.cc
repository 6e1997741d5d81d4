// The completion-queue poller thread of a verbs device (see poller.h).
#include "runtime/transport/verbs/poller.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/cpu_affinity.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/verbs/verbs_connection.h"

namespace mixnet::transport::verbs {
namespace {

constexpr int kBatch = 32;
constexpr int kMaxRounds = 16;    // batches per Drain before looking at sockets
constexpr int kSpinPolls = 2000;  // empty polls before sleeping (~0.1-0.2 ms)
constexpr int kSleepMs = 100;     // longest sleep, so Stop is prompt
constexpr int kAckEventsEvery = 256;
const absl::Duration kSocketCheckInterval = absl::Milliseconds(10);

// Joins poller threads that were stopped from themselves (a callback on the
// poller thread dropped the device): they cannot join themselves, and a
// detached thread would outlive what it polls. One process-wide thread,
// started on first use; it never exits (nor is the reaper destroyed), and it
// touches nothing but the threads handed to it.
class Reaper {
 public:
  static void Adopt(std::thread t) {
    static Reaper* reaper = new Reaper();
    reaper->Add(std::move(t));
  }

 private:
  Reaper() : worker_([this] { Run(); }) {}
  void Add(std::thread t) {
    absl::MutexLock lock(&mu_);
    threads_.push_back(std::move(t));
  }
  void Run() {
    pthread_setname_np(pthread_self(), "mx-verbs-reaper");
    while (true) {
      std::thread t;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](std::deque<std::thread>* q) { return !q->empty(); }, &threads_));
        t = std::move(threads_.front());
        threads_.pop_front();
      }
      t.join();  // its loop ends within one sleep (kSleepMs) of the stop
    }
  }

  absl::Mutex mu_;
  std::deque<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::thread worker_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Poller>> Poller::Start(std::shared_ptr<VerbsContext> ctx,
                                                      std::string thread_name) {
  Fd efd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (efd.get() < 0) return ErrnoStatus(ctx->label() + ": poller wake-up", "eventfd");
  std::shared_ptr<Poller> p(new Poller(std::move(ctx), std::move(efd)));
  p->running_.store(true, std::memory_order_release);
  // The thread keeps its poller (and so the context, CQ included) alive
  // until its loop has ended, however the last other reference goes.
  p->thread_ = std::thread([self = p, thread_name]() mutable {
    self->Loop(thread_name);
    self.reset();  // may destroy the poller here, after the loop
  });
  p->thread_id_.store(p->thread_.get_id());
  return p;
}

Poller::~Poller() { Stop(); }

absl::Status Poller::Pin(int cpu) {
  return PinThread(thread_, cpu, absl::StrCat("the completion poller of ", ctx_->short_name()));
}

absl::StatusOr<std::vector<int>> Poller::Cpus() { return ThreadCpus(thread_); }

void Poller::Wake() {
  uint64_t one = 1;
  ssize_t n = write(event_fd_.get(), &one, sizeof(one));
  (void)n;
}

void Poller::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  Wake();
  if (OnPollerThread()) {
    // A callback on this thread stopped us: the loop ends when the callback
    // returns (it holds the poller meanwhile); the reaper joins the thread.
    Reaper::Adopt(std::move(thread_));
  } else {
    thread_.join();
  }
  running_.store(false, std::memory_order_release);
  FailAll("device closed", /*report=*/false);
}

void Poller::Add(std::shared_ptr<VerbsConnection> c) {
  {
    absl::MutexLock lock(&mu_);
    uint32_t qpn = c->qpn();
    conns_[qpn] = Entry{std::move(c), false};
  }
  Wake();
}

void Poller::Watch(uint32_t qpn) {
  {
    absl::MutexLock lock(&mu_);
    auto it = conns_.find(qpn);
    if (it == conns_.end()) return;
    it->second.watch = true;
    dirty_ = true;
  }
  Wake();
}

void Poller::Remove(uint32_t qpn) {
  std::shared_ptr<VerbsConnection> dead;  // released outside mu_
  {
    absl::MutexLock lock(&mu_);
    auto it = conns_.find(qpn);
    if (it == conns_.end()) return;
    dead = std::move(it->second.conn);
    conns_.erase(it);
    dirty_ = true;
  }
  Wake();
}

std::shared_ptr<VerbsConnection> Poller::Lookup(uint32_t qpn) {
  absl::MutexLock lock(&mu_);
  auto it = conns_.find(qpn);
  return it == conns_.end() ? nullptr : it->second.conn;
}

absl::Duration KeepAliveInterval(absl::Duration stall) {
  if (stall <= absl::ZeroDuration()) return absl::ZeroDuration();
  return std::max(stall / 4, absl::Milliseconds(10));
}

void Poller::KeepAliveAll() {
  std::vector<std::shared_ptr<VerbsConnection>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [qpn, e] : conns_) all.push_back(e.conn);
  }
  for (auto& c : all) c->KeepAlive();
}

void Poller::FailAll(const std::string& why, bool report) {
  std::vector<std::shared_ptr<VerbsConnection>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [qpn, e] : conns_) all.push_back(e.conn);
    if (!report) conns_.clear();
    dirty_ = true;
  }
  for (auto& c : all) c->OnDeviceFailure(why, report);
}

int Poller::Drain() {
  ibv_wc wc[kBatch];
  std::vector<std::shared_ptr<VerbsConnection>> touched;
  uint32_t last_qpn = 0;
  std::shared_ptr<VerbsConnection> last;
  int total = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    int n = ibv_poll_cq(ctx_->cq(), kBatch, wc);
    if (n < 0) {
      log::Error("{}: ibv_poll_cq failed ({})", ctx_->label(), n);
      FailAll("ibv_poll_cq failed (completion queue overrun?)", /*report=*/true);
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (last == nullptr || wc[i].qp_num != last_qpn) {
        last = Lookup(wc[i].qp_num);
        last_qpn = wc[i].qp_num;
      }
      if (last == nullptr) continue;  // a connection already removed
      last->OnCompletion(wc[i]);
      if (std::find(touched.begin(), touched.end(), last) == touched.end()) {
        touched.push_back(last);
      }
    }
    total += n;
    if (n < kBatch) break;
  }
  for (auto& c : touched) c->AfterCompletions();
  return total;
}

void Poller::Loop(std::string thread_name) {
  pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<VerbsConnection>> owners;  // parallel to fds (from index 2)
  int idle = 0;
  absl::Time last_socket_check = absl::Now();
  const absl::Duration keepalive = KeepAliveInterval(ctx_->stall_timeout());
  const int sleep_ms =
      keepalive > absl::ZeroDuration()
          ? std::min<int>(kSleepMs, static_cast<int>(absl::ToInt64Milliseconds(keepalive)))
          : kSleepMs;
  absl::Time next_keepalive = absl::Now() + keepalive;
  while (!stop_.load(std::memory_order_acquire)) {
    int n = Drain();
    if (keepalive > absl::ZeroDuration()) {
      const absl::Time now = absl::Now();
      if (now >= next_keepalive) {
        next_keepalive = now + keepalive;
        KeepAliveAll();
      }
    }
    if (n > 0) {
      idle = 0;
      if (absl::Now() - last_socket_check < kSocketCheckInterval) continue;
    } else if (++idle < kSpinPolls) {
      continue;
    }
    int timeout_ms = 0;
    if (n == 0) {
      // Arm the channel, then look once more: a completion that slipped in
      // between would not raise an event.
      int rc = ibv_req_notify_cq(ctx_->cq(), 0);
      if (rc != 0) log::Warn("{}: ibv_req_notify_cq failed: {}", ctx_->label(), rc);
      if (Drain() > 0) {
        idle = 0;
        continue;
      }
      timeout_ms = sleep_ms;
    }
    {
      std::vector<std::shared_ptr<VerbsConnection>> old;
      {
        absl::MutexLock lock(&mu_);
        if (dirty_) {
          dirty_ = false;
          fds.assign({pollfd{ctx_->channel()->fd, POLLIN, 0}, pollfd{event_fd_.get(), POLLIN, 0}});
          old.swap(owners);
          owners.assign(2, nullptr);
          for (auto& [qpn, e] : conns_) {
            if (!e.watch) continue;
            fds.push_back(pollfd{e.conn->bootstrap_fd(), POLLIN, 0});
            owners.push_back(e.conn);
          }
        }
      }
    }  // connections dropped here may be destroyed on this thread, outside mu_
    int r = poll(fds.data(), fds.size(), timeout_ms);
    last_socket_check = absl::Now();
    if (r <= 0) continue;
    if (fds[0].revents != 0) {
      ibv_cq* cq = nullptr;
      void* cq_ctx = nullptr;
      while (ibv_get_cq_event(ctx_->channel(), &cq, &cq_ctx) == 0) ++unacked_events_;
      if (unacked_events_ >= kAckEventsEvery) {
        ibv_ack_cq_events(ctx_->cq(), static_cast<unsigned>(unacked_events_));
        unacked_events_ = 0;
      }
    }
    if (fds[1].revents != 0) {
      uint64_t v;
      ssize_t got = read(event_fd_.get(), &v, sizeof(v));
      (void)got;
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Drain();  // handle what arrived before the close or EOF first
      if (!owners[i]->OnBootstrapReadable()) {
        absl::MutexLock lock(&mu_);
        auto it = conns_.find(owners[i]->qpn());
        if (it != conns_.end() && it->second.conn == owners[i]) it->second.watch = false;
        dirty_ = true;
      }
    }
  }
  if (unacked_events_ > 0) {
    ibv_ack_cq_events(ctx_->cq(), static_cast<unsigned>(unacked_events_));
    unacked_events_ = 0;
  }
}

}  // namespace mixnet::transport::verbs
