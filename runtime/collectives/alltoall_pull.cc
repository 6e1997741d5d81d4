// Receiver-paced pieces of a dynamic pair inside one alltoallv call (see
// alltoall_dynamic.cc for the rest of the protocol). Caller thread only.
//
// Why: a pair whose bytes are cut over several paths before the transfer
// (router v2's weights over circuits and EPS, v1's over several circuits)
// ends when its slowest path ends. On the emulated cluster one direction of
// a loaded full-duplex link often runs at 80-90% for a whole transfer (its
// ACKs queue behind the other direction's data), and the paths that kept
// their rate sat idle at the end. Here the receiver, which sees each path's
// bytes arrive, asks for them piece by piece and moves the rest of a slow
// path's share to a path that has finished its own. Opt-in
// (MIXNET_PULL_CHUNK_BYTES, off by default): it pays where a path lags the
// plan by much (a circuit at a third of its planned rate: the pair's time
// 0.42-0.78x, median 0.53x, of fixed pieces', and under their 1.007 s floor in
// 24 of 24 runs, tests/emulation/pull_fabric_test), and on healthy emulated links
// its take-overs put the route bench's trace rows at half rate 3-13% over
// the model where fixed pieces were 2-5% over.
//
// Protocol, for each direction whose receiver paces it (its header's
// pull_chunk is non-zero, the direction has two or more pieces and at least
// two chunks of bytes per piece; both ends decide alike once both headers
// are in). Smaller directions keep fixed pieces: an ask costs a one-way
// trip before the data, which a transfer of a chunk or so per path pays in
// full (the demo's non-blocking fabric, its 0.4 MB partner exchanges paced
// at one chunk per NIC, ran 6% slower), and a path with a chunk or two has
// nothing to hand over anyway:
//  - the paths are the pieces' paths, plus EPS path 0 when no piece uses it
//    (to ask again for what a dead direct link owed);
//  - the sender posts one PullRequest receive per path (tag base + 4) and
//    answers each request with the bytes it names (tag base + 5) on the same
//    path, then receives the next request; END closes the path;
//  - the receiver keeps kPullDepth requests outstanding per path and posts
//    each receive before asking, so the data's rendezvous matches at once. A
//    path asks for its own planned share front to back, a chunk at a time
//    (so a path is committed to no more than kPullDepth chunks). Once its
//    share is asked for, a direct link takes over the tail of the path
//    expected to finish last (that path's bytes left and outstanding over
//    the rate it delivered between its first and last arrivals), as much as
//    lets both finish together, at least half a chunk, when that path keeps
//    under kPullLagRatio of its pace (rate over planned share). An EPS path takes
//    over nothing: its NIC carries other pairs too, for which the plan gave
//    it its share;
//  - a direct link that fails or delivers short is killed first (its
//    connection destroyed, so no late write lands), and its share and the
//    ranges it owed are asked for again over EPS: every range lands at its
//    own offset, so a byte that had already arrived is overwritten by
//    itself (exactly once as far as the caller can tell). A failure on EPS
//    is a lost member, as elsewhere;
//  - after the last byte the receiver sends END on every live path; the
//    sender is done with the pair when every path is closed.
// No new waits between pairs: the sender answers whatever arrives, and the
// receiver asks only its own peer.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/collectives/alltoall_dynamic_call.h"
#include "runtime/common/log.h"

