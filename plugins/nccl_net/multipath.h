// Multipath NCCL comms (router v2 in the plugin): a comm running over a
// circuit splits each large part over that lane and its home EPS lane by
// router v2's EPS share for its peer host (PathMover::EpsShare), as the
// runtime's collectives split a pair's bytes (collectives::internal::SplitPair:
// round(bytes x share) to 4 KiB on EPS, the rest on the circuit).
//
// The split rule, and how the receiver knows it without knowing the size
// (an NCCL receive is only an upper bound of what the sender sends):
//  * A lane is a split lane when its LanePath::split_min_bytes M > 0. The
//    sender decides it when it moves the comm onto the lane (MOVE carries
//    it; path_mover.h), so for every part both ends know whether its primary
//    lane splits: the move protocol's per-tag switch point tells which lane
//    each part number is on. Router v1 and comms without a routing never get
//    a split lane: they run exactly as before.
//  * On a split lane the sender cuts a part of S >= M bytes into a primary
//    piece [0, a) on the lane and a second piece [a, S) on home (tag | bit
//    62), with a = max(SplitPair's circuit bytes, M). With the pieces it
//    sends a 32-byte split header (tag, part number, a, S - a) on home under
//    kSplitHeaderTag. Parts below M go whole on the lane, with no header.
//    So: a part has a header exactly when its primary piece on a split lane
//    is at least M bytes (also when S - a is 0: no second piece).
//  * The receiver posts the primary receive (its whole buffer) on the lane
//    as before, and keeps one header receive posted on home. A header names
//    its part (tag, number); the second receive (buffer + a, the rest of
//    the buffer) is posted as soon as both the header and the part are
//    there (headers often come before the part is posted). A part is done
//    when its primary piece is in and, if that piece is >= M bytes, its
//    header and second piece are too; its size is a + (S - a).
//  One-way: the sender tells, no round trip per message.
// Striped lanes: when router v2 gives a host pair several circuits, a comm's
// lane runs over all of them (LanePath::stripes: one connection per further
// circuit). A split part's primary piece [0, a) is then cut over the lane's
// connections by the circuits' rates, 4 KiB-aligned (StripeCut): [0, a0) on
// the lane's own connection, where a0 >= M (so the receiver still tells a
// split part by the size of what arrives there), then each stripe's piece in
// stripe order. The receiver computes the same cut from the header's `a`
// and posts the stripe pieces with the second one. Parts below M stay whole
// on the lane's own connection. The stripes belong to the primary: a
// receiver counts a part arrived only with every stripe piece in, and a
// failover re-sends the whole primary [0, a) on home (the stripe pieces of
// parts moved to home are dropped).
// Order: primary pieces of a tag run in part order on their lanes (FIFO as
// before); headers in the sender's order on home; second pieces under their
// own tag on home, posted by the receiver in part order (headers come in
// order, parts are posted in order). NCCL's matching is unchanged.
// Failover (lane_recovery.h): the primary piece is what a failover re-posts
// and re-sends (Request::parts/data/sizes); headers and second pieces are on
// home, which survives, so a cut loses nothing of them. Parts that only one
// end had posted when the lane died are posted by the other later, on home,
// where nothing splits; so a comm that has had split lanes ends a failover
// with RESENT (sender -> receiver, after its re-sends): the sender's per-tag
// counts (the receiver's re-posted parts from those on come whole) and the
// parts from the receiver's counts on that the sender split (the receiver,
// which waits for RESENT before posting again, expects their headers).
// Threads: whoever holds the comm's mutex (NCCL's proxy threads, the mover
// thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "plugins/nccl_net/lane.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

struct Comm;
struct Request;

inline constexpr uint32_t kSplitMagic = 0x4D585350u;  // "MXSP"

// On the wire in host byte order (both ends run the same plugin build).
struct SplitHeader {
  uint32_t magic = kSplitMagic;
  uint32_t tag = 0;      // the NCCL tag
  uint64_t seq = 0;      // the part's number within its tag
  uint64_t primary = 0;  // bytes on the primary lane, from offset 0
  uint64_t second = 0;   // bytes on home, from offset `primary`
};
static_assert(sizeof(SplitHeader) == kSplitHeaderBytes);

