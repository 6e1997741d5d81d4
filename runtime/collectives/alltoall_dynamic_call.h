// One alltoallv call on a communicator with dynamic pairs: the state of the
// protocol described in alltoall_dynamic.cc (headers, pieces, receipts,
// re-sends) and alltoall_relay.cc (router v2's two-hop relays). Private to
// the collectives library; lives on the caller thread for one call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/collectives/communicator.h"

namespace mixnet::collectives::internal {

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
  kRelaySend,        // origin -> relay: chunk of relay_out_[piece]
  kForwardRecv,      // relay: chunk of forwards_[piece] from its origin
  kForwardSend,      // relay: the same chunk on to the destination
  kRelayRecv,        // destination: chunk of relay_in_[piece] from its relay
  kRelayResendSend,  // origin -> destination over EPS: relay_out_[piece] again
  kRelayResendRecv,  // destination: relay_in_[piece] again, over EPS
  kPullAsk,          // receiver: a PullRequest sent on path `piece`
  kPullRecv,         // receiver: the bytes it asked for on path `piece`
  kPullServe,        // sender: a PullRequest received on path `piece`
  kPullSend,         // sender: the bytes asked for, on path `piece`
};

struct Op {
  std::unique_ptr<transport::Request> req;  // null when posting failed
  absl::Status post_error;
  int peer = 0;
  OpKind kind = OpKind::kStaticRecv;
  int piece = -1;
  size_t chunk = 0;  // relay kinds: chunk index; pull kinds: offset in the block
  size_t expect = SIZE_MAX;
  std::shared_ptr<DirectLink> link;  // relay kinds: the direct link used (null: EPS)
  bool done = false;
};

struct Piece {
  size_t offset = 0;  // into the send or receive buffer
  size_t len = 0;
  std::shared_ptr<DirectLink> link;  // null: EPS path `eps`
  size_t eps = 0;
};

// Receiver-paced pieces (alltoall_pull.cc). One path of a paced direction:
// a piece's path (its planned share to ask for, in block order), or EPS path
// 0 added for re-asking what a dead direct link did not deliver.
struct PullRange {
  uint64_t offset = 0;  // in the non-relayed part of the block
  uint64_t len = 0;
};
struct PullPath {
  std::shared_ptr<DirectLink> link;  // null: EPS path `eps`
  size_t eps = 0;
  bool may_take = false;       // a direct link with a share: may take over others'
  bool dead = false;           // its direct link died
  bool closed = false;         // receiver: END sent; sender: END (or a failure) received
  std::deque<PullRange> todo;  // receiver: not yet asked for
  uint64_t todo_bytes = 0;
  uint64_t planned = 0;  // its share of the plan (receiver)
  size_t asked = 0;      // asks outstanding
  uint64_t asked_bytes = 0;
  uint64_t done_bytes = 0;
  // Receiver: when its first and last asked pieces arrived, and the bytes
  // by the first: the rate it delivers is measured between the two.
  size_t arrivals = 0;
  uint64_t first_arrival_bytes = 0;
  absl::Time first_arrival, last_arrival;
  PullRequest in{};  // sender: the request being received
};
struct Pull {
  bool on = false;
  uint64_t base = 0;   // the block's displacement in the call's buffer
  uint64_t total = 0;  // non-relayed bytes
  uint64_t done = 0;   // receiver: bytes arrived
  size_t chunk = 0;    // receiver: the smallest piece it asks for
  bool finished = false;
  std::vector<PullPath> paths;
  std::deque<PullRequest> asks;  // receiver: buffers of the requests sent
};

