// Internals shared by alltoall.cc and alltoall_dynamic.cc: the tag layout and
// wire structs of one alltoallv call. Caller thread only.
//
// Tag layout (base = Communicator::NextCollectiveTag() = seq << 8, so each
// call owns 256 tags):
//   base + 1              counts: CountPair (static pairs) or PairHeader
//                         (dynamic pairs), on the pair's fixed path 0
//   base + 2              data, static pairs: one piece per fixed path
//   base + 3              Receipt, dynamic pairs that use direct paths:
//                         receiver -> sender, on EPS path 0
//   base + 64 + i         data piece i of a dynamic pair (i < 64), on the
//                         piece's own path (EPS path or direct link)
//   base + 128 + i        re-send of piece i over EPS path 0 (i < 64)
// A piece is identified by (collective tag base, pair, index) and always
// lands at the same offset of the receive buffer, so a re-send of a piece
// that partly arrived over a dead circuit overwrites it with the same bytes:
// each piece is delivered exactly once as far as the caller can tell.
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
inline constexpr uint64_t kTagPiece = 64;
inline constexpr uint64_t kTagResend = 128;
inline constexpr size_t kMaxLinks = 16;   // direct links listed in a header
inline constexpr size_t kMaxPieces = 64;  // EPS paths + direct links of a pair

struct CountPair {
  uint64_t sends;    // bytes this rank sends to the peer
  uint64_t expects;  // bytes this rank expects from the peer
};

// Dynamic pairs: counts plus the direct links (DirectLink::id) the sender
// considers usable for this call. Both ends use the intersection. `eps_share`
// is the share of the sender's bytes that go over EPS when the intersection
// is not empty (router v2's weights; 0 under v1): the receiver cuts its
// pieces by the sender's share, so ends with different routers interoperate.
inline constexpr uint32_t kHeaderMagic = 0x4D584832u;  // "MXH2" (v2: with eps_share)
struct PairHeader {
  uint32_t magic;
  uint32_t n_links;
  uint64_t sends;
  uint64_t expects;
  double eps_share;
  uint64_t links[kMaxLinks];
};

// The pieces of `bytes` at `offset` for one direction of a dynamic pair
// (pure; both ends compute the same list). No common link: split over the EPS
// paths by speed. Common links and eps_share 0 (router v1): over the links by
// speed. Otherwise round(bytes x eps_share) to 4 KiB goes over the EPS paths
// and the rest over the links, each by speed; empty pieces are left out (one
// is kept when bytes is 0). `eps_gbps` / `link_gbps`: the paths' speeds.
struct PieceSpec {
  size_t offset = 0;
  size_t len = 0;
  bool direct = false;  // on common link `index`, else on EPS path `index`
  size_t index = 0;
};
std::vector<PieceSpec> SplitPair(size_t offset, size_t bytes, const std::vector<double>& eps_gbps,
                                 const std::vector<double>& link_gbps, double eps_share);

// Receiver -> sender once every original piece receive of the pair is done:
// the pieces that did not arrive (empty: OK, the sender may complete).
inline constexpr uint32_t kReceiptMagic = 0x4D585243u;  // "MXRC"
struct Receipt {
  uint32_t magic;
  uint32_t n_missing;
  uint32_t missing[kMaxPieces];
};

// The dynamic protocol (alltoall_dynamic.cc); args already validated.
absl::Status AlltoallvDynamic(Communicator& comm, const AlltoallvArgs& args, uint64_t tag);

}  // namespace mixnet::collectives::internal
