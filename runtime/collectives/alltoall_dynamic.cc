// alltoallv for a communicator with dynamic pairs (pairs that circuits may
// join; see communicator.h). Runs on the communicator's caller thread.
//
// Static pairs use the one-phase protocol of alltoall.cc unchanged on the
// wire (counts and data posted at once). A dynamic pair, per call:
//  1. header: each end sends a PairHeader (counts, the ids of the direct
//     links it offers now and its EPS share, see SetRouting) over EPS path 0;
//     nothing else is posted for the pair until the peer's header is in.
//  2. data: both ends take the intersection of the two offers (id order) and
//     cut each direction with SplitPair by that direction's sender's EPS
//     share: over the common links only (share 0, router v1: circuits
//     replace EPS for a pair they join), over links and EPS paths (router
//     v2's split), or over the EPS paths when no link is common. Both ends
//     compute the same pieces; piece i travels with tag base+64+i on its path.
//  3. loss: a piece receive that fails on a direct link kills the link (its
//     connection is destroyed first, so no late write lands), posts a receive
//     for the re-send (base+128+i, EPS path 0, same offset) and lists the
//     piece in the receipt. A failed direct send kills the link and waits for
//     the receipt. EPS failures abort the communicator as before.
//  4. receipts: when common links were used, each receiver sends each sender
//     a Receipt once its original piece receives are done; the sender
//     re-sends the listed pieces over EPS and completes only after the
//     receipt (and its re-sends) are done. Receipts and re-sends travel on
//     EPS, which is reliable, so one round suffices.
// The call is over when every request it posted has completed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::collectives::internal {
namespace {

enum class OpKind {
  kStaticRecv,  // counts or data of a static pair (expect: bytes, SIZE_MAX for counts)
  kStaticSend,
  kHeaderRecv,
  kHeaderSend,
  kPieceRecv,
  kPieceSend,
  kReceiptRecv,
  kReceiptSend,
  kResendRecv,
  kResendSend,
};

struct Op {
  std::unique_ptr<transport::Request> req;  // null when posting failed
  absl::Status post_error;
  int peer = 0;
  OpKind kind = OpKind::kStaticRecv;
  int piece = -1;
  size_t expect = SIZE_MAX;
  bool done = false;
};

struct Piece {
  size_t offset = 0;  // into the send or receive buffer
  size_t len = 0;
  std::shared_ptr<DirectLink> link;  // null: EPS path `eps`
  size_t eps = 0;
};

struct DynPair {
  PairHeader mine{};
  PairHeader theirs{};
  DirectLinks offered;
  DirectLinks common;
  std::vector<Piece> send_pieces, recv_pieces;
  size_t recv_left = 0;
  std::vector<uint32_t> missing;
  Receipt receipt_out{};
  Receipt receipt_in{};
};

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
                              const DirectLinks& common, double eps_share) {
  std::vector<double> eps_gbps, link_gbps;
  for (const PeerPath& p : eps) eps_gbps.push_back(p.path.gbps);
  for (const auto& l : common) link_gbps.push_back(l->path().gbps);
  std::vector<Piece> out;
  for (const PieceSpec& ps : SplitPair(offset, bytes, eps_gbps, link_gbps, eps_share)) {
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

}  // namespace

std::vector<PieceSpec> SplitPair(size_t offset, size_t bytes, const std::vector<double>& eps_gbps,
                                 const std::vector<double>& link_gbps, double eps_share) {
  std::vector<PieceSpec> out;
  auto add = [&](const std::vector<double>& gbps, size_t len, bool direct) {
    std::vector<size_t> sizes = SplitAcrossPaths(len, gbps);
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(PieceSpec{offset, sizes[i], direct, i});
      offset += sizes[i];
    }
  };
  if (link_gbps.empty()) {
    add(eps_gbps, bytes, false);
    return out;
  }
  if (!(eps_share > 0) || eps_gbps.empty()) {  // router v1 (or no EPS path)
    add(link_gbps, bytes, true);
    return out;
  }
  constexpr size_t kAlign = 4096;
  const double share = std::min(eps_share, 1.0);
  size_t on_eps = static_cast<size_t>(std::llround(static_cast<double>(bytes) * share /
                                                   static_cast<double>(kAlign))) *
                  kAlign;
  if (share >= 1.0 || on_eps > bytes) on_eps = bytes;
  add(link_gbps, bytes - on_eps, true);
  add(eps_gbps, on_eps, false);
  std::vector<PieceSpec> kept;
  for (const PieceSpec& p : out) {
    if (p.len > 0) kept.push_back(p);
  }
  if (kept.empty()) kept.push_back(out.front());
  return kept;
}

