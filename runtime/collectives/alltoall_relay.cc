// Router v2's two-hop relays inside one alltoallv call (see
// alltoall_dynamic.cc for the rest of the protocol). Caller thread only.
//
// Bytes from origin O to destination D routed through relay R (a member of
// the call) go O -> R and R -> D over the pairs' common direct links (chunk
// k on link k mod their number; EPS path 0 when a pair has none: router v2's
// EPS-then-circuit and circuit-then-EPS relays), in chunks of the origin's
// relay_chunk_bytes:
//  - O's header to D lists the relay pieces (relay rank, length): the tail
//    of O's block for D, in list order; O's header to R lists the forwards
//    (destination rank, length). So R and D know what to expect without a
//    round trip of their own.
//  - O posts a piece's chunks (tag base + 0x4000 + D) once R's and D's
//    headers are in (when the counts of O and D disagree it sends empty
//    chunks instead, which R forwards and D drains, so nothing waits).
//  - R receives each chunk into a buffer of the call's pool and sends it on
//    to D (tag base + 0x8000 + O) once D's header is in; a chunk's buffer is
//    freed when its send completes. R keeps at most kMaxForwardDepth chunks
//    of a stream in flight and, beyond one chunk per stream, no more than
//    relay_buffer_bytes in all: the origin's sends wait for R's receives
//    (rendezvous), which is the back-pressure. R forwards exactly what
//    arrived: a chunk lost on a dead O -> R link goes on as an empty chunk.
//  - D receives the chunks straight into its receive buffer. A chunk that
//    fails (dead R -> D link) or arrives short marks the piece missing; D's
//    receipt to O names it (kMaxPieces + j) and O re-sends the whole piece
//    over EPS path 0 (tag base + 192 + j) to the same offset: exactly once
//    as far as the caller can tell. A failure on an EPS path (a dead relay
//    rank) fails the call, as any dead member does.
// No cycle of waits: R's receives wait only for R's own sends to D, and D
// posts its receives as soon as it has O's and R's headers, which every rank
// sends first thing; so every host can relay for every other at once.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/collectives/alltoall_dynamic_call.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::collectives::internal {

void DynamicCall::PlanRelays(const std::vector<PeerRouting>& routing) {
  const uint32_t chunk = static_cast<uint32_t>(comm_.relay_chunk_bytes());
  std::vector<size_t> forwards(n_, 0);
  for (int peer = 0; peer < n_; ++peer) {
    if (peer == me_ || !comm_.dynamic(peer)) continue;
    DynPair& d = dyn_[peer];
    const PeerRouting r = peer < static_cast<int>(routing.size()) ? routing[peer] : PeerRouting{};
    double eps = r.eps_share;
    std::vector<int> relays;
    std::vector<double> shares;
    for (const RelayRoute& rr : r.relays) {
      const int k = rr.rank;
      auto seen = std::find(relays.begin(), relays.end(), k);
      if (seen != relays.end()) {
        shares[seen - relays.begin()] += rr.share;
        continue;
      }
      // A relay this call cannot use (not a dynamic member, too many
      // streams): its share goes over EPS. A relay with no link to us takes
      // its first hop over EPS (router v2's EPS-then-circuit relays).
      const bool usable = n_ <= kMaxRelayWorld && k >= 0 && k < n_ && k != me_ && k != peer &&
                          comm_.dynamic(k) && relays.size() < kMaxRelays &&
                          forwards[k] < kMaxForwards;
      if (!usable) {
        eps += rr.share;
        continue;
      }
      relays.push_back(k);
      shares.push_back(rr.share);
      ++forwards[k];
    }
    const uint64_t bytes = a_.send_counts[peer];
    const RelayCut cut = CutRelays(bytes, std::clamp(eps, 0.0, 1.0), shares);
    uint64_t relayed = 0;
    for (uint64_t len : cut.lens) relayed += len;
    size_t offset = a_.send_displs[peer] + (bytes - relayed);
    for (size_t i = 0; i < relays.size(); ++i) {
      const uint64_t len = cut.lens[i];
      if (len == 0) continue;
      const int k = relays[i];
      d.relay_out.push_back(relay_out_.size());
      relay_out_.push_back(RelayOut{peer, k, chunk, len, offset, false});
      d.mine.relays[d.mine.n_relays++] = RelayEntry{static_cast<uint32_t>(k), chunk, len};
      PairHeader& to_relay = dyn_[k].mine;
      to_relay.forwards[to_relay.n_forwards++] =
          RelayEntry{static_cast<uint32_t>(peer), chunk, len};
      offset += len;
    }
    d.mine.eps_share = std::clamp(cut.rest_eps_share, 0.0, 1.0);
  }
}

