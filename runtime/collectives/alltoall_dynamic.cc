// alltoallv for a communicator with dynamic pairs (pairs that circuits may
// join; see communicator.h). Runs on the communicator's caller thread.
//
// Static pairs use the one-phase protocol of alltoall.cc unchanged on the
// wire (counts and data posted at once). A dynamic pair, per call:
//  1. header: each end sends a PairHeader (counts, the ids of the direct
//     links it offers now, its EPS share and relays, see SetRouting) over
//     EPS path 0; nothing else is posted for the pair until the peer's
//     header is in.
//  2. data: both ends take the intersection of the two offers (id order) and
//     cut each direction with SplitPair by that direction's sender's EPS
//     share: over the common links only (share 0, router v1: circuits
//     replace EPS for a pair they join), over links and EPS paths (router
//     v2's split), or over the EPS paths when no link is common. Both ends
//     compute the same pieces; piece i travels with tag base+64+i on its path.
//     The last bytes of a block may instead travel through relays (router
//     v2, alltoall_relay.cc).
//  3. loss: a piece receive that fails on a direct link kills the link (its
//     connection is destroyed first, so no late write lands), posts a receive
//     for the re-send (base+128+i, EPS path 0, same offset) and lists the
//     piece in the receipt. A failed direct send kills the link and waits for
//     the receipt. EPS failures abort the communicator as before.
//  4. receipts: when common links or relays were used, each receiver sends
//     each sender a Receipt once its original piece receives (and relay
//     chunks) are done; the sender re-sends the listed pieces over EPS and
//     completes only after the receipt (and its re-sends) are done. Receipts
//     and re-sends travel on EPS, which is reliable, so one round suffices.
//  5. loss of a member: without relays, a failure on an EPS path fails the
//     communicator at once (as in alltoall.cc). With relays planned
//     (Communicator::relays_planned, the same on every rank) the other
//     members' bytes may pass through the one that died, so each survivor
//     goes on without it: nothing with the lost rank, or relayed through,
//     from or to it, is waited for any more; relay pieces it was forwarding
//     are asked for again from their origins over EPS (the destination's
//     receipt, as for a cut relay hop), and a rank whose EPS connection to
//     another has failed loses that one too even with nothing posted to it.
//     Once its own pairs with the survivors are complete, a survivor fails
//     the communicator naming the lost rank (a rank that died before one
//     that aborted because of it). Every byte between survivors has then
//     arrived exactly once; the lost rank's blocks have not.
// The call is over when every request it posted has completed or is no
// longer waited for.
#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/collectives/alltoall_dynamic_call.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::collectives::internal {
namespace {

// Registers the call's offer with the communicator and lets go when the
// call ends, however it ends.
class TransferScope {
 public:
  explicit TransferScope(Communicator& comm) : comm_(comm) {}
  ~TransferScope() { comm_.EndTransfer(); }

 private:
  Communicator& comm_;
};

std::vector<Piece> MakePieces(size_t offset, size_t bytes, const std::vector<PeerPath>& eps,
                              const DirectLinks& common, double eps_share, size_t first) {
  std::vector<double> eps_gbps, link_gbps;
  for (const PeerPath& p : eps) eps_gbps.push_back(p.path.gbps);
  for (const auto& l : common) link_gbps.push_back(l->path().gbps);
  std::vector<Piece> out;
  for (const PieceSpec& ps : SplitPair(offset, bytes, eps_gbps, link_gbps, eps_share, first)) {
    Piece p;
    p.offset = ps.offset;
    p.len = ps.len;
    if (ps.direct) {
      p.link = common[ps.index];
    } else {
      p.eps = ps.index;
    }
    out.push_back(std::move(p));
  }
  return out;
}

uint64_t RelayedBytes(const PairHeader& h) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < h.n_relays && i < kMaxRelays; ++i) sum += h.relays[i].len;
  return sum;
}

}  // namespace

DynamicCall::DynamicCall(Communicator& comm, const AlltoallvArgs& args, uint64_t tag)
    : comm_(comm),
      a_(args),
      tag_(tag),
      n_(comm.size()),
      me_(comm.rank()),
      send_(static_cast<const char*>(args.send)),
      recv_(static_cast<char*>(args.recv)),
      mine_(n_),
      theirs_(n_),
      dyn_(n_),  // PairHeader is zero-initialised (padding included)
      relay_budget_(comm.relay_buffer_bytes()),
      defer_loss_(comm.relays_planned()),
      lost_(n_) {}