namespace mixnet::collectives::internal {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t RoundUpToPage(double n) {
  return static_cast<uint64_t>(std::ceil(n / static_cast<double>(kPage))) * kPage;
}

// The paths of a paced direction, in piece order, plus EPS path 0.
std::vector<PullPath> PathsOf(const std::vector<Piece>& pieces, uint64_t base) {
  std::vector<PullPath> out;
  bool eps0 = false;
  for (const Piece& pc : pieces) {
    PullPath p;
    p.link = pc.link;
    p.eps = pc.eps;
    // Only a direct link may take over another path's share: it carries
    // this pair alone, while an EPS NIC also carries other pairs' bytes,
    // for which the plan already gave it its share.
    p.may_take = pc.len > 0 && pc.link != nullptr;
    if (pc.len > 0) {
      p.todo.push_back(PullRange{pc.offset - base, pc.len});
      p.todo_bytes = pc.len;
      p.planned = pc.len;
    }
    eps0 |= !pc.link && pc.eps == 0;
    out.push_back(std::move(p));
  }
  if (!eps0) out.emplace_back();  // EPS path 0, nothing planned
  return out;
}

// Where a dead direct link's share goes: the first EPS path.
PullPath& Fallback(Pull& p) {
  for (PullPath& path : p.paths) {
    if (!path.link) return path;
  }
  return p.paths.back();  // PathsOf always adds one
}

// Bytes/s a path delivered between its first and last arrivals (its link
// busy all along: two asks outstanding); 0 before its second arrival.
double Rate(const PullPath& q) {
  if (q.arrivals < 2) return 0;
  const double s = absl::ToDoubleSeconds(q.last_arrival - q.first_arrival);
  return s > 0 ? static_cast<double>(q.done_bytes - q.first_arrival_bytes) / s : 0;
}

// Seconds from `now` until path q has delivered `bytes` more than it had at
// its last arrival, at rate r.
double SecondsUntil(const PullPath& q, uint64_t bytes, double r, absl::Time now) {
  return std::max(0.0,
                  static_cast<double>(bytes) / r - absl::ToDoubleSeconds(now - q.last_arrival));
}

}  // namespace

bool PullPaced(uint64_t bytes, size_t pieces, uint32_t chunk) {
  return chunk > 0 && pieces >= 2 && bytes >= 2 * static_cast<uint64_t>(chunk) * pieces;
}

absl::StatusOr<std::unique_ptr<transport::Request>> DynamicCall::PostPull(
    int peer, const PullPath& path, const void* send, void* recv, size_t len, uint64_t tag) {
  if (path.link) return send ? path.link->Isend(send, len, tag) : path.link->Irecv(recv, len, tag);
  transport::Connection& c = *comm_.paths_to(peer)[path.eps].connection;
  return send ? c.Isend(send, len, tag) : c.Irecv(recv, len, tag);
}

void DynamicCall::StartPullIn(int peer, const std::vector<Piece>& pieces) {
  Pull& p = dyn_[peer].pull_in;
  p.on = true;
  p.base = a_.recv_displs[peer];
  p.chunk = comm_.pull_chunk_bytes();
  p.paths = PathsOf(pieces, p.base);
  for (const PullPath& path : p.paths) p.total += path.todo_bytes;
  PumpPull(peer);
}

void DynamicCall::StartPullOut(int peer, const std::vector<Piece>& pieces) {
  Pull& p = dyn_[peer].pull_out;
  p.on = true;
  p.base = a_.send_displs[peer];
  p.paths = PathsOf(pieces, p.base);
  for (const PullPath& path : p.paths) p.total += path.todo_bytes;
  // The paths are final: their request buffers stay where they are.
  for (size_t i = 0; i < p.paths.size(); ++i) {
    PullPath& path = p.paths[i];
    Add(PostPull(peer, path, nullptr, &path.in, sizeof(PullRequest), tag_ + kTagPullRequest), peer,
        OpKind::kPullServe, static_cast<int>(i));
  }
}

