// Internals shared by alltoall.cc and alltoall_dynamic.cc: the tag layout and
// wire structs of one alltoallv call. Caller thread only.
//
// Tag layout (base = Communicator::NextCollectiveTag() = seq << 16, so each
// call owns 65536 tags):
//   base + 1              counts: CountPair (static pairs) or PairHeader
//                         (dynamic pairs), on the pair's fixed path 0
//   base + 2              data, static pairs: one piece per fixed path
//   base + 3              Receipt, dynamic pairs that use direct paths or
//                         relays: receiver -> sender, on EPS path 0
//   base + 4              PullRequest, receiver -> sender, on each path of a
//                         pair the receiver paces (alltoall_pull.cc)
//   base + 5              the data a PullRequest asked for, on the same path
//   base + 64 + i         data piece i of a dynamic pair (i < 64), on the
//                         piece's own path (EPS path or direct link)
//   base + 128 + i        re-send of piece i over EPS path 0 (i < 64)
//   base + 192 + j        re-send of relay piece j over EPS path 0 (j < 8)
//   base + 0x4000 + d     relay chunks origin -> relay for destination rank d
//   base + 0x8000 + o     relay chunks relay -> destination from origin rank o
// (relays need world size <= 0x4000). Tags below 1 << 16 are the
// communicator's own (1: a resumed direct link's probe, communicator_topology.cc). A piece is
// identified by (collective tag base, pair, index) and always lands at the same offset of the
// receive buffer, so a re-send of a piece that partly arrived over a dead circuit (or through a
// relay) overwrites it with the same bytes: each piece is delivered exactly once as far as the
// caller can tell.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/collectives/alltoall.h"

