// Relay forwarding of the NCCL plugin: see relay_forwarder.h.
#include "plugins/nccl_net/relay_forwarder.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mixnet::nccl {

namespace {

absl::Status Annotated(const absl::Status& s, const std::string& what) {
  absl::Status out(s.code(), absl::StrCat(what, ": ", s.message()));
  s.ForEachPayload(
      [&out](absl::string_view key, const absl::Cord& value) { out.SetPayload(key, value); });
  return out;
}

}  // namespace

namespace {

// A relayed piece's two sends as one request; owns the header's buffer.
class RelaySendRequest : public transport::Request {
 public:
  RelaySendRequest(uint64_t tag, size_t len) {
    header_.tag = tag;
    header_.bytes = len;
  }
  ~RelaySendRequest() override {
    // The transport reads the header until its send is over (a request left
    // pending is one on a connection being closed, which cancels it).
    if (header_send_ != nullptr) header_send_->Wait(absl::Seconds(1)).IgnoreError();
  }
  bool Done() const override {
    return header_send_->Done() && (data_send_ == nullptr || data_send_->Done());
  }
  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    absl::Status s = header_send_->Wait(timeout);
    if (s.code() == absl::StatusCode::kDeadlineExceeded && !header_send_->Done()) return s;
    if (data_send_ != nullptr) {
      absl::Status d = data_send_->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
      if (d.code() == absl::StatusCode::kDeadlineExceeded && !data_send_->Done()) return d;
    }
    return status();
  }
  absl::Status status() const override {
    if (!Done()) return absl::OkStatus();
    if (!header_send_->status().ok()) return header_send_->status();
    if (!post_error_.ok()) return post_error_;
    return data_send_->status();
  }
  size_t bytes() const override {
    return Done() && data_send_ != nullptr && status().ok() ? data_send_->bytes() : 0;
  }

  RelayHeader header_;
  std::unique_ptr<transport::Request> header_send_;
  std::unique_ptr<transport::Request> data_send_;
  absl::Status post_error_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<transport::Request>> PostRelaySend(transport::Connection& upstream,
                                                                  const void* buf, size_t len,
                                                                  uint64_t tag) {
  auto r = std::make_unique<RelaySendRequest>(tag, len);
  auto h = upstream.Isend(&r->header_, sizeof(r->header_), kRelayHeaderTag);
  if (!h.ok()) return Annotated(h.status(), "posting a relay header");
  r->header_send_ = *std::move(h);
  auto d = upstream.Isend(buf, len, kRelayDataTag);
  if (d.ok()) {
    r->data_send_ = *std::move(d);
  } else {
    r->post_error_ = Annotated(d.status(), "posting a relayed piece after its header");
  }
  return r;
}

RelayForwarder::RelayForwarder(std::unique_ptr<transport::Connection> upstream,
                               std::unique_ptr<transport::Connection> downstream,
                               RelayForwarderOptions options)
    : options_(std::move(options)),
      upstream_(std::move(upstream)),
      downstream_(std::move(downstream)) {}

RelayForwarder::~RelayForwarder() { CloseConnections(); }

void RelayForwarder::Watch(transport::Request& r) {
  if (wakeup_ != nullptr) r.NotifyOnDone(wakeup_);
}

void RelayForwarder::CloseConnections() {
  // The connections go first: the transport may write into the buffers of
  // requests still posted until then (their requests fail as cancelled).
  downstream_.reset();
  upstream_.reset();
  header_recv_.reset();
  pieces_.clear();
  header_pending_ = false;
  stats_.buffered_bytes = 0;
}

RelayForwarder::State RelayForwarder::Fail(absl::Status why) {
  status_ = absl::Status(why.code(), absl::StrCat(options_.name, ": ", why.message()));
  state_ = State::kFailed;
  CloseConnections();
  return state_;
}

RelayForwarder::State RelayForwarder::Advance() {
  bool progressed = true;
  while (state_ == State::kForwarding && progressed) {
    progressed = false;
    // Pieces that arrived go on downstream, in the order they came (a later
    // piece may share its tag with an earlier one).
    for (Piece& p : pieces_) {
      if (p.send != nullptr) continue;
      if (!p.recv->Done()) break;
      if (!p.recv->status().ok()) {
        return Fail(Annotated(p.recv->status(),
                              absl::StrCat("receiving a piece from ", upstream_->peer_name())));
      }
      if (p.recv->bytes() != p.header.bytes) {
        return Fail(absl::DataLossError(
            absl::StrCat("a piece from ", upstream_->peer_name(), " brought ", p.recv->bytes(),
                         " bytes where its header announced ", p.header.bytes)));
      }
      auto send = downstream_->Isend(p.buf.get(), p.header.bytes, p.header.tag);
      if (!send.ok()) {
        return Fail(Annotated(send.status(),
                              absl::StrCat("forwarding a piece to ", downstream_->peer_name())));
      }
      p.send = *std::move(send);
      Watch(*p.send);
      progressed = true;
    }
    for (const Piece& p : pieces_) {
      if (p.send != nullptr && p.send->Done() && !p.send->status().ok()) {
        return Fail(Annotated(p.send->status(),
                              absl::StrCat("forwarding a piece to ", downstream_->peer_name())));
      }
    }
    while (!pieces_.empty() && pieces_.front().send != nullptr && pieces_.front().send->Done()) {
      stats_.pieces += 1;
      stats_.bytes += pieces_.front().header.bytes;
      stats_.buffered_bytes -= pieces_.front().header.bytes;
      pieces_.pop_front();
      progressed = true;
    }
    // The next header.
    if (header_recv_ != nullptr && header_recv_->Done()) {
      const absl::Status s = header_recv_->status();
      const size_t got = header_recv_->bytes();
      header_recv_.reset();
      progressed = true;
      if (!s.ok()) {
        if (!transport::PeerClosedInOrder(s)) {
          return Fail(
              Annotated(s, absl::StrCat("receiving a relay header from ", upstream_->peer_name())));
        }
        upstream_ended_ = true;
      } else if (got != sizeof(RelayHeader) || header_buf_.magic != kRelayMagic) {
        return Fail(absl::DataLossError(absl::StrCat(
            "a relay header from ", upstream_->peer_name(), " of ", got, " bytes with magic 0x",
            absl::Hex(header_buf_.magic), " is not the plugin's (", sizeof(RelayHeader),
            " bytes, 0x", absl::Hex(kRelayMagic), ")")));
      } else if (header_buf_.bytes > options_.max_piece_bytes) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(
            "a relay header from ", upstream_->peer_name(), " announces ", header_buf_.bytes,
            " bytes, over the relay's limit of ", options_.max_piece_bytes)));
      } else {
        header_pending_ = true;
      }
    }
    // Its piece, once the buffered bytes allow (one piece always may).
    if (header_pending_) {
      const size_t n = header_buf_.bytes;
      if (stats_.buffered_bytes == 0 || stats_.buffered_bytes + n <= options_.max_buffered_bytes) {
        Piece p;
        p.header = header_buf_;
        p.buf.reset(new char[std::max<size_t>(n, 1)]);
        auto recv = upstream_->Irecv(p.buf.get(), n, kRelayDataTag);
        if (!recv.ok()) {
          return Fail(Annotated(recv.status(),
                                absl::StrCat("receiving a piece from ", upstream_->peer_name())));
        }
        p.recv = *std::move(recv);
        Watch(*p.recv);
        pieces_.push_back(std::move(p));
        stats_.buffered_bytes += n;
        stats_.peak_buffered_bytes = std::max(stats_.peak_buffered_bytes, stats_.buffered_bytes);
        header_pending_ = false;
        progressed = true;
      }
    }
    if (header_recv_ == nullptr && !header_pending_ && !upstream_ended_) {
      auto recv = upstream_->Irecv(&header_buf_, sizeof(header_buf_), kRelayHeaderTag);
      if (!recv.ok()) {
        return Fail(Annotated(
            recv.status(), absl::StrCat("receiving a relay header from ", upstream_->peer_name())));
      }
      header_recv_ = *std::move(recv);
      Watch(*header_recv_);
      progressed = true;
    }
    if (upstream_ended_ && pieces_.empty() && !header_pending_) {
      // Everything the upstream sent went on: close downstream in order.
      CloseConnections();
      state_ = State::kDrained;
    }
  }
  return state_;
}