void DynamicCall::Add(absl::StatusOr<std::unique_ptr<transport::Request>> r, int peer, OpKind kind,
                      int piece, size_t expect, size_t chunk, std::shared_ptr<DirectLink> link) {
  Op op;
  op.peer = peer;
  op.kind = kind;
  op.piece = piece;
  op.expect = expect;
  op.chunk = chunk;
  op.link = std::move(link);
  if (r.ok()) {
    op.req = *std::move(r);
  } else {
    op.post_error = r.status();
  }
  ops_.push_back(std::move(op));
}

void DynamicCall::PostStatic(int peer, bool recv) {
  std::vector<PeerPath>& paths = comm_.paths_to(peer);
  std::vector<double> gbps;
  for (const PeerPath& p : paths) gbps.push_back(p.path.gbps);
  if (recv) {
    Add(paths[0].connection->Irecv(&theirs_[peer], sizeof(CountPair), tag_ + kTagCounts), peer,
        OpKind::kStaticRecv);
    std::vector<size_t> pieces =
        SplitAcrossPaths(a_.recv_counts[peer], gbps, PairSplitFirst(me_, peer));
    size_t off = a_.recv_displs[peer];
    for (size_t i = 0; i < paths.size(); ++i) {
      Add(paths[i].connection->Irecv(recv_ + off, pieces[i], tag_ + kTagData), peer,
          OpKind::kStaticRecv, -1, pieces[i]);
      off += pieces[i];
    }
    return;
  }
  mine_[peer] = CountPair{a_.send_counts[peer], a_.recv_counts[peer]};
  Add(paths[0].connection->Isend(&mine_[peer], sizeof(CountPair), tag_ + kTagCounts), peer,
      OpKind::kStaticSend);
  std::vector<size_t> pieces =
      SplitAcrossPaths(a_.send_counts[peer], gbps, PairSplitFirst(me_, peer));
  size_t off = a_.send_displs[peer];
  for (size_t i = 0; i < paths.size(); ++i) {
    Add(paths[i].connection->Isend(send_ + off, pieces[i], tag_ + kTagData), peer,
        OpKind::kStaticSend);
    off += pieces[i];
  }
}

absl::Status DynamicCall::Run(std::vector<DirectLinks> offers,
                              const std::vector<PeerRouting>& routing) {
  for (int peer = 0; peer < n_; ++peer) dyn_[peer].offered = std::move(offers[peer]);
  for (int peer = 0; peer < n_; ++peer) {
    if (peer != me_ && comm_.paths_to(peer).empty()) {
      return comm_.health().ok() ? absl::InternalError("no path") : comm_.health();
    }
  }
  PlanRelays(routing);
  ops_.reserve(8 * n_);

  // Receives first (counts/headers, and static data), then sends.
  for (int k = 1; k < n_; ++k) {
    const int peer = (me_ - k + n_) % n_;
    if (comm_.dynamic(peer)) {
      Add(Eps0(peer).Irecv(&dyn_[peer].theirs, sizeof(PairHeader), tag_ + kTagCounts), peer,
          OpKind::kHeaderRecv);
    } else {
      PostStatic(peer, true);
    }
  }
  for (int k = 1; k < n_; ++k) {
    const int peer = (me_ + k) % n_;
    if (!comm_.dynamic(peer)) {
      PostStatic(peer, false);
      continue;
    }
    DynPair& d = dyn_[peer];
    d.mine.magic = kHeaderMagic;
    d.mine.sends = a_.send_counts[peer];
    d.mine.expects = a_.recv_counts[peer];
    d.mine.pull_chunk = static_cast<uint32_t>(comm_.pull_chunk_bytes());
    d.mine.n_links = static_cast<uint32_t>(d.offered.size());
    for (size_t i = 0; i < d.offered.size(); ++i) d.mine.links[i] = d.offered[i]->id();
    Add(Eps0(peer).Isend(&d.mine, sizeof(PairHeader), tag_ + kTagCounts), peer,
        OpKind::kHeaderSend);
  }
  if (a_.send_counts[me_] > 0) {
    std::memmove(recv_ + a_.recv_displs[me_], send_ + a_.send_displs[me_], a_.send_counts[me_]);
  }
  RETURN_IF_ERROR(Progress());
  if (any_lost_) return comm_.Fail(LossToReport());
  return CheckCounts();
}