// The split state of one part of a Request.
struct SplitPart {
  uint64_t min_bytes = 0;        // the primary lane's split_min_bytes when posted (0: never split)
  bool header_expected = false;  // receiver: RESENT named this part as split
  SplitHeader header;            // sender: the one sent (its buffer); receiver: the one received
  bool has_header = false;
  std::unique_ptr<transport::Request> header_send;  // sender
  std::unique_ptr<transport::Request> second;       // the second piece, on home
  size_t second_bytes = 0;                          // sender: bytes of the second piece
  // Striped lanes: the pieces on the lane's stripes (entry j on stripe j;
  // null where the cut gives it nothing), while the part is on that lane.
  std::vector<std::unique_ptr<transport::Request>> stripes;
  bool stripes_posted = false;  // receiver: posted (with the second piece)
  size_t stripe_bytes = 0;      // sender: bytes on the stripes
  absl::Status stripe_error;    // sender: a stripe piece that could not be posted
};

// Per comm: parts split over two lanes and their bytes on each.
struct SplitCounters {
  uint64_t parts = 0;
  uint64_t primary_bytes = 0;
  uint64_t home_bytes = 0;
  uint64_t stripe_bytes = 0;  // of primary_bytes, those on striped lanes' further circuits
};

// How a part of `size` bytes is cut on a lane splitting from `min_bytes`
// with EPS share `eps_share`. Pure.
struct SplitPlan {
  size_t primary = 0;
  size_t second = 0;
  bool header = false;
};
SplitPlan PlanSplit(size_t size, uint64_t min_bytes, double eps_share);
// How a primary piece of `bytes` is cut over a lane's connections (entry 0:
// its own, from offset 0; entry j: stripe j - 1, each after the one before),
// by the rates `gbps` (entry 0 the lane's circuit): each stripe gets its
// share rounded down to 4 KiB, and when that would leave entry 0 below
// `min_bytes` the stripes share what lies above min_bytes instead. Rates
// that are all 0 count as equal. Pure.
std::vector<size_t> StripeCut(size_t bytes, const std::vector<double>& gbps, uint64_t min_bytes);
// The rates of `path`'s connections: its circuit's, then its stripes'.
std::vector<double> StripeRates(const LanePath& path);

// Sender: posts part i of `r` (described; lane r.lanes[i]) whole or split:
// the primary on the lane first (when that fails nothing is out), then the
// header and second piece on home (when those fail the comm has failed).
// r.sizes[i] becomes the primary's bytes.
absl::Status PostSendPart(Comm& c, Request& r, int i, double eps_share);
// Receiver: posts part i's primary receive and, when its header is in, the
// second piece.
absl::Status PostRecvPart(Comm& c, Request& r, int i);
// Receiver: part i could not be posted on its guarded lane (lost with the
// lane): records it as failed there with the split state PostRecvPart gives
// it, so a failover re-posts it on home like a part lost in flight.
absl::Status FailRecvPart(Comm& c, Request& r, int i, absl::Status why);
// Receiver: part i's split state once its primary is out (PostRecvPart,
// FailRecvPart): whether a header is due, and the header and second piece
// when the header is already in.
absl::Status AttachSplit(Comm& c, Request& r, int i);
// Receiver: takes the headers that arrived on home and posts second pieces.
void PollSplitHeaders(Comm& c);
// Whether part i's split pieces are over (true for a part that is not split;
// a receiver's primary must be done). A failed comm changes nothing here: a
// piece still posted keeps the part open until it ends (lane_recovery.h).
bool SplitDone(const Comm& c, const Request& r, int i);
// Part i's bytes beyond its primary piece, and the first error of its split
// pieces: one that failed, or one that never came (a comm that failed while
// its header was due); OK when the part is whole.
size_t SplitExtraBytes(const Comm& c, const Request& r, int i);
absl::Status SplitStatus(const Comm& c, const Request& r, int i);
// What test reports for a complete request: the first part's error (a size
// refusal as OutOfRange: NCCL's size mismatch), and into `sizes` (nullable)
// each part's bytes: its pieces', or a send's whole size when it arrived
// over a lane closed since.
absl::Status RequestResult(const Comm& c, const Request& r, int* sizes);
// Striped lanes. Receiver: whether part i's stripe pieces are all over
// (true for a part with none, or not split); a failover re-posts a part on
// home unless its primary and these arrived.
bool StripesArrived(const Request& r, int i);
// Either end: the first failure of part i's stripe pieces (a lane failing:
// the caller fails over), OK when none failed (yet).
absl::Status StripeFailure(const Request& r, int i);
// Part i moves to home (re-posted or re-sent whole there, or delivered):
// its stripe pieces no longer count.
void DropStripes(Request& r, int i);
// "split 40 part(s): 31457280 bytes on their lanes, 10485760 on home".
std::string DescribeSplit(const SplitCounters& s);

}  // namespace mixnet::nccl
