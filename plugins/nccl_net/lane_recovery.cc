// Failover of guarded lanes (see lane_recovery.h): PathMover's ACK, LOST and
// RECOVER handling and the completion rules of guarded requests. Runs with
// the comm's mutex held, on NCCL's proxy threads or the mover thread.
#include "plugins/nccl_net/lane_recovery.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/nccl_net/path_mover.h"
#include "plugins/nccl_net/result.h"

namespace mixnet::nccl {
namespace {

std::string Who(const Comm& c) {
  return absl::StrCat(c.is_send ? "send comm to " : "recv comm from ",
                      c.peer_host.empty() ? std::string("peer") : c.peer_host);
}

// Live requests in posting order (so each tag's parts come in number order).
std::vector<Request*> InOrder(const Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu) {
  std::vector<Request*> out(c.live.begin(), c.live.end());
  std::sort(out.begin(), out.end(),
            [](const Request* a, const Request* b) { return a->order < b->order; });
  return out;
}

// A part that is over without a lost lane: it arrived (or left), or the
// receive refused it as larger than its buffer (the transport's
// InvalidArgument, at both ends; the transport then goes on and NCCL gets
// the error). Nothing of a refused part is re-posted or re-sent.
bool Settled(const transport::Request& part) {
  if (!part.Done()) return false;
  const absl::Status s = part.status();
  return s.ok() || absl::IsInvalidArgument(s);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Request>> PostReceive(PathMover* mover, Comm& c,
                                                     std::unique_ptr<Request> r) {
  std::string lost;  // why, once a guarded lane could not take its part
  for (int i = 0; i < r->n; ++i) {
    const bool guarded = mover != nullptr && r->lanes[i] != c.home;
    absl::Status part;
    if (guarded && !lost.empty()) {
      // The failover closes every guarded lane: the part stands as failed.
      part = FailRecvPart(c, *r, i, absl::UnavailableError(lost));
    } else {
      part = PostRecvPart(c, *r, i);
      if (!part.ok() && guarded && r->parts[i] == nullptr) {
        lost = absl::StrCat("irecv: lane ", r->lanes[i]->path.Describe(),
                            " failed: ", part.ToString());
        if (i == 0) {
          mover->Failover(c, lost);
          return nullptr;  // nothing is out: NCCL retries once the failover is through
        }
        part = FailRecvPart(c, *r, i, part);
      }
    }
    if (part.ok()) continue;
    // Home could not take the part (or its second piece): the comm failed.
    // The parts out stay posted, counted and owned until the comm closes.
    c.lane_failed = true;
    const int out = r->parts[i] != nullptr ? i + 1 : i;
    for (int k = 0; k < out; ++k) ++c.posted[r->tags[k]];
    c.failed_posts.push_back(std::move(r));
    return part;
  }
  CountPosted(c, r->tags.data(), r->n, r->lanes.data());
  c.live.insert(r.get());
  if (!lost.empty()) mover->Failover(c, lost);  // re-posts the failed parts on home
  return r;
}

void PathMover::KillGuarded(Comm& c) {
  std::vector<Lane*> lanes;
  auto add = [&](const std::shared_ptr<Lane>& l) {
    if (l == nullptr || l == c.home || l->connection == nullptr) return;
    if (std::find(lanes.begin(), lanes.end(), l.get()) == lanes.end()) lanes.push_back(l.get());
  };
  add(c.lane);
  if (c.move != nullptr) {
    if (c.move->dial != nullptr) c.move->dial->Cancel();
    for (const std::shared_ptr<ConnectionTask>& d : c.move->stripe_dials) {
      if (d != nullptr) d->Cancel();
    }
    add(c.move->old);
    add(c.move->next);
  }
  for (Request* r : c.live) {
    for (int i = 0; i < r->n; ++i) add(r->lanes[i]);
  }
  // Destroying a connection waits for its progress thread: afterwards no
  // late byte lands in a buffer, and its pending requests have failed.
  for (Lane* l : lanes) {
    l->stripes.clear();
    l->connection.reset();
  }
  c.move.reset();
  c.lane = c.home;
  c.failover_due.clear();  // this is it
  // No move back onto the dead path before the routing changes.
  c.routed_generation = routing_generation_.load();
}

void PathMover::Failover(Comm& c, const std::string& why) {
  if (c.lane_failed) return;
  if (c.home == nullptr || c.home->connection == nullptr || !c.home->connection->health().ok()) {
    LogWarn(absl::StrCat(Who(c), ": ", why, "; its home lane is down too, so the comm fails"));
    c.lane_failed = true;
    return;
  }
  if (!c.is_send) {
    RecoverReceiver(c, c.recoveries + 1, why);
    return;
  }
  if (c.recovering) return;
  KillGuarded(c);
  c.recovering = true;
  c.recovering_since = absl::Now();
  LogWarn(absl::StrCat(Who(c), ": ", why, "; failing over to ", c.home->path.Describe(),
                       " (recovery ", c.recoveries + 1, ")"));
  ControlMessage lost;
  lost.type = ControlType::kLost;
  lost.generation = c.recoveries + 1;
  lost.reason = why;
  Send(c, *c.home, lost);
}

void PathMover::RunDueFailover(Comm& c) {
  if (c.failover_due.empty()) return;
  const std::string why = std::move(c.failover_due);
  c.failover_due.clear();
  Failover(c, why);
}

void PathMover::RecoverReceiver(Comm& c, uint64_t generation, const std::string& why) {
  KillGuarded(c);
  ControlMessage rec;
  rec.type = ControlType::kRecover;
  rec.generation = generation;
  rec.counts = c.posted;
  uint64_t reposted = 0, bytes = 0;
  for (Request* r : InOrder(c)) {
    for (int i = 0; i < r->n; ++i) {
      // A striped part arrived only with all its stripe pieces (multipath.h).
      if (r->lanes[i] == c.home || (Settled(*r->parts[i]) && StripesArrived(*r, i))) continue;
      absl::StatusOr<std::unique_ptr<transport::Request>> part =
          c.home->connection->Irecv(r->data[i], r->sizes[i], r->tags[i]);
      if (!part.ok()) {
        LogWarn(absl::StrCat(Who(c), ": cannot re-post a receive on ", c.home->path.Describe(),
                             ": ", part.status().ToString()));
        c.lane_failed = true;
        return;
      }
      --r->lanes[i]->outstanding;
      r->lanes[i] = c.home;
      ++c.home->outstanding;
      r->parts[i] = *std::move(part);
      DropStripes(*r, i);
      rec.missing[r->tags[i]].push_back(r->seqs[i]);
      ++reposted;
      bytes += r->sizes[i];
    }
  }
  c.recoveries = generation;
  if (c.split_seen) {  // multipath.h: the sender's RESENT decides the parts in doubt
    c.awaiting_resent = true;
    c.awaiting_since = absl::Now();
  }
  failovers_.fetch_add(1);
  LogWarn(absl::StrCat(Who(c), ": ", why, "; failed over to ", c.home->path.Describe(),
                       " (recovery ", generation, "): ", reposted, " receive part(s), ", bytes,
                       " bytes, re-posted there"));
  Send(c, *c.home, rec);
}

void PathMover::ResendFromRecover(Comm& c, const ControlMessage& m) {
  if (!c.recovering) {  // the receiver noticed first
    KillGuarded(c);
    c.recovering = true;
  }
  uint64_t resent = 0, arrived = 0, bytes = 0;
  ControlMessage tail;  // RESENT (multipath.h)
  tail.type = ControlType::kResent;
  tail.generation = m.generation;
  tail.counts = c.posted;
  for (Request* r : InOrder(c)) {
    for (int i = 0; i < r->n; ++i) {
      const uint32_t tag = r->tags[i];
      const uint64_t seq = r->seqs[i];
      auto end = m.counts.find(tag);
      if (r->split[i].has_header && (end == m.counts.end() || seq >= end->second)) {
        tail.missing[tag].push_back(seq);  // the receiver will post it on home
      }
      if (r->delivered[i] || r->lanes[i] == c.home) continue;
      auto missing = m.missing.find(tag);
      const bool listed = missing != m.missing.end() &&
                          std::binary_search(missing->second.begin(), missing->second.end(), seq);
      if (end != m.counts.end() && seq < end->second && !listed) {
        r->delivered[i] = true;  // it arrived; only the ACK was lost with the lane
        DropStripes(*r, i);      // r->sizes[i] is the whole primary
        ++arrived;
        continue;
      }
      absl::StatusOr<std::unique_ptr<transport::Request>> part =
          c.home->connection->Isend(r->data[i], r->sizes[i], tag);
      if (!part.ok()) {
        LogWarn(absl::StrCat(Who(c), ": cannot re-send on ", c.home->path.Describe(), ": ",
                             part.status().ToString()));
        c.lane_failed = true;
        return;
      }
      --r->lanes[i]->outstanding;
      r->lanes[i] = c.home;
      ++c.home->outstanding;
      r->parts[i] = *std::move(part);
      DropStripes(*r, i);  // the whole primary goes again
      ++resent;
      bytes += r->sizes[i];
    }
  }
  c.recovering = false;
  c.recoveries = m.generation;
  if (c.split_seen) Send(c, *c.home, tail);
  failovers_.fetch_add(1);
  parts_resent_.fetch_add(resent);
  LogWarn(absl::StrCat(Who(c), ": failed over to ", c.home->path.Describe(), " (recovery ",
                       m.generation, "): re-sent ", resent, " part(s), ", bytes, " bytes; ",
                       arrived, " unacknowledged part(s) had arrived"));
}

void PathMover::ApplyResent(Comm& c, const ControlMessage& m) {
  // Parts re-posted here that the sender had not posted come whole on home.
  uint64_t whole = 0, tail = 0;
  for (Request* r : c.live) {
    for (int i = 0; i < r->n; ++i) {
      auto end = m.counts.find(r->tags[i]);
      if (end != m.counts.end() && r->seqs[i] < end->second) continue;
      whole += r->split[i].min_bytes > 0 ? 1 : 0;
      r->split[i].min_bytes = 0;
    }
  }
  // Those it had posted split and this end had not: their headers come.
  for (const auto& [tag, seqs] : m.missing) {
    for (uint64_t seq : seqs) c.split_tail.insert({tag, seq});
    tail += seqs.size();
  }
  c.awaiting_resent = false;
  LogInfo(absl::StrCat(Who(c), ": RESENT (recovery ", m.generation, "): ", tail,
                       " part(s) the sender split come on home, ", whole,
                       " re-posted part(s) come whole"));
}

void PathMover::HandleRecovery(Comm& c, const ControlMessage& m) {
  switch (m.type) {
    case ControlType::kAck:
      if (!c.is_send) return;
      for (const auto& [tag, n] : m.counts) c.acked[tag] = std::max(c.acked[tag], n);
      return;
    case ControlType::kLost:
      if (c.is_send || m.generation != c.recoveries + 1) return;  // late or repeated
      RecoverReceiver(c, m.generation, absl::StrCat("the sender lost a lane: ", m.reason));
      return;
    case ControlType::kRecover:
      if (!c.is_send || m.generation != c.recoveries + 1) return;
      ResendFromRecover(c, m);
      return;
    case ControlType::kResent:
      if (c.is_send || !c.awaiting_resent || m.generation != c.recoveries) return;
      ApplyResent(c, m);
      return;
    default:
      return;
  }
}

void PathMover::GuardedLaneEnded(Comm& c, Lane& lane, const absl::Status& st) {
  // A lane being retired after a finished move may close under us.
  const bool retiring = c.move != nullptr && c.move->old.get() == &lane &&
                        (c.move->done_received || c.move->done_sent);
  const bool in_use = &lane == c.lane.get() || lane.outstanding > 0 ||
                      (c.move != nullptr && c.move->switched && c.move->old.get() == &lane);
  if (retiring || !in_use) return;
  // The peer closing its comm (NCCL tears the two ends down at their own
  // pace) closes an idle lane in order: nothing was lost, so no failover;
  // a later post on the lane would fail over then (DeadGuarded).
  if (transport::PeerClosedInOrder(st) && lane.outstanding == 0 && c.move == nullptr) {
    if (!lane.peer_closed) {
      LogInfo(absl::StrCat(Who(c), ": lane ", lane.path.Describe(),
                           " closed by the peer while idle (its comm closed)"));
    }
    lane.peer_closed = true;
    return;
  }
  Failover(c, absl::StrCat("lane ", lane.path.Describe(), " ended: ", st.ToString()));
}

void PathMover::MaybeSendAck(Comm& c) {
  if (!c.ack_due || c.home == nullptr || c.home->connection == nullptr) return;
  for (const ControlSend& s : c.home->control_sends) {
    if (s.ack && !s.request->Done()) return;  // one in flight; this one follows
  }
  ControlMessage ack;
  ack.type = ControlType::kAck;
  ack.counts = c.final_prefix;
  c.ack_due = false;
  Send(c, *c.home, ack, /*ack=*/true);
}

void PathMover::NoteDone(Comm& c, const Request& r) {
  for (int i = 0; i < r.n; ++i) {
    const uint32_t tag = r.tags[i];
    std::map<uint64_t, bool>& ahead = c.final_ahead[tag];
    ahead[r.seqs[i]] = r.lanes[i] != c.home;
    uint64_t& prefix = c.final_prefix[tag];
    bool guarded = false;
    for (auto it = ahead.begin(); it != ahead.end() && it->first == prefix; it = ahead.erase(it)) {
      guarded |= it->second;
      ++prefix;
    }
    if (ahead.empty()) c.final_ahead.erase(tag);
    c.ack_due |= guarded;
  }
  MaybeSendAck(c);
}

void PathMover::CloseFailed(Comm& c) {
  KillGuarded(c);
  lanes_kept_.fetch_sub(static_cast<int64_t>(c.kept.size()));
  c.kept.clear();  // no kept lane outlives a failed comm either
  if (c.home == nullptr || c.home->connection == nullptr) return;
  LogWarn(absl::StrCat(Who(c), ": the comm failed; closing its home lane ", c.home->path.Describe(),
                       " too, so that no piece still posted there outlives its request"));
  c.home->stripes.clear();
  c.home->connection.reset();
}

bool PathMover::Complete(Comm& c, Request& r) {
  Advance(c);  // ACKs, RECOVER / LOST, dead lanes
  RunDueFailover(c);
  if (FailOverBroken(c, r)) return false;
  if (c.lane_failed) {
    // Nothing will be re-sent, and pieces of `r` may still be posted (a
    // second piece on a live home, a header send reading from `r`): closing
    // every connection ends them, so the request completes with their
    // errors (SplitStatus: the pieces that never came) and nothing lands in
    // or reads from its buffers afterwards.
    CloseFailed(c);
    return true;
  }
  for (int i = 0; i < r.n; ++i) {
    if (r.delivered[i]) continue;
    if (!r.parts[i]->Done()) return false;
    // A guarded part waits for the failover or (a send) for the receiver's
    // ACK.
    if (r.lanes[i] == c.home) continue;
    if (!Settled(*r.parts[i])) return false;
    // A refused part is its request's error: no ACK is due for it.
    if (!c.is_send || absl::IsInvalidArgument(r.parts[i]->status())) continue;
    auto acked = c.acked.find(r.tags[i]);
    if (acked == c.acked.end() || acked->second <= r.seqs[i]) return false;
  }
  // A split part also waits for its header and second piece (multipath.h).
  for (int i = 0; i < r.n; ++i) {
    if (!SplitDone(c, r, i)) return false;
  }
  // Every piece is over, but a stripe piece may have failed since the scan
  // above (its connection fails on the transport's progress thread): that
  // is a lost circuit to fail over from, not the request's error.
  if (!FailOverBroken(c, r)) return true;
  if (!c.lane_failed) return false;
  CloseFailed(c);  // home is down too
  return true;
}

bool PathMover::FailOverBroken(Comm& c, Request& r) {
  if (c.lane_failed) return false;
  for (int i = 0; i < r.n; ++i) {
    if (r.delivered[i] || r.lanes[i] == c.home) continue;
    // A striped part's stripe pieces fail with their circuits (multipath.h).
    const absl::Status stripe = StripeFailure(r, i);
    if (!stripe.ok()) {
      Failover(c, absl::StrCat("a stripe piece on lane ", r.lanes[i]->path.Describe(),
                               " failed: ", stripe.ToString()));
      return true;
    }
    if (!r.parts[i]->Done()) continue;
    // A size refusal is the part's error, not a lost circuit.
    if (Settled(*r.parts[i])) continue;
    Failover(
        c, absl::StrCat("a ", c.is_send ? "send" : "receive", " on lane ",
                        r.lanes[i]->path.Describe(), " failed: ", r.parts[i]->status().ToString()));
    return true;
  }
  return false;
}

}  // namespace mixnet::nccl