absl::Status DynamicCall::Lost(int peer, const absl::Status& status) {
  const absl::StatusCode code = status.code();
  const bool loss = code == absl::StatusCode::kUnavailable ||
                    code == absl::StatusCode::kDeadlineExceeded ||
                    code == absl::StatusCode::kAborted || code == absl::StatusCode::kCancelled;
  if (!defer_loss_ || !loss || peer == me_) return comm_.Fail(status);
  if (IsLost(peer)) return absl::OkStatus();
  lost_[peer] = status;
  any_lost_ = true;
  log::Warn("rank {}: lost {} in this alltoallv; finishing it with the other members: {}", me_,
            comm_.PeerName(peer), status.ToString());
  // Nothing more lands through its direct links.
  for (const auto& l : dyn_[peer].common) l->Kill(status);
  for (size_t i = 0; i < relay_in_.size(); ++i) {
    if (relay_in_[i].relay == peer) DropRelayIn(i);
  }
  for (Forward& f : forwards_) {
    if (f.origin == peer || f.dest == peer) DropForward(f);
  }
  PumpRelays();
  return absl::OkStatus();
}

bool DynamicCall::Abandoned(const Op& op) const {
  if (IsLost(op.peer)) return true;
  switch (op.kind) {
    case OpKind::kRelaySend:  // to the relay, for a destination
      return IsLost(relay_out_[op.piece].dest);
    case OpKind::kForwardRecv:
    case OpKind::kForwardSend:
      return forwards_[op.piece].dropped;
    case OpKind::kRelayRecv:  // from the relay, of an origin's piece
      return IsLost(relay_in_[op.piece].origin);
    default:
      return false;
  }
}

absl::Status DynamicCall::ScanForLoss() {
  for (int peer = 0; peer < n_; ++peer) {
    if (peer == me_ || IsLost(peer) || comm_.paths_to(peer).empty()) continue;
    absl::Status h = Eps0(peer).health();
    if (!h.ok()) RETURN_IF_ERROR(Lost(peer, h));
  }
  return absl::OkStatus();
}

absl::Status DynamicCall::LossToReport() const {
  absl::Status first;
  for (const absl::Status& s : lost_) {
    if (s.ok()) continue;
    if (!transport::PeerWasAlive(s)) return s;
    if (first.ok()) first = s;
  }
  return first;
}