absl::Status DynamicCall::OnRelayHeader(int peer) {
  DynPair& d = dyn_[peer];
  const PairHeader& h = d.theirs;
  auto malformed = [&](const std::string& what) {
    return comm_.Fail(absl::DataLossError(
        absl::StrCat("alltoallv: header from ", comm_.PeerName(peer), ": ", what)));
  };
  auto member = [&](uint32_t r) {
    return static_cast<int>(r) < n_ && static_cast<int>(r) != me_ && static_cast<int>(r) != peer &&
           comm_.dynamic(static_cast<int>(r));
  };
  for (uint32_t i = 0; i < h.n_forwards; ++i) {
    const RelayEntry& e = h.forwards[i];
    if (!member(e.rank) || e.len == 0 || e.chunk < 4096) {
      return malformed(absl::StrCat("forward ", i, " to rank ", e.rank, " of ", e.len,
                                    " bytes in chunks of ", e.chunk,
                                    " is not one this rank can make"));
    }
    Forward f;
    f.origin = peer;
    f.dest = static_cast<int>(e.rank);
    f.chunk = e.chunk;
    f.len = e.len;
    f.chunks = RelayChunkCount(e.len, e.chunk);
    f.got.assign(f.chunks, 0);
    f.received.assign(f.chunks, false);
    forwards_.push_back(std::move(f));
  }
  uint64_t total = 0;
  for (uint32_t j = 0; j < h.n_relays; ++j) total += h.relays[j].len;
  if (total > h.sends) {
    return malformed(absl::StrCat("relays carry ", total, " of its ", h.sends, " bytes"));
  }
  size_t offset = a_.recv_displs[peer] + (h.sends - total);
  for (uint32_t j = 0; j < h.n_relays; ++j) {
    const RelayEntry& e = h.relays[j];
    if (!member(e.rank) || e.len == 0 || e.chunk < 4096) {
      return malformed(absl::StrCat("relay piece ", j, " through rank ", e.rank, " of ", e.len,
                                    " bytes in chunks of ", e.chunk, " is not one it can send"));
    }
    RelayIn ri;
    ri.origin = peer;
    ri.relay = static_cast<int>(e.rank);
    ri.index = j;
    ri.chunk = e.chunk;
    ri.len = e.len;
    ri.offset = offset;
    ri.left = RelayChunkCount(e.len, e.chunk);
    ri.drain = d.mismatch;
    d.relay_in.push_back(relay_in_.size());
    relay_in_.push_back(ri);
    offset += e.len;
  }
  return absl::OkStatus();
}

std::shared_ptr<DirectLink> DynamicCall::RelayLink(int peer, size_t chunk) const {
  const DynPair& d = dyn_[peer];
  return d.common.empty() ? nullptr : d.common[chunk % d.common.size()];
}

absl::StatusOr<std::unique_ptr<transport::Request>> DynamicCall::PostRelay(
    int peer, const std::shared_ptr<DirectLink>& link, bool send, void* buf, size_t len,
    uint64_t tag) {
  if (link) return send ? link->Isend(buf, len, tag) : link->Irecv(buf, len, tag);
  return send ? Eps0(peer).Isend(buf, len, tag) : Eps0(peer).Irecv(buf, len, tag);
}

std::unique_ptr<char[]> DynamicCall::TakeBuffer(size_t len) {
  auto it = free_buffers_.find(len);
  if (it == free_buffers_.end())
    return std::make_unique_for_overwrite<char[]>(std::max<size_t>(len, 1));
  std::unique_ptr<char[]> buf = std::move(it->second);
  free_buffers_.erase(it);
  return buf;
}

void DynamicCall::GiveBuffer(size_t len, std::unique_ptr<char[]> buf) {
  free_buffers_.emplace(len, std::move(buf));
}