struct DynPair {
  PairHeader mine{};
  PairHeader theirs{};
  bool header_in = false;
  bool mismatch = false;  // counts disagree: no data moves for the pair
  DirectLinks offered;
  DirectLinks common;
  std::vector<Piece> send_pieces, recv_pieces;
  std::vector<size_t> relay_out;  // indices into relay_out_, header order
  std::vector<size_t> relay_in;   // indices into relay_in_, header order
  size_t recv_left = 0;           // piece receives and relay chunks to go
  bool receipt_due = false;       // send the peer a receipt when recv_left hits 0
  std::vector<uint32_t> missing;
  Receipt receipt_out{};
  Receipt receipt_in{};
  Pull pull_in;   // this rank paces the peer's bytes to it
  Pull pull_out;  // the peer paces this rank's bytes to it
};

// This rank as the origin of a relay piece: `len` bytes of the block to
// `dest` at `offset` of the send buffer, through rank `relay`.
struct RelayOut {
  int dest = -1;
  int relay = -1;
  uint32_t chunk = 0;
  uint64_t len = 0;
  size_t offset = 0;
  bool posted = false;
};

// This rank as a relay: `len` bytes from `origin` on to `dest`, chunk by
// chunk through buffers of the call's pool.
struct Forward {
  int origin = -1;
  int dest = -1;
  uint32_t chunk = 0;
  uint64_t len = 0;
  size_t chunks = 0;
  size_t next_recv = 0;                               // next chunk to post a receive for
  size_t next_send = 0;                               // next chunk to forward
  size_t in_flight = 0;                               // chunks holding a buffer
  std::map<size_t, std::unique_ptr<char[]>> buffers;  // chunk -> its buffer
  std::vector<size_t> got;                            // bytes received per chunk
  std::vector<bool> received;
  bool dropped = false;  // origin or destination lost
};

// This rank as the destination of relay piece `index` (in the origin's
// header) from `origin` through `relay`, landing at `offset` of the receive
// buffer. `drain`: the pair's counts disagree; the origin sends empty chunks.
struct RelayIn {
  int origin = -1;
  int relay = -1;
  size_t index = 0;
  uint32_t chunk = 0;
  uint64_t len = 0;
  size_t offset = 0;
  size_t left = 0;  // chunks to go
  bool drain = false;
  bool posted = false;
  bool missing = false;
};

class DynamicCall {
 public:
  DynamicCall(Communicator& comm, const AlltoallvArgs& args, uint64_t tag);
  // `offers` and `routing`: what Communicator::BeginTransfer gave the call.
  absl::Status Run(std::vector<DirectLinks> offers, const std::vector<PeerRouting>& routing);

 private:
  // alltoall_dynamic.cc
  void Add(absl::StatusOr<std::unique_ptr<transport::Request>> r, int peer, OpKind kind,
           int piece = -1, size_t expect = SIZE_MAX, size_t chunk = 0,
           std::shared_ptr<DirectLink> link = nullptr);
  transport::Connection& Eps0(int peer) { return *comm_.paths_to(peer)[0].connection; }
  void PostStatic(int peer, bool recv);
  absl::Status OnHeader(int peer);
  absl::Status Handle(size_t index);
  absl::Status OnReceipt(int peer);
  // A receive of `peer`'s data finished (piece or relay chunk): counts it and
  // sends the receipt after the last one.
  void ReceiveDone(int peer);
  absl::Status Progress();
  absl::Status CheckCounts();

  // Loss of a member (alltoall_dynamic.cc): `status` ended an op with
  // `peer`. With relays planned the call goes on without the peer (its ops,
  // and relay traffic it is the origin, relay or destination of, are no
  // longer waited for); otherwise, or for an error that is no loss, the
  // communicator fails as before.
  absl::Status Lost(int peer, const absl::Status& status);
  bool IsLost(int peer) const { return !lost_[peer].ok(); }
  // The call no longer waits for `op` (a lost member takes part in it).
  bool Abandoned(const Op& op) const;
  // Loses every peer whose EPS connection has failed (a member that died
  // while this rank had nothing posted with it).
  absl::Status ScanForLoss();
  // The error the call reports for its lost members (a member that died
  // before one that aborted because of it).
  absl::Status LossToReport() const;