// Posts the data pieces of dynamic pair `peer` once its header is in.
absl::Status DynamicCall::OnHeader(int peer) {
  DynPair& d = dyn_[peer];
  if (d.theirs.magic != kHeaderMagic || d.theirs.n_links > kMaxLinks ||
      d.theirs.n_relays > kMaxRelays || d.theirs.n_forwards > kMaxForwards) {
    return comm_.Fail(absl::DataLossError(
        absl::StrCat("alltoallv: malformed header from ", comm_.PeerName(peer))));
  }
  if (!(d.theirs.eps_share >= 0 && d.theirs.eps_share <= 1)) {
    return comm_.Fail(absl::DataLossError(absl::StrCat(
        "alltoallv: header from ", comm_.PeerName(peer), " has EPS share ", d.theirs.eps_share)));
  }
  std::set<uint64_t> offered_by_peer(d.theirs.links, d.theirs.links + d.theirs.n_links);
  for (const auto& l : d.offered) {
    if (offered_by_peer.count(l->id())) d.common.push_back(l);
  }
  if (d.common.size() > kMaxPieces) d.common.resize(kMaxPieces);
  d.header_in = true;
  if (d.theirs.sends != a_.recv_counts[peer]) {
    if (count_error_.ok()) {
      count_error_ = absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: ", comm_.PeerName(peer), " sends ", d.theirs.sends,
          " bytes to rank ", me_, ", which expects ", a_.recv_counts[peer]));
    }
    d.mismatch = true;
  }
  if (d.theirs.expects != a_.send_counts[peer]) {
    if (count_error_.ok()) {
      count_error_ = absl::InvalidArgumentError(
          absl::StrCat("alltoallv: count mismatch: rank ", me_, " sends ", a_.send_counts[peer],
                       " bytes to ", comm_.PeerName(peer), ", which expects ", d.theirs.expects));
    }
    d.mismatch = true;
  }
  // Forwards and relay pieces first: relays move even when the counts of
  // this pair disagree (other pairs' bytes may pass through us).
  RETURN_IF_ERROR(OnRelayHeader(peer));
  // Both ends see the same mismatch: neither moves data for the pair.
  if (d.mismatch) return absl::OkStatus();
  const uint64_t relayed_in = RelayedBytes(d.theirs);
  const std::vector<PeerPath>& eps = comm_.paths_to(peer);
  // Each direction is cut by its sender's weights; relayed bytes are the
  // block's tail.
  const uint64_t recv_bytes = a_.recv_counts[peer] - relayed_in;
  const uint64_t send_bytes = a_.send_counts[peer] - RelayedBytes(d.mine);
  d.recv_pieces = MakePieces(a_.recv_displs[peer], recv_bytes, eps, d.common, d.theirs.eps_share,
                             PairSplitFirst(me_, peer));
  d.send_pieces = MakePieces(a_.send_displs[peer], send_bytes, eps, d.common, d.mine.eps_share,
                             PairSplitFirst(me_, peer));
  // Receiver-paced directions (alltoall_pull.cc) re-ask for what a dead
  // link owed themselves; the others' direct pieces need the receipt.
  const bool pull_in = PullPaced(recv_bytes, d.recv_pieces.size(), d.mine.pull_chunk);
  const bool pull_out = PullPaced(send_bytes, d.send_pieces.size(), d.theirs.pull_chunk);
  d.recv_left += pull_in ? 1 : d.recv_pieces.size();
  for (size_t j : d.relay_in) d.recv_left += relay_in_[j].left;
  d.receipt_due = (!d.common.empty() && !pull_in) || !d.relay_in.empty();
  if ((!d.common.empty() && !pull_out) || !d.relay_out.empty()) {
    Add(Eps0(peer).Irecv(&d.receipt_in, sizeof(Receipt), tag_ + kTagReceipt), peer,
        OpKind::kReceiptRecv);
  }
  if (pull_out) StartPullOut(peer, d.send_pieces);
  if (pull_in) {
    StartPullIn(peer, d.recv_pieces);
    d.recv_pieces.clear();
  }
  for (size_t i = 0; i < d.recv_pieces.size(); ++i) {
    const Piece& p = d.recv_pieces[i];
    const uint64_t t = tag_ + kTagPiece + i;
    Add(p.link ? p.link->Irecv(recv_ + p.offset, p.len, t)
               : eps[p.eps].connection->Irecv(recv_ + p.offset, p.len, t),
        peer, OpKind::kPieceRecv, static_cast<int>(i), p.len);
  }
  if (pull_out) d.send_pieces.clear();
  for (size_t i = 0; i < d.send_pieces.size(); ++i) {
    const Piece& p = d.send_pieces[i];
    const uint64_t t = tag_ + kTagPiece + i;
    Add(p.link ? p.link->Isend(send_ + p.offset, p.len, t)
               : eps[p.eps].connection->Isend(send_ + p.offset, p.len, t),
        peer, OpKind::kPieceSend, static_cast<int>(i));
  }
  return absl::OkStatus();
}

void DynamicCall::ReceiveDone(int peer) {
  DynPair& d = dyn_[peer];
  if (IsLost(peer) || d.mismatch || d.recv_left == 0 || --d.recv_left > 0 || !d.receipt_due) {
    return;
  }
  d.receipt_out.magic = kReceiptMagic;
  d.receipt_out.n_missing = static_cast<uint32_t>(d.missing.size());
  std::copy(d.missing.begin(), d.missing.end(), d.receipt_out.missing);
  Add(Eps0(peer).Isend(&d.receipt_out, sizeof(Receipt), tag_ + kTagReceipt), peer,
      OpKind::kReceiptSend);
}