std::optional<PullRange> DynamicCall::NextPullRange(Pull& p, size_t i) {
  PullPath& me = p.paths[i];
  if (me.todo.empty() && me.may_take) {
    // The path expected to finish last, by the rates both measured; a path
    // without a rate yet (under two arrivals) is neither thief nor victim.
    const absl::Time now = absl::Now();
    const double r_me = Rate(me);
    size_t victim = SIZE_MAX;
    double latest = 0;
    for (size_t j = 0; j < p.paths.size() && r_me > 0; ++j) {
      const PullPath& q = p.paths[j];
      const double r = Rate(q);
      if (j == i || q.dead || q.todo_bytes == 0 || r <= 0) continue;
      const double end = SecondsUntil(q, q.asked_bytes + q.todo_bytes, r, now);
      if (end > latest) {
        latest = end;
        victim = j;
      }
    }
    // Only a lag the plan did not expect: the victim's pace (its rate over
    // its share) under kPullLagRatio of this path's.
    if (victim != SIZE_MAX &&
        Rate(p.paths[victim]) /
                static_cast<double>(std::max<uint64_t>(p.paths[victim].planned, 1)) >=
            kPullLagRatio * r_me / static_cast<double>(std::max<uint64_t>(me.planned, 1))) {
      victim = SIZE_MAX;
    }
    if (victim != SIZE_MAX) {
      PullPath& v = p.paths[victim];
      const double r_v = Rate(v);
      // x bytes to this path, which is free after what it was asked for:
      // free + x / r_me = latest - x / r_v.
      const double free = SecondsUntil(me, me.asked_bytes, r_me, now);
      const double x =
          std::min((latest - free) / (1 / r_me + 1 / r_v), static_cast<double>(v.todo_bytes));
      if (x >= static_cast<double>(p.chunk) / 2) {
        uint64_t take = std::min(RoundUpToPage(x), v.todo_bytes);
        if (v.todo_bytes - take < p.chunk / 2) take = v.todo_bytes;
        log::Debug(
            "pull: path {} ({:.0f} B/s, {} B asked) takes {} B of path {}'s {} B left "
            "({:.0f} B/s, {} B asked)",
            i, r_me, me.asked_bytes, take, victim, v.todo_bytes, r_v, v.asked_bytes);
        v.todo_bytes -= take;
        me.todo_bytes += take;
        while (take > 0) {  // from v's back, kept in block order
          PullRange& b = v.todo.back();
          const uint64_t m = std::min(take, b.len);
          me.todo.push_front(PullRange{b.offset + b.len - m, m});
          b.len -= m;
          take -= m;
          if (b.len == 0) v.todo.pop_back();
        }
      }
    }
  }
  if (me.todo.empty()) return std::nullopt;
  PullRange& front = me.todo.front();
  // One chunk (a remainder under half a chunk goes with it): what a path is
  // committed to is never more than kPullDepth chunks, so a path that turns
  // out slow holds back little.
  uint64_t c = p.chunk;
  if (c >= front.len || front.len - c < p.chunk / 2) c = front.len;
  const PullRange r{front.offset, c};
  front.offset += c;
  front.len -= c;
  me.todo_bytes -= c;
  if (front.len == 0) me.todo.pop_front();
  return r;
}

void DynamicCall::PumpPull(int peer) {
  Pull& p = dyn_[peer].pull_in;
  if (!p.on || p.finished || IsLost(peer)) return;
  for (size_t i = 0; i < p.paths.size(); ++i) {
    while (!p.paths[i].dead && p.paths[i].asked < kPullDepth) {
      const std::optional<PullRange> r = NextPullRange(p, i);
      if (!r) break;
      PullPath& path = p.paths[i];
      ++path.asked;
      path.asked_bytes += r->len;
      comm_.CountPullAsk();
      Add(PostPull(peer, path, nullptr, recv_ + p.base + r->offset, r->len, tag_ + kTagPullData),
          peer, OpKind::kPullRecv, static_cast<int>(i), r->len, r->offset);
      p.asks.push_back(PullRequest{kPullMagic, 0, r->offset, r->len});
      Add(PostPull(peer, path, &p.asks.back(), nullptr, sizeof(PullRequest),
                   tag_ + kTagPullRequest),
          peer, OpKind::kPullAsk, static_cast<int>(i));
    }
  }
  if (p.done < p.total) return;
  p.finished = true;
  for (size_t i = 0; i < p.paths.size(); ++i) {
    PullPath& path = p.paths[i];
    if (path.dead) continue;
    path.closed = true;
    p.asks.push_back(PullRequest{kPullMagic, 1, 0, 0});
    Add(PostPull(peer, path, &p.asks.back(), nullptr, sizeof(PullRequest), tag_ + kTagPullRequest),
        peer, OpKind::kPullAsk, static_cast<int>(i));
  }
  ReceiveDone(peer);
}