void DynamicCall::PumpRelays() {
  // Origin: a piece's chunks, once the relay's and the destination's headers are in.
  for (size_t i = 0; i < relay_out_.size(); ++i) {
    RelayOut& ro = relay_out_[i];
    if (ro.posted || IsLost(ro.relay) || IsLost(ro.dest) || !dyn_[ro.relay].header_in ||
        !dyn_[ro.dest].header_in) {
      continue;
    }
    ro.posted = true;
    const bool empty = dyn_[ro.dest].mismatch;
    const size_t chunks = RelayChunkCount(ro.len, ro.chunk);
    for (size_t k = 0; k < chunks; ++k) {
      const std::shared_ptr<DirectLink> link = RelayLink(ro.relay, k);
      const size_t len = empty ? 0 : RelayChunkLen(ro.len, ro.chunk, k);
      char* p = const_cast<char*>(send_) + ro.offset + k * ro.chunk;
      Add(PostRelay(ro.relay, link, true, p, len, tag_ + kTagRelayIn + ro.dest), ro.relay,
          OpKind::kRelaySend, static_cast<int>(i), len, k, link);
    }
  }
  // Relay: receive within the budget, forward in order once the destination's header is in.
  for (size_t i = 0; i < forwards_.size(); ++i) {
    Forward& f = forwards_[i];
    if (f.dropped) continue;
    while (f.next_recv < f.chunks && f.in_flight < kMaxForwardDepth) {
      const size_t len = RelayChunkLen(f.len, f.chunk, f.next_recv);
      if (f.in_flight > 0 && relay_held_ + len > relay_budget_) break;
      const size_t k = f.next_recv++;
      std::unique_ptr<char[]> buf = TakeBuffer(len);
      char* p = buf.get();
      f.buffers[k] = std::move(buf);
      relay_held_ += len;
      ++f.in_flight;
      const std::shared_ptr<DirectLink> in = RelayLink(f.origin, k);
      Add(PostRelay(f.origin, in, false, p, len, tag_ + kTagRelayIn + f.dest), f.origin,
          OpKind::kForwardRecv, static_cast<int>(i), len, k, in);
    }
    if (!dyn_[f.dest].header_in) continue;
    while (f.next_send < f.next_recv && f.received[f.next_send]) {
      const size_t k = f.next_send++;
      const std::shared_ptr<DirectLink> out = RelayLink(f.dest, k);
      Add(PostRelay(f.dest, out, true, f.buffers[k].get(), f.got[k],
                    tag_ + kTagRelayOut + f.origin),
          f.dest, OpKind::kForwardSend, static_cast<int>(i), f.got[k], k, out);
    }
  }
  // Destination: every chunk straight into the receive buffer, once the relay's header is in.
  for (size_t i = 0; i < relay_in_.size(); ++i) {
    RelayIn& ri = relay_in_[i];
    if (ri.posted || IsLost(ri.origin)) continue;
    if (IsLost(ri.relay)) {
      DropRelayIn(i);
      continue;
    }
    if (!dyn_[ri.relay].header_in) continue;
    ri.posted = true;
    const size_t chunks = RelayChunkCount(ri.len, ri.chunk);
    for (size_t k = 0; k < chunks; ++k) {
      const std::shared_ptr<DirectLink> link = RelayLink(ri.relay, k);
      const size_t len = ri.drain ? 0 : RelayChunkLen(ri.len, ri.chunk, k);
      char* p = ri.drain ? &drain_byte_ : recv_ + ri.offset + k * ri.chunk;
      Add(PostRelay(ri.relay, link, false, p, len, tag_ + kTagRelayOut + ri.origin), ri.relay,
          OpKind::kRelayRecv, static_cast<int>(i), len, k, link);
    }
  }
}

void DynamicCall::DropRelayIn(size_t i) {
  RelayIn& ri = relay_in_[i];
  ri.posted = true;  // nothing more is posted for it
  if (ri.left == 0 || IsLost(ri.origin)) return;
  const size_t left = ri.left;
  ri.left = 0;
  if (!ri.drain) ri.missing = true;
  if (ri.missing) {
    log::Info("rank {}: relay piece {} from {} through {}, which was lost: asking for it over EPS",
              me_, ri.index, comm_.PeerName(ri.origin), comm_.PeerName(ri.relay));
    dyn_[ri.origin].missing.push_back(static_cast<uint32_t>(kMaxPieces + ri.index));
    Add(Eps0(ri.origin).Irecv(recv_ + ri.offset, ri.len, tag_ + kTagRelayResend + ri.index),
        ri.origin, OpKind::kRelayResendRecv, static_cast<int>(i), ri.len);
  }
  for (size_t k = 0; k < left; ++k) ReceiveDone(ri.origin);
}