absl::Status DynamicCall::OnReceipt(int peer) {
  DynPair& d = dyn_[peer];
  const Receipt& r = d.receipt_in;
  if (r.magic != kReceiptMagic || r.n_missing > d.send_pieces.size() + d.relay_out.size()) {
    return comm_.Fail(absl::DataLossError(
        absl::StrCat("alltoallv: malformed receipt from ", comm_.PeerName(peer))));
  }
  for (uint32_t k = 0; k < r.n_missing; ++k) {
    const uint32_t m = r.missing[k];
    if (m >= kMaxPieces && m - kMaxPieces < d.relay_out.size()) {
      const size_t j = m - kMaxPieces;
      const RelayOut& ro = relay_out_[d.relay_out[j]];
      log::Info("rank {}: relay piece {} to {} through {} lost; re-sending it over EPS", me_, j,
                comm_.PeerName(peer), comm_.PeerName(ro.relay));
      Add(Eps0(peer).Isend(send_ + ro.offset, ro.len, tag_ + kTagRelayResend + j), peer,
          OpKind::kRelayResendSend, static_cast<int>(d.relay_out[j]));
      comm_.CountResent();
      continue;
    }
    if (m >= d.send_pieces.size() || !d.send_pieces[m].link) {
      return comm_.Fail(absl::DataLossError(
          absl::StrCat("alltoallv: ", comm_.PeerName(peer), " asks again for piece ", m,
                       ", which did not travel on a direct path or a relay")));
    }
    const Piece& p = d.send_pieces[m];
    p.link->Kill(absl::UnavailableError(
        absl::StrCat(comm_.PeerName(peer), " lost piece ", m, " on this link")));
    Add(Eps0(peer).Isend(send_ + p.offset, p.len, tag_ + kTagResend + m), peer, OpKind::kResendSend,
        static_cast<int>(m));
    comm_.CountResent();
  }
  return absl::OkStatus();
}