  // alltoall_pull.cc
  // `peer`'s header is in and the direction is paced: sets up the paths of
  // `d.pull_in` (this rank receives) or `d.pull_out` (this rank sends) from
  // the pieces, and posts what can go.
  void StartPullIn(int peer, const std::vector<Piece>& pieces);
  void StartPullOut(int peer, const std::vector<Piece>& pieces);
  absl::Status HandlePull(const Op& op, const absl::Status& s, size_t got);
  // Receiver: asks every path for what it may have; after the last byte,
  // ends every path and counts the pair's receive as done.
  void PumpPull(int peer);
  // Receiver: the next range path `i` asks for, taking over part of a
  // slower path's share when its own is done; empty when none.
  std::optional<PullRange> NextPullRange(Pull& p, size_t i);
  // Receiver: the direct link of path `i` died: its share, and what it had
  // been asked for, go to EPS.
  void PullPathDied(int peer, size_t i, const absl::Status& why);
  // Posts on path's link or EPS connection: a send of `send`, else a
  // receive into `recv`.
  absl::StatusOr<std::unique_ptr<transport::Request>> PostPull(int peer, const PullPath& path,
                                                               const void* send, void* recv,
                                                               size_t len, uint64_t tag);

  // alltoall_relay.cc
  // Before the headers go: picks this rank's relay pieces from the routing
  // (BeginTransfer) and writes them into the headers to destinations and
  // relays; sets each header's EPS share.
  void PlanRelays(const std::vector<PeerRouting>& routing);
  // `peer`'s header is in: checks its relay lists and records the forwards
  // and relay pieces it announces.
  absl::Status OnRelayHeader(int peer);
  // Posts whatever relay traffic the headers in so far allow.
  void PumpRelays();
  absl::Status HandleRelay(const Op& op, const absl::Status& s, size_t got);
  // The relay of relay_in_[i] is lost: the chunks not yet in are asked for
  // again from the origin over EPS, as for a relay hop cut.
  void DropRelayIn(size_t i);
  // A forward's origin or destination is lost: its buffers stop counting
  // against the budget (they are freed with the call, after the abort).
  void DropForward(Forward& f);
  // The link relay chunk `chunk` to or from `peer` uses: the pair's common
  // links in turn, else EPS path 0 (null). Both ends pick the same once
  // both headers are in.
  std::shared_ptr<DirectLink> RelayLink(int peer, size_t chunk) const;
  absl::StatusOr<std::unique_ptr<transport::Request>> PostRelay(
      int peer, const std::shared_ptr<DirectLink>& link, bool send, void* buf, size_t len,
      uint64_t tag);
  std::unique_ptr<char[]> TakeBuffer(size_t len);
  void GiveBuffer(size_t len, std::unique_ptr<char[]> buf);

  Communicator& comm_;
  const AlltoallvArgs& a_;
  const uint64_t tag_;
  const int n_;
  const int me_;
  const char* send_;
  char* recv_;
  std::vector<CountPair> mine_, theirs_;
  std::vector<DynPair> dyn_;
  std::vector<RelayOut> relay_out_;
  std::vector<Forward> forwards_;
  std::vector<RelayIn> relay_in_;
  // Forwarding buffers: bytes held now, the budget, and freed buffers by size.
  size_t relay_held_ = 0;
  size_t relay_budget_ = 0;
  std::multimap<size_t, std::unique_ptr<char[]>> free_buffers_;
  char drain_byte_ = 0;
  absl::Status invalid_;            // first InvalidArgument (count mismatch, short message)
  absl::Status count_error_;        // first count mismatch (reported before `invalid_`)
  const bool defer_loss_;           // relays planned: survivors finish the call
  std::vector<absl::Status> lost_;  // per peer: why it was lost (OK: not lost)
  bool any_lost_ = false;
  // Last: requests go before the buffers they point into.
  std::vector<Op> ops_;
};

}  // namespace mixnet::collectives::internal