RelayService::RelayService(EndCallback on_end, absl::Duration idle_poll)
    : on_end_(std::move(on_end)),
      idle_poll_(idle_poll),
      wakeup_(std::make_shared<transport::CompletionGroup>()) {
  thread_ = std::thread([this] { Loop(); });
}

RelayService::~RelayService() {
  stop_.store(true);
  thread_.join();
  absl::MutexLock lock(&mu_);
  running_.clear();
}

void RelayService::Add(std::unique_ptr<RelayForwarder> forwarder) {
  absl::MutexLock lock(&mu_);
  forwarder->set_wakeup(wakeup_);
  running_.push_back(std::move(forwarder));
  wakeup_->Notify(false);
}

RelayService::Counts RelayService::counts() const {
  absl::MutexLock lock(&mu_);
  Counts c = ended_;
  c.running = static_cast<int>(running_.size());
  for (const auto& f : running_) {
    c.pieces += f->stats().pieces;
    c.bytes += f->stats().bytes;
  }
  return c;
}

void RelayService::Loop() {
  pthread_setname_np(pthread_self(), "mx-nccl-relay");
  size_t seen = 0;
  while (!stop_.load()) {
    std::shared_ptr<transport::CompletionGroup> group;
    std::vector<std::unique_ptr<RelayForwarder>> ended;
    {
      absl::MutexLock lock(&mu_);
      group = wakeup_;
      seen = group->done();
      for (auto it = running_.begin(); it != running_.end();) {
        if ((*it)->Advance() == RelayForwarder::State::kForwarding) {
          ++it;
          continue;
        }
        ended.push_back(std::move(*it));
        it = running_.erase(it);
      }
    }
    // A relay counts as ended once its end was reported.
    for (const auto& f : ended) {
      if (on_end_) on_end_(*f);
    }
    if (!ended.empty()) {
      absl::MutexLock lock(&mu_);
      for (const auto& f : ended) {
        ended_.pieces += f->stats().pieces;
        ended_.bytes += f->stats().bytes;
        (f->state() == RelayForwarder::State::kDrained ? ended_.drained : ended_.failed) += 1;
      }
    }
    // Sleep until a request completes (or the poll period passes). A group
    // that saw a hard failure stays woken: the relays get a fresh one.
    if (group->Wait(seen + 1, idle_poll_) && group->done() <= seen) {
      absl::MutexLock lock(&mu_);
      wakeup_ = std::make_shared<transport::CompletionGroup>();
      for (const auto& f : running_) f->set_wakeup(wakeup_);
    }
  }
}

}  // namespace mixnet::nccl