namespace mixnet::collectives::internal {

inline constexpr uint64_t kTagCounts = 1;
inline constexpr uint64_t kTagData = 2;
inline constexpr uint64_t kTagReceipt = 3;
inline constexpr uint64_t kTagPullRequest = 4;
inline constexpr uint64_t kTagPullData = 5;
inline constexpr uint64_t kTagPiece = 64;
inline constexpr uint64_t kTagResend = 128;
inline constexpr uint64_t kTagRelayResend = 192;
inline constexpr uint64_t kTagRelayIn = 0x4000;
inline constexpr uint64_t kTagRelayOut = 0x8000;
inline constexpr int kMaxRelayWorld = 0x4000;
inline constexpr size_t kMaxLinks = 16;     // direct links listed in a header
inline constexpr size_t kMaxPieces = 64;    // EPS paths + direct links of a pair
inline constexpr size_t kMaxRelays = 8;     // relay pieces of one origin -> destination
inline constexpr size_t kMaxForwards = 32;  // streams an origin asks one relay to forward

struct CountPair {
  uint64_t sends;    // bytes this rank sends to the peer
  uint64_t expects;  // bytes this rank expects from the peer
};

// A relay piece (in `relays`: this origin sends `len` bytes to the header's
// receiver through rank `rank`) or a forward (in `forwards`: the header's
// receiver, a relay, forwards `len` bytes from this origin to rank `rank`),
// moved in chunks of `chunk` bytes (the origin's setting, so all three ends
// cut the same chunks).
struct RelayEntry {
  uint32_t rank;
  uint32_t chunk;
  uint64_t len;
};

// Dynamic pairs: counts plus the direct links (DirectLink::id) the sender
// considers usable for this call. Both ends use the intersection. `eps_share`
// is the share of the sender's non-relayed bytes that go over EPS when the
// intersection is not empty (router v2's weights; 0 under v1): the receiver
// cuts its pieces by the sender's share, so ends with different routers
// interoperate. The last sum(relays.len) bytes of the sender's block travel
// through the relays, in list order (see alltoall_relay.h). `pull_chunk`:
// non-zero when the header's sender, as the receiver of the other
// direction, paces it (alltoall_pull.cc) with pieces of at least that size.
inline constexpr uint32_t kHeaderMagic = 0x4D584834u;  // "MXH4" (v4: receiver-paced pieces)
struct PairHeader {
  uint32_t magic;
  uint32_t n_links;
  uint64_t sends;
  uint64_t expects;
  double eps_share;
  uint32_t pull_chunk;
  uint32_t reserved;
  uint64_t links[kMaxLinks];
  uint32_t n_relays;
  uint32_t n_forwards;
  RelayEntry relays[kMaxRelays];
  RelayEntry forwards[kMaxForwards];
};

// The pieces of `bytes` at `offset` for one direction of a dynamic pair
// (pure; both ends compute the same list). No common link: split over the EPS
// paths by speed. Common links and eps_share 0 (router v1): over the links by
// speed. Otherwise round(bytes x eps_share) to 4 KiB goes over the EPS paths
// and the rest over the links, each by speed; empty pieces are left out (one
// is kept when bytes is 0). `eps_gbps` / `link_gbps`: the paths' speeds;
// `first`: SplitAcrossPaths' turn for pages left over (PairSplitFirst).
struct PieceSpec {
  size_t offset = 0;
  size_t len = 0;
  bool direct = false;  // on common link `index`, else on EPS path `index`
  size_t index = 0;
};
std::vector<PieceSpec> SplitPair(size_t offset, size_t bytes, const std::vector<double>& eps_gbps,
                                 const std::vector<double>& link_gbps, double eps_share,
                                 size_t first = 0);

// Router v2 relays (pure; every end computes the same). The origin of `bytes`
// to one destination with `eps_share` of them over EPS and `relay_shares`
// through relays: each relay gets round(bytes x share) to 4 KiB (while bytes
// are left), and `rest_eps_share` is the EPS share of the bytes that are not
// relayed, so that SplitPair over them puts about bytes x eps_share on EPS.
struct RelayCut {
  std::vector<uint64_t> lens;  // per relay share, in order (0: not relayed)
  double rest_eps_share = 0;
};
RelayCut CutRelays(uint64_t bytes, double eps_share, const std::vector<double>& relay_shares);
// Chunks of a relay piece: ceil(len / chunk), and the length of chunk k.
size_t RelayChunkCount(uint64_t len, uint32_t chunk);
size_t RelayChunkLen(uint64_t len, uint32_t chunk, size_t k);
// Chunks a relay keeps in flight per stream it forwards (within its
// relay buffer budget, CommunicatorOptions::relay_buffer_bytes).
inline constexpr size_t kMaxForwardDepth = 8;

// Receiver-paced pieces (alltoall_pull.cc): the receiver asks the sender,
// on one path, for `len` bytes at `offset` of the non-relayed part of the
// sender's block, or (end = 1) says that it asks for nothing more on it.
inline constexpr uint32_t kPullMagic = 0x4D585031u;  // "MXP1"
struct PullRequest {
  uint32_t magic;
  uint32_t end;
  uint64_t offset;
  uint64_t len;
};
// Asks a path keeps outstanding.
inline constexpr size_t kPullDepth = 2;
// A path takes over part of another's share only when the other delivers
// its share at under this fraction of the pace the taker delivers its own
// (rates over planned shares): a lag the plan did not expect, not the
// noise of TCP on healthy links, where taking over cost up to 10% (the
// route bench's trace rows at half rate, 4 rows x 2 runs against fixed).
inline constexpr double kPullLagRatio = 0.8;
// Whether a direction of `bytes` (not relayed) cut into `pieces` pieces is
// paced by its receiver, whose header said `chunk` (0: it does not pace):
// two or more pieces and at least two chunks per piece. Both ends decide
// alike from the headers. Pure.
bool PullPaced(uint64_t bytes, size_t pieces, uint32_t chunk);

// Receiver -> sender once every original piece receive of the pair (and
// every relay chunk from the sender) is done: the pieces that did not arrive
// (piece i, or kMaxPieces + j for relay piece j; empty: OK, the sender may
// complete).
inline constexpr uint32_t kReceiptMagic = 0x4D585233u;  // "MXR3"
struct Receipt {
  uint32_t magic;
  uint32_t n_missing;
  uint32_t missing[kMaxPieces + kMaxRelays];
};

// The dynamic protocol (alltoall_dynamic.cc); args already validated.
absl::Status AlltoallvDynamic(Communicator& comm, const AlltoallvArgs& args, uint64_t tag);

}  // namespace mixnet::collectives::internal
