// Multipath parts (see multipath.h): the split, the sender's header and
// pieces, the receiver's headers and second pieces. Runs with the comm's
// mutex held, on NCCL's proxy threads or the mover thread.
#include "plugins/nccl_net/multipath.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/nccl_net/comm.h"
#include "plugins/nccl_net/result.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/common/status.h"

namespace mixnet::nccl {
namespace {

std::string Who(const Comm& c) {
  return absl::StrCat(c.is_send ? "send comm to " : "recv comm from ",
                      c.peer_host.empty() ? std::string("peer") : c.peer_host);
}

// Receiver: posts part i's second piece once its header is known.
absl::Status PostSecond(Comm& c, Request& r, int i) {
  SplitPart& sp = r.split[i];
  if (!sp.has_header || sp.header.second == 0 || sp.second != nullptr) return absl::OkStatus();
  // A primary larger than the buffer failed already; the second piece is
  // still taken (into nothing, failing) so the pieces after it match.
  const size_t at = std::min<size_t>(sp.header.primary, r.sizes[i]);
  absl::StatusOr<std::unique_ptr<transport::Request>> p = c.home->connection->Irecv(
      static_cast<char*>(r.data[i]) + at, r.sizes[i] - at, r.tags[i] | kSecondPieceBit);
  if (!p.ok()) {
    c.lane_failed = true;
    return Annotate(p.status(),
                    absl::StrCat(Who(c), ": second piece of part ", r.seqs[i], " of tag ",
                                 r.tags[i], " on ", c.home->path.Describe()));
  }
  sp.second = *std::move(p);
  return absl::OkStatus();
}

// Receiver: a header arrived; it goes to its part, or waits for it.
void Deliver(Comm& c, const SplitHeader& h) {
  for (Request* r : c.live) {
    for (int i = 0; i < r->n; ++i) {
      SplitPart& sp = r->split[i];
      if (r->tags[i] != h.tag || r->seqs[i] != h.seq || sp.has_header ||
          (sp.min_bytes == 0 && !sp.header_expected)) {
        continue;
      }
      sp.header = h;
      sp.has_header = true;
      absl::Status st = PostSecond(c, *r, i);
      if (!st.ok()) LogWarn(st.ToString());
      return;
    }
  }
  c.split_headers[{h.tag, h.seq}] = h;
}

}  // namespace

SplitPlan PlanSplit(size_t size, uint64_t min_bytes, double eps_share) {
  SplitPlan plan;
  plan.primary = size;
  if (min_bytes == 0 || size < min_bytes) return plan;
  plan.header = true;
  if (eps_share > 0) {
    size_t direct = 0;
    for (const collectives::internal::PieceSpec& p :
         collectives::internal::SplitPair(0, size, {1.0}, {1.0}, eps_share)) {
      if (p.direct) direct += p.len;
    }
    // The primary piece carries at least min_bytes: that is how the
    // receiver tells a split part from a whole small one.
    plan.primary = std::max<size_t>(direct, min_bytes);
  }
  plan.second = size - plan.primary;
  return plan;
}

absl::Status PostSendPart(Comm& c, Request& r, int i, double eps_share) {
  Lane& lane = *r.lanes[i];
  SplitPart& sp = r.split[i];
  sp.min_bytes = lane.path.split_min_bytes;
  const SplitPlan plan = PlanSplit(r.sizes[i], sp.min_bytes, eps_share);
  // The primary first: when its lane fails now, nothing has left and the
  // post can be retried after a failover.
  ASSIGN_OR_RETURN(r.parts[i], lane.connection->Isend(r.data[i], plan.primary, r.tags[i]));
  r.sizes[i] = plan.primary;  // what a failover re-sends
  if (!plan.header) return absl::OkStatus();
  sp.header.tag = r.tags[i];
  sp.header.seq = r.seqs[i];
  sp.header.primary = plan.primary;
  sp.header.second = plan.second;
  // From here on the part is out: home failing fails the comm.
  absl::StatusOr<std::unique_ptr<transport::Request>> h =
      c.home->connection->Isend(&sp.header, sizeof(sp.header), kSplitHeaderTag);
  if (!h.ok()) {
    c.lane_failed = true;
    return h.status();
  }
  sp.header_send = *std::move(h);
  sp.has_header = true;
  if (plan.second == 0) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<transport::Request>> p = c.home->connection->Isend(
      static_cast<const char*>(r.data[i]) + plan.primary, plan.second, r.tags[i] | kSecondPieceBit);
  if (!p.ok()) {
    c.lane_failed = true;
    return p.status();
  }
  sp.second = *std::move(p);
  sp.second_bytes = plan.second;
  ++c.split.parts;
  c.split.primary_bytes += plan.primary;
  c.split.home_bytes += plan.second;
  return absl::OkStatus();
}

absl::Status PostRecvPart(Comm& c, Request& r, int i) {
  Lane& lane = *r.lanes[i];
  SplitPart& sp = r.split[i];
  sp.min_bytes = lane.path.split_min_bytes;
  ASSIGN_OR_RETURN(r.parts[i], lane.connection->Irecv(r.data[i], r.sizes[i], r.tags[i]));
  sp.header_expected = c.split_tail.erase({r.tags[i], r.seqs[i]}) > 0;
  if (sp.min_bytes == 0 && !sp.header_expected) return absl::OkStatus();
  r.guarded = true;  // completes through PathMover::Complete, which waits for the pieces
  auto it = c.split_headers.find({r.tags[i], r.seqs[i]});
  if (it == c.split_headers.end()) return absl::OkStatus();
  sp.header = it->second;
  sp.has_header = true;
  c.split_headers.erase(it);
  return PostSecond(c, r, i);
}

void PollSplitHeaders(Comm& c) {
  if (c.is_send || !c.split_seen || c.lane_failed || c.home == nullptr ||
      c.home->connection == nullptr) {
    return;
  }
  Lane& home = *c.home;
  while (true) {
    if (home.split_recv == nullptr) {
      absl::StatusOr<std::unique_ptr<transport::Request>> r =
          home.connection->Irecv(home.split_buf.data(), home.split_buf.size(), kSplitHeaderTag);
      if (!r.ok()) {
        LogWarn(absl::StrCat(Who(c), ": cannot post a split header receive on ",
                             home.path.Describe(), ": ", r.status().ToString()));
        c.lane_failed = true;
        return;
      }
      home.split_recv = *std::move(r);
    }
    if (!home.split_recv->Done()) return;
    const absl::Status st = home.split_recv->status();
    const size_t bytes = home.split_recv->bytes();
    home.split_recv.reset();
    if (!st.ok()) {
      // Home failing is the peer failing: the comm fails (lane_recovery.h).
      LogWarn(absl::StrCat(Who(c), ": split header receive on ", home.path.Describe(),
                           " failed: ", st.ToString()));
      c.lane_failed = true;
      return;
    }
    SplitHeader h;
    if (bytes == sizeof(h)) std::memcpy(&h, home.split_buf.data(), sizeof(h));
    if (bytes != sizeof(h) || h.magic != kSplitMagic) {
      LogWarn(absl::StrCat(Who(c), ": a split header of ", bytes, " bytes on ",
                           home.path.Describe(), " is malformed; the comm fails"));
      c.lane_failed = true;
      return;
    }
    Deliver(c, h);
  }
}

bool SplitDone(const Comm& c, const Request& r, int i) {
  const SplitPart& sp = r.split[i];
  if ((sp.min_bytes == 0 && !sp.header_expected) || c.lane_failed) return true;
  if (c.is_send) {
    return (sp.header_send == nullptr || sp.header_send->Done()) &&
           (sp.second == nullptr || sp.second->Done());
  }
  const transport::Request& primary = *r.parts[i];
  if (!primary.Done()) return false;
  // A failed primary is the part's error (NCCL gives up on the comm).
  if (!primary.status().ok() || (!sp.header_expected && primary.bytes() < sp.min_bytes)) {
    return true;
  }
  if (!sp.has_header) return false;
  return sp.header.second == 0 || (sp.second != nullptr && sp.second->Done());
}

size_t SplitExtraBytes(const Comm& c, const Request& r, int i) {
  const SplitPart& sp = r.split[i];
  if (c.is_send) return sp.second_bytes;
  return sp.second != nullptr && sp.second->status().ok() ? sp.second->bytes() : 0;
}

absl::Status SplitStatus(const Request& r, int i) {
  const SplitPart& sp = r.split[i];
  if (sp.header_send != nullptr && !sp.header_send->status().ok()) return sp.header_send->status();
  if (sp.second != nullptr && !sp.second->status().ok()) return sp.second->status();
  return absl::OkStatus();
}

std::string DescribeSplit(const SplitCounters& s) {
  return absl::StrCat("split ", s.parts, " part(s): ", s.primary_bytes, " bytes on their lanes, ",
                      s.home_bytes, " on home");
}

}  // namespace mixnet::nccl
