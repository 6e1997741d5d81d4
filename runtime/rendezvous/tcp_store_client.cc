// TCP store client (ConnectTcpStore): sends requests to a TcpStoreServer and
// waits for the replies on the calling thread. Thread-safe: each call borrows a
// connection from a small pool (opening another when all are busy), so a Get
// parked on the server does not block a Set from another thread. Every wait is
// bounded: the reply to a Get may take its timeout plus the I/O timeout, any
// other step at most the I/O timeout without progress; a dead server is
// Unavailable naming host:port.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/status.h"
#include "runtime/rendezvous/store.h"
#include "runtime/rendezvous/store_internal.h"
#include "runtime/rendezvous/tcp_socket.h"
#include "runtime/rendezvous/tcp_wire.h"

namespace mixnet::rendezvous {
namespace {

using internal::UniqueFd;
using internal::WireOp;

// Idle connections kept for reuse; more are closed after use.
constexpr size_t kMaxIdleConnections = 8;
// The I/O timeout is the connect timeout, but never below this.
constexpr absl::Duration kMinIoTimeout = absl::Seconds(1);

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(std::string host, int port, absl::Duration io_timeout, UniqueFd first)
      : host_(std::move(host)),
        port_(port),
        peer_(internal::HostPort(host_, port_)),
        io_timeout_(io_timeout) {
    idle_.push_back(std::move(first));
  }

  absl::Status Set(const std::string& key, const std::string& value) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    RETURN_IF_ERROR(internal::CheckValue(key, value));
    return Call(WireOp::kSet, key, value, 0, absl::ZeroDuration()).status();
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    int64_t ms = internal::TimeoutToMillis(timeout);
    absl::StatusOr<Reply> r = Call(WireOp::kGet, key, "", ms, timeout);
    if (!r.ok()) return r.status();
    return std::move(r->payload);
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    ASSIGN_OR_RETURN(Reply r, Call(WireOp::kAdd, key, "", delta, absl::ZeroDuration()));
    return r.header.arg;
  }

 private:
  struct Reply {
    internal::ResponseHeader header;
    std::string payload;
  };

  // One request/response exchange. `wait` is how long the server may hold the
  // request (a Get's timeout) on top of the I/O timeout.
  absl::StatusOr<Reply> Call(WireOp op, const std::string& key, absl::string_view value,
                             int64_t arg, absl::Duration wait);
  absl::StatusOr<UniqueFd> Acquire();
  void Release(UniqueFd fd);

  static const char* OpName(WireOp op) {
    switch (op) {
      case WireOp::kSet:
        return "Set";
      case WireOp::kGet:
        return "Get";
      case WireOp::kAdd:
        return "Add";
    }
    return "?";
  }

  const std::string host_;
  const int port_;
  const std::string peer_;
  const absl::Duration io_timeout_;

  absl::Mutex mu_;
  std::vector<UniqueFd> idle_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<TcpStoreClient::Reply> TcpStoreClient::Call(WireOp op, const std::string& key,
                                                           absl::string_view value, int64_t arg,
                                                           absl::Duration wait) {
  std::string context = absl::StrCat(OpName(op), " ", internal::QuoteKey(key));
  absl::StatusOr<UniqueFd> fd = Acquire();
  if (!fd.ok()) return Annotate(fd.status(), context);

  std::string prefix = internal::EncodeRequestPrefix(op, key, value.size(), arg);
  absl::Status s = internal::SendAll(fd->get(), prefix.data(), prefix.size(), io_timeout_, peer_,
                                     /*more=*/!value.empty());
  if (s.ok() && !value.empty()) {
    s = internal::SendAll(fd->get(), value.data(), value.size(), io_timeout_, peer_);
  }
  char hdr[internal::kWireHeaderBytes];
  if (s.ok()) {
    absl::Time first = wait == absl::InfiniteDuration()
                           ? absl::InfiniteFuture()
                           : absl::Now() + std::max(wait, absl::ZeroDuration()) + io_timeout_;
    s = internal::RecvAll(fd->get(), hdr, sizeof(hdr), first, io_timeout_, peer_);
  }
  if (!s.ok()) return Annotate(s, context);

  Reply r;
  if (absl::Status d = internal::DecodeResponseHeader(hdr, &r.header); !d.ok()) {
    return absl::InternalError(absl::StrCat(context, ": tcp store ", peer_, ": ", d.message()));
  }
  r.payload.resize(r.header.payload_len);
  s = internal::RecvAll(fd->get(), r.payload.data(), r.payload.size(), absl::Now() + io_timeout_,
                        io_timeout_, peer_);
  if (!s.ok()) return Annotate(s, context);
  Release(std::move(*fd));  // the stream is in sync again

  if (r.header.code == absl::StatusCode::kOk) return r;
  if (op == WireOp::kGet && r.header.code == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat("tcp store ", peer_, ": key ",
                                                    internal::QuoteKey(key), " not set within ",
                                                    absl::FormatDuration(wait)));
  }
  return absl::Status(r.header.code, absl::StrCat(context, ": tcp store ", peer_, ": ", r.payload));
}

absl::StatusOr<UniqueFd> TcpStoreClient::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      UniqueFd fd = std::move(idle_.back());
      idle_.pop_back();
      return fd;
    }
  }
  // All connections are busy (or were lost): one attempt, no retries, so a dead
  // server is reported at once.
  return internal::ConnectOnce(host_, port_, absl::Now() + io_timeout_);
}

void TcpStoreClient::Release(UniqueFd fd) {
  absl::MutexLock lock(&mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(fd));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> ConnectTcpStore(const std::string& host, int port,
                                                       absl::Duration timeout) {
  std::string peer = internal::HostPort(host, port);
  if (host.empty() || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store address ", peer, ": need a host and a port in 1..65535"));
  }
  absl::Time deadline = absl::Now() + std::max(timeout, absl::ZeroDuration());
  absl::Duration backoff = absl::Milliseconds(10);
  absl::Status last;
  int attempts = 0;
  while (true) {
    ++attempts;
    // Bound each attempt so an unanswered SYN does not eat the whole budget.
    absl::Time attempt_deadline = std::min(deadline, absl::Now() + absl::Seconds(2));
    bool unresolvable = false;
    absl::StatusOr<UniqueFd> fd =
        internal::ConnectOnce(host, port, attempt_deadline, &unresolvable);
    if (fd.ok()) {
      return std::make_unique<TcpStoreClient>(host, port, std::max(timeout, kMinIoTimeout),
                                              std::move(*fd));
    }
    if (unresolvable) return fd.status();
    // An attempt cut short by the overall deadline says less than the one before.
    if (last.ok() || !absl::IsDeadlineExceeded(fd.status())) last = fd.status();
    if (absl::Now() >= deadline) break;
    internal::SleepBackoff(&backoff, absl::Milliseconds(200), deadline);
  }
  return absl::UnavailableError(absl::StrCat("could not connect to tcp store ", peer, " within ",
                                             absl::FormatDuration(timeout), " (", attempts,
                                             " attempts); last error: ", last.message()));
}

}  // namespace mixnet::rendezvous