void DynamicCall::DropForward(Forward& f) {
  if (f.dropped) return;
  f.dropped = true;
  for (const auto& [k, buf] : f.buffers) relay_held_ -= RelayChunkLen(f.len, f.chunk, k);
  f.in_flight = 0;
}

absl::Status DynamicCall::HandleRelay(const Op& op, const absl::Status& status, size_t got) {
  absl::Status s = status;
  // An EPS path failing is the loss of a member (Lost: the call goes on
  // without it, or fails).
  if (!s.ok() && !op.link &&
      !(op.kind == OpKind::kRelayRecv && relay_in_[op.piece].drain &&
        s.code() == absl::StatusCode::kInvalidArgument)) {
    return Lost(op.peer, s);
  }
  // A failure on a direct link (EPS failures were handled above) kills it
  // (nothing more lands through it) and is recovered over EPS.
  auto lost = [&](const char* what) {
    // Once per link: the chunks after the first fail on the killed link.
    if (op.link->usable())
      log::Info("rank {}: relay {} chunk {} with {} lost on {}: {}", me_, what, op.chunk,
                comm_.PeerName(op.peer), op.link->path().local_nic, s.ToString());
    op.link->Kill(s);
  };
  switch (op.kind) {
    case OpKind::kRelaySend:
      if (!s.ok()) {
        lost("send");  // the destination's receipt names what to re-send
        return absl::OkStatus();
      }
      comm_.CountRelaySent(op.expect);
      if (op.link) comm_.CountDirectBytes(op.expect);
      return absl::OkStatus();
    case OpKind::kForwardRecv: {
      Forward& f = forwards_[op.piece];
      if (!s.ok()) lost("receive");
      f.got[op.chunk] = s.ok() ? got : 0;  // what arrived goes on
      f.received[op.chunk] = true;
      return absl::OkStatus();
    }
    case OpKind::kForwardSend: {
      Forward& f = forwards_[op.piece];
      auto it = f.buffers.find(op.chunk);
      const size_t len = RelayChunkLen(f.len, f.chunk, op.chunk);
      GiveBuffer(len, std::move(it->second));
      f.buffers.erase(it);
      relay_held_ -= len;
      --f.in_flight;
      if (!s.ok()) {
        lost("forward");  // the destination sees the loss
        return absl::OkStatus();
      }
      comm_.CountRelayForwarded(op.expect);
      if (op.link) comm_.CountDirectBytes(op.expect);
      return absl::OkStatus();
    }
    case OpKind::kRelayRecv: {
      RelayIn& ri = relay_in_[op.piece];
      if (ri.drain && s.code() == absl::StatusCode::kInvalidArgument) s = absl::OkStatus();
      const bool arrived = s.ok() && got == op.expect;
      if (!s.ok()) lost("receive");
      if (!arrived && !ri.drain) ri.missing = true;
      if (--ri.left == 0 && ri.missing) {
        log::Info(
            "rank {}: relay piece {} from {} through {} did not arrive; asking for it over "
            "EPS",
            me_, ri.index, comm_.PeerName(ri.origin), comm_.PeerName(ri.relay));
        dyn_[ri.origin].missing.push_back(static_cast<uint32_t>(kMaxPieces + ri.index));
        Add(Eps0(ri.origin).Irecv(recv_ + ri.offset, ri.len, tag_ + kTagRelayResend + ri.index),
            ri.origin, OpKind::kRelayResendRecv, op.piece, ri.len);
      }
      ReceiveDone(ri.origin);
      return absl::OkStatus();
    }
    case OpKind::kRelayResendSend:
      return absl::OkStatus();  // (a failure: Lost, above)
    case OpKind::kRelayResendRecv:
      if (got != op.expect) {
        return comm_.Fail(absl::DataLossError(absl::StrCat("alltoallv: re-sent relay piece from ",
                                                           comm_.PeerName(op.peer), ": ", got,
                                                           " bytes, expected ", op.expect)));
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

}  // namespace mixnet::collectives::internal