absl::Status AlltoallvDynamic(Communicator& comm, const AlltoallvArgs& a, uint64_t tag) {
  const int n = comm.size();
  const int me = comm.rank();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);

  std::vector<CountPair> mine(n), theirs(n);
  std::vector<DynPair> dyn(n);  // PairHeader is zero-initialised (padding included)
  std::vector<double> eps_share;
  std::vector<DirectLinks> offers = comm.BeginTransfer(kMaxLinks, &eps_share);
  TransferScope scope(comm);
  for (int peer = 0; peer < n; ++peer) dyn[peer].offered = std::move(offers[peer]);

  std::vector<Op> ops;
  ops.reserve(8 * n);
  auto add = [&](absl::StatusOr<std::unique_ptr<transport::Request>> r, int peer, OpKind kind,
                 int piece = -1, size_t expect = SIZE_MAX) {
    Op op;
    op.peer = peer;
    op.kind = kind;
    op.piece = piece;
    op.expect = expect;
    if (r.ok()) {
      op.req = *std::move(r);
    } else {
      op.post_error = r.status();
    }
    ops.push_back(std::move(op));
  };
  auto eps0 = [&](int peer) -> transport::Connection& {
    return *comm.paths_to(peer)[0].connection;
  };
  for (int peer = 0; peer < n; ++peer) {
    if (peer != me && comm.paths_to(peer).empty()) {
      return comm.health().ok() ? absl::InternalError("no path") : comm.health();
    }
  }

  // Receives first (counts/headers, and static data), then sends.
  for (int k = 1; k < n; ++k) {
    const int peer = (me - k + n) % n;
    std::vector<PeerPath>& paths = comm.paths_to(peer);
    if (comm.dynamic(peer)) {
      add(eps0(peer).Irecv(&dyn[peer].theirs, sizeof(PairHeader), tag + kTagCounts), peer,
          OpKind::kHeaderRecv);
      continue;
    }
    add(paths[0].connection->Irecv(&theirs[peer], sizeof(CountPair), tag + kTagCounts), peer,
        OpKind::kStaticRecv);
    std::vector<double> gbps;
    for (const PeerPath& p : paths) gbps.push_back(p.path.gbps);
    std::vector<size_t> pieces = SplitAcrossPaths(a.recv_counts[peer], gbps);
    size_t off = a.recv_displs[peer];
    for (size_t i = 0; i < paths.size(); ++i) {
      add(paths[i].connection->Irecv(recv + off, pieces[i], tag + kTagData), peer,
          OpKind::kStaticRecv, -1, pieces[i]);
      off += pieces[i];
    }
  }
  for (int k = 1; k < n; ++k) {
    const int peer = (me + k) % n;
    std::vector<PeerPath>& paths = comm.paths_to(peer);
    if (comm.dynamic(peer)) {
      DynPair& d = dyn[peer];
      d.mine.magic = kHeaderMagic;
      d.mine.sends = a.send_counts[peer];
      d.mine.expects = a.recv_counts[peer];
      d.mine.n_links = static_cast<uint32_t>(d.offered.size());
      d.mine.eps_share = peer < static_cast<int>(eps_share.size()) ? eps_share[peer] : 0.0;
      for (size_t i = 0; i < d.offered.size(); ++i) d.mine.links[i] = d.offered[i]->id();
      add(eps0(peer).Isend(&d.mine, sizeof(PairHeader), tag + kTagCounts), peer,
          OpKind::kHeaderSend);
      continue;
    }
    mine[peer] = CountPair{a.send_counts[peer], a.recv_counts[peer]};
    add(paths[0].connection->Isend(&mine[peer], sizeof(CountPair), tag + kTagCounts), peer,
        OpKind::kStaticSend);
    std::vector<double> gbps;
    for (const PeerPath& p : paths) gbps.push_back(p.path.gbps);
    std::vector<size_t> pieces = SplitAcrossPaths(a.send_counts[peer], gbps);
    size_t off = a.send_displs[peer];
    for (size_t i = 0; i < paths.size(); ++i) {
      add(paths[i].connection->Isend(send + off, pieces[i], tag + kTagData), peer,
          OpKind::kStaticSend);
      off += pieces[i];
    }
  }
  if (a.send_counts[me] > 0) {
    std::memmove(recv + a.recv_displs[me], send + a.send_displs[me], a.send_counts[me]);
  }

  absl::Status invalid;      // first InvalidArgument (count mismatch, short message)
  absl::Status count_error;  // first count mismatch (reported before `invalid`)
  auto note_invalid = [&](absl::Status s) {
    if (invalid.ok()) invalid = std::move(s);
  };
  auto note_count = [&](absl::Status s) {
    if (count_error.ok()) count_error = std::move(s);
  };

  // Posts the data pieces of dynamic pair `peer` once its header is in.
  auto start_pair = [&](int peer) -> absl::Status {
    DynPair& d = dyn[peer];
    if (d.theirs.magic != kHeaderMagic || d.theirs.n_links > kMaxLinks) {
      return comm.Fail(absl::DataLossError(
          absl::StrCat("alltoallv: malformed header from ", comm.PeerName(peer))));
    }
    if (d.theirs.sends != a.recv_counts[peer]) {
      note_count(absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: ", comm.PeerName(peer), " sends ", d.theirs.sends,
          " bytes to rank ", me, ", which expects ", a.recv_counts[peer])));
    }
    if (d.theirs.expects != a.send_counts[peer]) {
      note_count(absl::InvalidArgumentError(
          absl::StrCat("alltoallv: count mismatch: rank ", me, " sends ", a.send_counts[peer],
                       " bytes to ", comm.PeerName(peer), ", which expects ", d.theirs.expects)));
    }
    // Both ends see the same mismatch: neither moves data for the pair.
    if (d.theirs.sends != a.recv_counts[peer] || d.theirs.expects != a.send_counts[peer]) {
      return absl::OkStatus();
    }
    std::set<uint64_t> offered_by_peer(d.theirs.links, d.theirs.links + d.theirs.n_links);
    for (const auto& l : d.offered) {
      if (offered_by_peer.count(l->id())) d.common.push_back(l);
    }
    const std::vector<PeerPath>& eps = comm.paths_to(peer);
    if (d.common.size() > kMaxPieces) d.common.resize(kMaxPieces);
    if (!(d.theirs.eps_share >= 0 && d.theirs.eps_share <= 1)) {
      return comm.Fail(absl::DataLossError(absl::StrCat(
          "alltoallv: header from ", comm.PeerName(peer), " has EPS share ", d.theirs.eps_share)));
    }
    // Each direction is cut by its sender's weights.
    d.recv_pieces =
        MakePieces(a.recv_displs[peer], a.recv_counts[peer], eps, d.common, d.theirs.eps_share);
    d.send_pieces =
        MakePieces(a.send_displs[peer], a.send_counts[peer], eps, d.common, d.mine.eps_share);
    d.recv_left = d.recv_pieces.size();
    if (!d.common.empty()) {
      add(eps0(peer).Irecv(&d.receipt_in, sizeof(Receipt), tag + kTagReceipt), peer,
          OpKind::kReceiptRecv);
    }
    for (size_t i = 0; i < d.recv_pieces.size(); ++i) {
      const Piece& p = d.recv_pieces[i];
      const uint64_t t = tag + kTagPiece + i;
      add(p.link ? p.link->Irecv(recv + p.offset, p.len, t)
                 : eps[p.eps].connection->Irecv(recv + p.offset, p.len, t),
          peer, OpKind::kPieceRecv, static_cast<int>(i), p.len);
    }
    for (size_t i = 0; i < d.send_pieces.size(); ++i) {
      const Piece& p = d.send_pieces[i];
      const uint64_t t = tag + kTagPiece + i;
      add(p.link ? p.link->Isend(send + p.offset, p.len, t)
                 : eps[p.eps].connection->Isend(send + p.offset, p.len, t),
          peer, OpKind::kPieceSend, static_cast<int>(i));
    }
    return absl::OkStatus();
  };

  // One completed request.
  auto handle = [&](size_t index) -> absl::Status {
    const int peer = ops[index].peer;
    const OpKind kind = ops[index].kind;
    const int piece = ops[index].piece;
    const size_t expect = ops[index].expect;
    absl::Status s = ops[index].req ? ops[index].req->status() : ops[index].post_error;
    const size_t got = ops[index].req && s.ok() ? ops[index].req->bytes() : 0;
    DynPair& d = dyn[peer];
    const bool direct_piece =
        (kind == OpKind::kPieceRecv || kind == OpKind::kPieceSend) &&
        (kind == OpKind::kPieceRecv ? d.recv_pieces : d.send_pieces)[piece].link != nullptr;
    if (!s.ok() && !direct_piece) {
      if (kind == OpKind::kStaticRecv && s.code() == absl::StatusCode::kInvalidArgument) {
        note_invalid(s);
        return absl::OkStatus();
      }
      return comm.Fail(s);
    }
    switch (kind) {
      case OpKind::kStaticRecv:
        if (expect != SIZE_MAX && got != expect) {
          note_invalid(absl::InvalidArgumentError(absl::StrCat("alltoallv: ", comm.PeerName(peer),
                                                               " delivered ", got,
                                                               " bytes, expected ", expect)));
        }
        return absl::OkStatus();
      case OpKind::kHeaderRecv:
        return start_pair(peer);
      case OpKind::kPieceRecv: {
        const Piece& p = d.recv_pieces[piece];
        if (s.ok() && got != p.len) {
          s = absl::DataLossError(absl::StrCat("piece ", piece, " from ", comm.PeerName(peer), ": ",
                                               got, " bytes, expected ", p.len));
          if (!p.link) return comm.Fail(s);
        }
        if (!s.ok()) {
          // Close the dead connection first: after this no late write lands.
          log::Info("rank {}: piece {} from {} lost on {}; asking for it over EPS: {}", me, piece,
                    comm.PeerName(peer), p.link->path().local_nic, s.ToString());
          p.link->Kill(s);
          d.missing.push_back(static_cast<uint32_t>(piece));
          add(eps0(peer).Irecv(recv + p.offset, p.len, tag + kTagResend + piece), peer,
              OpKind::kResendRecv, piece, p.len);
        }
        if (--d.recv_left == 0 && !d.common.empty()) {
          d.receipt_out.magic = kReceiptMagic;
          d.receipt_out.n_missing = static_cast<uint32_t>(d.missing.size());
          std::copy(d.missing.begin(), d.missing.end(), d.receipt_out.missing);
          add(eps0(peer).Isend(&d.receipt_out, sizeof(Receipt), tag + kTagReceipt), peer,
              OpKind::kReceiptSend);
        }
        return absl::OkStatus();
      }
      case OpKind::kPieceSend:
        if (!s.ok()) {
          d.send_pieces[piece].link->Kill(s);  // the receipt names what to re-send
        } else if (d.send_pieces[piece].link) {
          comm.CountDirectBytes(d.send_pieces[piece].len);
        }
        return absl::OkStatus();
      case OpKind::kReceiptRecv: {
        const Receipt& r = d.receipt_in;
        if (r.magic != kReceiptMagic || r.n_missing > d.send_pieces.size()) {
          return comm.Fail(absl::DataLossError(
              absl::StrCat("alltoallv: malformed receipt from ", comm.PeerName(peer))));
        }
        for (uint32_t k = 0; k < r.n_missing; ++k) {
          const uint32_t m = r.missing[k];
          if (m >= d.send_pieces.size() || !d.send_pieces[m].link) {
            return comm.Fail(absl::DataLossError(
                absl::StrCat("alltoallv: ", comm.PeerName(peer), " asks again for piece ", m,
                             ", which did not travel on a direct path")));
          }
          const Piece& p = d.send_pieces[m];
          p.link->Kill(absl::UnavailableError(
              absl::StrCat(comm.PeerName(peer), " lost piece ", m, " on this link")));
          add(eps0(peer).Isend(send + p.offset, p.len, tag + kTagResend + m), peer,
              OpKind::kResendSend, static_cast<int>(m));
          comm.CountResent();
        }
        return absl::OkStatus();
      }
      case OpKind::kResendRecv:
        if (got != expect) {
          return comm.Fail(absl::DataLossError(absl::StrCat("alltoallv: re-sent piece ", piece,
                                                            " from ", comm.PeerName(peer), ": ",
                                                            got, " bytes, expected ", expect)));
        }
        return absl::OkStatus();
      case OpKind::kStaticSend:
      case OpKind::kHeaderSend:
      case OpKind::kReceiptSend:
      case OpKind::kResendSend:
        return absl::OkStatus();
    }
    return absl::OkStatus();
  };

  // Progress until every request posted (including those posted on the way) is done.
  const absl::Time deadline = absl::Now() + comm.timeout();
  size_t first_pending = 0;
  while (true) {
    bool progressed = false;
    size_t pending = SIZE_MAX;
    for (size_t i = first_pending; i < ops.size(); ++i) {
      if (ops[i].done) continue;
      if (ops[i].req && !ops[i].req->Done()) {
        if (pending == SIZE_MAX) pending = i;
        continue;
      }
      ops[i].done = true;
      progressed = true;
      absl::Status s = handle(i);
      if (!s.ok()) return s;
    }
    while (first_pending < ops.size() && ops[first_pending].done) ++first_pending;
    if (first_pending == ops.size()) break;
    if (progressed) continue;
    RETURN_IF_ERROR(comm.CheckUsable());
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      std::set<int> waiting;
      for (size_t i = first_pending; i < ops.size(); ++i) {
        if (!ops[i].done) waiting.insert(ops[i].peer);
      }
      std::string names;
      for (int p : waiting) absl::StrAppend(&names, names.empty() ? "" : ", ", comm.PeerName(p));
      return comm.Fail(absl::DeadlineExceededError(
          absl::StrCat("alltoallv on rank ", me, " timed out after ",
                       absl::FormatDuration(comm.timeout()), " waiting for ", names)));
    }
    if (pending != SIZE_MAX) {
      (void)ops[pending].req->Wait(std::min(left, absl::Milliseconds(2)));
    }
  }

  // Static pairs: both ends check both directions (as alltoall.cc does).
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me || comm.dynamic(peer)) continue;
    if (theirs[peer].sends != a.recv_counts[peer]) {
      note_count(absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: ", comm.PeerName(peer), " sends ", theirs[peer].sends,
          " bytes to rank ", me, ", which expects ", a.recv_counts[peer])));
    }
    if (theirs[peer].expects != a.send_counts[peer]) {
      note_count(absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: rank ", me, " sends ", a.send_counts[peer], " bytes to ",
          comm.PeerName(peer), ", which expects ", theirs[peer].expects)));
    }
  }
  return count_error.ok() ? invalid : count_error;
}

}  // namespace mixnet::collectives::internal