// One completed request.
absl::Status DynamicCall::Handle(size_t index) {
  const Op& op = ops_[index];
  const int peer = op.peer;
  const OpKind kind = op.kind;
  const int piece = op.piece;
  const size_t expect = op.expect;
  absl::Status s = op.req ? op.req->status() : op.post_error;
  const size_t got = op.req && s.ok() ? op.req->bytes() : 0;
  DynPair& d = dyn_[peer];
  switch (kind) {
    case OpKind::kRelaySend:
    case OpKind::kForwardRecv:
    case OpKind::kForwardSend:
    case OpKind::kRelayRecv:
    case OpKind::kRelayResendSend:
    case OpKind::kRelayResendRecv:
    case OpKind::kPullAsk:
    case OpKind::kPullRecv:
    case OpKind::kPullServe:
    case OpKind::kPullSend: {
      // Copied: handling posts requests, which may move ops_.
      Op copy;
      copy.peer = op.peer;
      copy.kind = op.kind;
      copy.piece = op.piece;
      copy.chunk = op.chunk;
      copy.expect = op.expect;
      copy.link = op.link;
      if (kind == OpKind::kPullAsk || kind == OpKind::kPullRecv || kind == OpKind::kPullServe ||
          kind == OpKind::kPullSend) {
        return HandlePull(copy, s, got);
      }
      RETURN_IF_ERROR(HandleRelay(copy, s, got));
      PumpRelays();
      return absl::OkStatus();
    }
    default:
      break;
  }
  const bool direct_piece =
      (kind == OpKind::kPieceRecv || kind == OpKind::kPieceSend) &&
      (kind == OpKind::kPieceRecv ? d.recv_pieces : d.send_pieces)[piece].link != nullptr;
  if (!s.ok() && !direct_piece) {
    if (kind == OpKind::kStaticRecv && s.code() == absl::StatusCode::kInvalidArgument) {
      if (invalid_.ok()) invalid_ = s;
      return absl::OkStatus();
    }
    return Lost(peer, s);
  }
  switch (kind) {
    case OpKind::kStaticRecv:
      if (expect != SIZE_MAX && got != expect && invalid_.ok()) {
        invalid_ = absl::InvalidArgumentError(absl::StrCat(
            "alltoallv: ", comm_.PeerName(peer), " delivered ", got, " bytes, expected ", expect));
      }
      return absl::OkStatus();
    case OpKind::kHeaderRecv:
      RETURN_IF_ERROR(OnHeader(peer));
      PumpRelays();
      return absl::OkStatus();
    case OpKind::kPieceRecv: {
      const Piece& p = d.recv_pieces[piece];
      if (s.ok() && got != p.len) {
        s = absl::DataLossError(absl::StrCat("piece ", piece, " from ", comm_.PeerName(peer), ": ",
                                             got, " bytes, expected ", p.len));
        if (!p.link) return comm_.Fail(s);
      }
      if (!s.ok()) {
        // Close the dead connection first: after this no late write lands.
        log::Info("rank {}: piece {} from {} lost on {}; asking for it over EPS: {}", me_, piece,
                  comm_.PeerName(peer), p.link->path().local_nic, s.ToString());
        p.link->Kill(s);
        d.missing.push_back(static_cast<uint32_t>(piece));
        Add(Eps0(peer).Irecv(recv_ + p.offset, p.len, tag_ + kTagResend + piece), peer,
            OpKind::kResendRecv, piece, p.len);
      }
      ReceiveDone(peer);
      return absl::OkStatus();
    }
    case OpKind::kPieceSend:
      if (!s.ok()) {
        d.send_pieces[piece].link->Kill(s);  // the receipt names what to re-send
      } else if (d.send_pieces[piece].link) {
        comm_.CountDirectBytes(d.send_pieces[piece].len);
      }
      return absl::OkStatus();
    case OpKind::kReceiptRecv:
      return OnReceipt(peer);
    case OpKind::kResendRecv:
      if (got != expect) {
        return comm_.Fail(absl::DataLossError(absl::StrCat("alltoallv: re-sent piece ", piece,
                                                           " from ", comm_.PeerName(peer), ": ",
                                                           got, " bytes, expected ", expect)));
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

// Progress until every request posted (including those posted on the way) is done.
absl::Status DynamicCall::Progress() {
  const absl::Time deadline = absl::Now() + comm_.timeout();
  size_t first_pending = 0;
  while (true) {
    bool progressed = false;
    size_t pending = SIZE_MAX;
    for (size_t i = first_pending; i < ops_.size(); ++i) {
      if (ops_[i].done) continue;
      if (any_lost_ && Abandoned(ops_[i])) {  // completes (or not) with the abort
        ops_[i].done = true;
        progressed = true;
        continue;
      }
      if (ops_[i].req && !ops_[i].req->Done()) {
        if (pending == SIZE_MAX) pending = i;
        continue;
      }
      ops_[i].done = true;
      progressed = true;
      RETURN_IF_ERROR(Handle(i));
    }
    while (first_pending < ops_.size() && ops_[first_pending].done) ++first_pending;
    if (first_pending == ops_.size()) return absl::OkStatus();
    if (progressed) continue;
    if (!defer_loss_) {
      RETURN_IF_ERROR(comm_.CheckUsable());
    } else if (!comm_.health().ok()) {
      RETURN_IF_ERROR(ScanForLoss());  // the failure's requests report it too
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      std::set<int> waiting;
      for (size_t i = first_pending; i < ops_.size(); ++i) {
        if (!ops_[i].done) waiting.insert(ops_[i].peer);
      }
      std::string names;
      for (int p : waiting) absl::StrAppend(&names, names.empty() ? "" : ", ", comm_.PeerName(p));
      return comm_.Fail(absl::DeadlineExceededError(
          absl::StrCat("alltoallv on rank ", me_, " timed out after ",
                       absl::FormatDuration(comm_.timeout()), " waiting for ", names)));
    }
    if (pending != SIZE_MAX) {
      (void)ops_[pending].req->Wait(std::min(left, absl::Milliseconds(2)));
    }
  }
}

// Static pairs: both ends check both directions (as alltoall.cc does).
absl::Status DynamicCall::CheckCounts() {
  for (int peer = 0; peer < n_; ++peer) {
    if (peer == me_ || comm_.dynamic(peer)) continue;
    if (theirs_[peer].sends != a_.recv_counts[peer] && count_error_.ok()) {
      count_error_ = absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: ", comm_.PeerName(peer), " sends ", theirs_[peer].sends,
          " bytes to rank ", me_, ", which expects ", a_.recv_counts[peer]));
    }
    if (theirs_[peer].expects != a_.send_counts[peer] && count_error_.ok()) {
      count_error_ = absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: rank ", me_, " sends ", a_.send_counts[peer], " bytes to ",
          comm_.PeerName(peer), ", which expects ", theirs_[peer].expects));
    }
  }
  return count_error_.ok() ? invalid_ : count_error_;
}

absl::Status AlltoallvDynamic(Communicator& comm, const AlltoallvArgs& args, uint64_t tag) {
  std::vector<PeerRouting> routing;
  std::vector<DirectLinks> offers =
      comm.BeginTransfer(kMaxLinks, &routing, args.send_counts, args.recv_counts);
  TransferScope scope(comm);  // after the call's requests are gone
  DynamicCall call(comm, args, tag);
  return call.Run(std::move(offers), routing);
}

}  // namespace mixnet::collectives::internal