void DynamicCall::PullPathDied(int peer, size_t i, const absl::Status& why) {
  Pull& p = dyn_[peer].pull_in;
  PullPath& path = p.paths[i];
  if (path.dead) return;
  path.dead = true;
  // Close the dead connection first: after this no late write lands.
  path.link->Kill(why);
  PullPath& eps = Fallback(p);
  log::Info("rank {}: direct link {} to {} lost; its {} bytes left and {} owed go over EPS: {}",
            me_, path.link->path().local_nic, comm_.PeerName(peer), path.todo_bytes,
            path.asked_bytes, why.ToString());
  for (const PullRange& r : path.todo) eps.todo.push_back(r);
  eps.todo_bytes += path.todo_bytes;
  path.todo.clear();
  path.todo_bytes = 0;
}

absl::Status DynamicCall::HandlePull(const Op& op, const absl::Status& s, size_t got) {
  const int peer = op.peer;
  const size_t i = static_cast<size_t>(op.piece);
  DynPair& d = dyn_[peer];
  switch (op.kind) {
    case OpKind::kPullAsk: {
      PullPath& path = d.pull_in.paths[i];
      if (s.ok()) return absl::OkStatus();
      if (!path.link) return Lost(peer, s);
      // Its outstanding receives fail now and are asked for again.
      PullPathDied(peer, i, s);
      PumpPull(peer);
      return absl::OkStatus();
    }
    case OpKind::kPullRecv: {
      Pull& p = d.pull_in;
      PullPath& path = p.paths[i];
      --path.asked;
      path.asked_bytes -= op.expect;
      absl::Status st = s;
      if (st.ok() && got != op.expect) {
        st = absl::DataLossError(absl::StrCat("bytes [", op.chunk, ", +", op.expect, ") from ",
                                              comm_.PeerName(peer), ": ", got, " arrived"));
        if (!path.link) return comm_.Fail(st);
      }
      if (!st.ok()) {
        if (!path.link) return Lost(peer, st);
        PullPathDied(peer, i, st);
        PullPath& eps = Fallback(p);
        eps.todo.push_back(PullRange{op.chunk, op.expect});
        eps.todo_bytes += op.expect;
        comm_.CountResent();
      } else {
        const absl::Time now = absl::Now();
        if (path.arrivals++ == 0) {
          path.first_arrival = now;
          path.first_arrival_bytes = got;
        }
        path.last_arrival = now;
        path.done_bytes += got;
        p.done += got;
      }
      PumpPull(peer);
      return absl::OkStatus();
    }
    case OpKind::kPullServe: {
      Pull& p = d.pull_out;
      PullPath& path = p.paths[i];
      if (!s.ok()) {
        if (!path.link) return Lost(peer, s);
        path.link->Kill(s);  // the receiver asks again over EPS
        path.closed = true;
        return absl::OkStatus();
      }
      const PullRequest r = path.in;
      if (r.magic != kPullMagic ||
          (!r.end && (r.len == 0 || r.offset > p.total || r.len > p.total - r.offset))) {
        return comm_.Fail(absl::DataLossError(
            absl::StrCat("alltoallv: malformed request from ", comm_.PeerName(peer), ": [",
                         r.offset, ", +", r.len, ") of ", p.total, " bytes")));
      }
      if (r.end) {
        path.closed = true;
        return absl::OkStatus();
      }
      Add(PostPull(peer, path, send_ + p.base + r.offset, nullptr, r.len, tag_ + kTagPullData),
          peer, OpKind::kPullSend, static_cast<int>(i), r.len, r.offset);
      Add(PostPull(peer, path, nullptr, &path.in, sizeof(PullRequest), tag_ + kTagPullRequest),
          peer, OpKind::kPullServe, static_cast<int>(i));
      return absl::OkStatus();
    }
    case OpKind::kPullSend: {
      PullPath& path = d.pull_out.paths[i];
      if (!s.ok()) {
        if (!path.link) return Lost(peer, s);
        path.link->Kill(s);  // the receiver asks again over EPS
      } else if (path.link) {
        comm_.CountDirectBytes(op.expect);
      }
      return absl::OkStatus();
    }
    default:
      return absl::OkStatus();
  }
}

}  // namespace mixnet::collectives::internal
