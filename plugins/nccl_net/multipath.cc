// Multipath parts (see multipath.h): the split, the sender's header and
// pieces, the receiver's headers and second pieces. Runs with the comm's
// mutex held, on NCCL's proxy threads or the mover thread.
#include "plugins/nccl_net/multipath.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/nccl_net/comm.h"
#include "plugins/nccl_net/relay_forwarder.h"
#include "plugins/nccl_net/result.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/common/status.h"
#include "runtime/transport/request_state.h"

namespace mixnet::nccl {
namespace {

std::string Who(const Comm& c) {
  return absl::StrCat(c.is_send ? "send comm to " : "recv comm from ",
                      c.peer_host.empty() ? std::string("peer") : c.peer_host);
}

// A receive piece that is over: it arrived, or it was refused as larger
// than its buffer (the transport then goes on; NCCL gets the error).
bool Over(const transport::Request& q) {
  if (!q.Done()) return false;
  const absl::Status st = q.status();
  return st.ok() || absl::IsInvalidArgument(st);
}

// Receiver: posts part i's stripe pieces on its striped lane once its header
// is known (StripeCut of the header's primary). A stripe that cannot take
// its piece is recorded (StripeFailure): the comm fails over.
void PostStripes(Request& r, int i) {
  SplitPart& sp = r.split[i];
  Lane& lane = *r.lanes[i];
  if (sp.stripes_posted || lane.path.stripes.empty() || lane.connection == nullptr) return;
  sp.stripes_posted = true;
  const std::vector<size_t> cut =
      StripeCut(sp.header.primary, StripeRates(lane.path), sp.min_bytes);
  size_t at = cut[0];
  for (size_t j = 1; j < cut.size(); ++j) {
    std::unique_ptr<transport::Request> q;
    if (cut[j] > 0 && sp.stripe_error.ok()) {
      // Clamped to the buffer: a larger piece fails as too large, the part's error.
      const size_t from = std::min(at, r.sizes[i]);
      const size_t len = std::min(cut[j], r.sizes[i] - from);
      transport::Connection* conn =
          j - 1 < lane.stripes.size() ? lane.stripes[j - 1].get() : nullptr;
      absl::StatusOr<std::unique_ptr<transport::Request>> p =
          conn == nullptr ? absl::UnavailableError("the stripe's connection is closed")
                          : conn->Irecv(static_cast<char*>(r.data[i]) + from, len, r.tags[i]);
      if (p.ok()) {
        q = *std::move(p);
      } else {
        sp.stripe_error = Annotate(
            p.status(), absl::StrCat("stripe piece of part ", r.seqs[i], " of tag ", r.tags[i],
                                     " on ", lane.path.stripes[j - 1].local_nic));
      }
    }
    sp.stripes.push_back(std::move(q));
    at += cut[j];
  }
}

// Receiver: posts part i's second piece (and stripe pieces) once its header
// is known.
absl::Status PostSecond(Comm& c, Request& r, int i) {
  SplitPart& sp = r.split[i];
  if (!sp.has_header) return absl::OkStatus();
  if (r.lanes[i] != c.home) PostStripes(r, i);
  if (sp.header.second == 0 || sp.second != nullptr) return absl::OkStatus();
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

std::vector<size_t> StripeCut(size_t bytes, const std::vector<double>& gbps, uint64_t min_bytes) {
  std::vector<size_t> cut(std::max<size_t>(gbps.size(), 1), 0);
  cut[0] = bytes;
  if (cut.size() == 1 || bytes <= min_bytes) return cut;
  std::vector<double> w(gbps.size());
  double total = 0;
  for (size_t j = 0; j < w.size(); ++j) total += w[j] = gbps[j] > 0 ? gbps[j] : 0;
  if (!(total > 0)) {
    std::fill(w.begin(), w.end(), 1.0);
    total = static_cast<double>(w.size());
  }
  // The stripes' shares of `budget` among weights summing to `sum`.
  auto share = [&](size_t budget, double sum) {
    size_t given = 0;
    for (size_t j = 1; j < cut.size(); ++j) {
      size_t len = sum > 0 ? static_cast<size_t>(static_cast<double>(budget) * w[j] / sum) : 0;
      len -= len % 4096;
      cut[j] = std::min(len, budget - given);
      given += cut[j];
    }
    return given;
  };
  size_t given = share(bytes, total);
  if (bytes - given < min_bytes) given = share(bytes - min_bytes, total - w[0]);
  cut[0] = bytes - given;
  return cut;
}

std::vector<double> StripeRates(const LanePath& path) {
  std::vector<double> out{path.gbps};
  for (const StripePath& s : path.stripes) out.push_back(s.gbps);
  return out;
}

absl::Status PostSendPart(Comm& c, Request& r, int i, double eps_share) {
  Lane& lane = *r.lanes[i];
  SplitPart& sp = r.split[i];
  sp.min_bytes = lane.path.split_min_bytes;
  const SplitPlan plan = PlanSplit(r.sizes[i], sp.min_bytes, eps_share);
  // A striped lane cuts the primary over its connections.
  const std::vector<size_t> cut =
      plan.header && !lane.path.stripes.empty()
          ? StripeCut(plan.primary, StripeRates(lane.path), sp.min_bytes)
          : std::vector<size_t>{plan.primary};
  // The primary first: when its lane fails now, nothing has left and the
  // post can be retried after a failover.
  ASSIGN_OR_RETURN(r.parts[i], lane.connection->Isend(r.data[i], cut[0], r.tags[i]));
  r.sizes[i] = plan.primary;  // what a failover re-sends
  if (!plan.header) return absl::OkStatus();
  // The stripe pieces: one that cannot be posted (its circuit died) is
  // recorded, and the comm fails over (the whole primary is re-sent).
  size_t at = cut[0];
  for (size_t j = 1; j < cut.size(); ++j) {
    std::unique_ptr<transport::Request> q;
    if (cut[j] > 0 && sp.stripe_error.ok()) {
      transport::Connection* conn =
          j - 1 < lane.stripes.size() ? lane.stripes[j - 1].get() : nullptr;
      const char* piece = static_cast<const char*>(r.data[i]) + at;
      // A relay stripe's piece goes with a header for the relay host, which
      // forwards it under the same tag (relay_forwarder.h).
      absl::StatusOr<std::unique_ptr<transport::Request>> p =
          conn == nullptr ? absl::UnavailableError("the stripe's connection is closed")
          : lane.path.stripes[j - 1].relay() ? PostRelaySend(*conn, piece, cut[j], r.tags[i])
                                             : conn->Isend(piece, cut[j], r.tags[i]);
      if (p.ok()) {
        q = *std::move(p);
        sp.stripe_bytes += cut[j];
      } else {
        sp.stripe_error = Annotate(
            p.status(), absl::StrCat("stripe piece of part ", r.seqs[i], " of tag ", r.tags[i],
                                     " on ", lane.path.stripes[j - 1].local_nic));
      }
    }
    sp.stripes.push_back(std::move(q));
    at += cut[j];
  }
  c.split.stripe_bytes += sp.stripe_bytes;
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
  if (plan.second == 0) {
    // Nothing on home, but cut over the lane's connections (a lane on EPS
    // with relay stripes): counted as split too.
    if (sp.stripe_bytes > 0) {
      ++c.split.parts;
      c.split.primary_bytes += plan.primary;
    }
    return absl::OkStatus();
  }
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
  r.split[i].min_bytes = lane.path.split_min_bytes;
  ASSIGN_OR_RETURN(r.parts[i], lane.connection->Irecv(r.data[i], r.sizes[i], r.tags[i]));
  return AttachSplit(c, r, i);
}

absl::Status FailRecvPart(Comm& c, Request& r, int i, absl::Status why) {
  r.split[i].min_bytes = r.lanes[i]->path.split_min_bytes;
  auto state = std::make_shared<transport::RequestState>();
  state->Complete(std::move(why), 0);
  r.parts[i] = std::make_unique<transport::StateRequest>(std::move(state));
  return AttachSplit(c, r, i);
}

absl::Status AttachSplit(Comm& c, Request& r, int i) {
  SplitPart& sp = r.split[i];
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
  // Also when the comm failed: a part is over only once every piece is
  // (PathMover::Complete closes a failed comm's connections, which ends them).
  if (sp.min_bytes == 0 && !sp.header_expected) return true;
  for (const std::unique_ptr<transport::Request>& q : sp.stripes) {
    if (q != nullptr && !q->Done()) return false;
  }
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
  if (r.lanes[i] != c.home && !r.lanes[i]->path.stripes.empty() && !sp.stripes_posted) return false;
  return sp.header.second == 0 || (sp.second != nullptr && sp.second->Done());
}

size_t SplitExtraBytes(const Comm& c, const Request& r, int i) {
  const SplitPart& sp = r.split[i];
  if (c.is_send) return sp.second_bytes + sp.stripe_bytes;
  size_t n = sp.second != nullptr && sp.second->status().ok() ? sp.second->bytes() : 0;
  for (const std::unique_ptr<transport::Request>& q : sp.stripes) {
    if (q != nullptr && q->Done() && q->status().ok()) n += q->bytes();
  }
  return n;
}

absl::Status SplitStatus(const Comm& c, const Request& r, int i) {
  const SplitPart& sp = r.split[i];
  if (sp.header_send != nullptr && !sp.header_send->status().ok()) return sp.header_send->status();
  if (sp.second != nullptr && !sp.second->status().ok()) return sp.second->status();
  if (!sp.stripe_error.ok()) return sp.stripe_error;
  for (const std::unique_ptr<transport::Request>& q : sp.stripes) {
    if (q != nullptr && !q->status().ok()) return q->status();
  }
  // Over but not whole: the comm failed before a piece was even posted.
  if (!SplitDone(c, r, i)) {
    return absl::UnavailableError(
        absl::StrCat(Who(c), ": part ", r.seqs[i], " of tag ", r.tags[i], " is incomplete: its ",
                     sp.has_header ? "stripe or second piece" : "split header",
                     " never came before the comm failed"));
  }
  return absl::OkStatus();
}

absl::Status RequestResult(const Comm& c, const Request& r, int* sizes) {
  absl::Status status;
  for (int i = 0; i < r.n; ++i) {
    // The primary piece, plus a split part's second piece.
    const size_t extra = SplitExtraBytes(c, r, i);
    if (r.delivered[i]) {  // a send that arrived over a lane closed since
      if (sizes != nullptr) sizes[i] = static_cast<int>(r.sizes[i] + extra);
      continue;
    }
    absl::Status s = r.parts[i]->status();
    if (s.ok()) s = SplitStatus(c, r, i);
    if (!s.ok() && status.ok()) {
      // The transport's "message larger than the receive" is a size mismatch.
      status = absl::IsInvalidArgument(s) ? absl::OutOfRangeError(s.message()) : s;
      const Lane& lane = *r.lanes[i];
      status = Annotate(status, lane.connection != nullptr
                                    ? lane.connection->peer_name()
                                    : absl::StrCat("lane ", lane.path.Describe(), " (closed)"));
    }
    if (sizes != nullptr) sizes[i] = static_cast<int>(r.parts[i]->bytes() + extra);
  }
  return status;
}

bool StripesArrived(const Request& r, int i) {
  const SplitPart& sp = r.split[i];
  if (r.lanes[i]->path.stripes.empty()) return true;
  const transport::Request& p = *r.parts[i];
  if (!p.Done() || !p.status().ok()) return true;  // the primary's own state decides
  if (sp.min_bytes == 0 || p.bytes() < sp.min_bytes) return true;  // whole: no stripes
  if (!sp.has_header || !sp.stripes_posted || !sp.stripe_error.ok()) return false;
  for (const std::unique_ptr<transport::Request>& q : sp.stripes) {
    if (q != nullptr && !Over(*q)) return false;
  }
  return true;
}

absl::Status StripeFailure(const Request& r, int i) {
  const SplitPart& sp = r.split[i];
  if (!sp.stripe_error.ok()) return sp.stripe_error;
  for (const std::unique_ptr<transport::Request>& q : sp.stripes) {
    if (q == nullptr || !q->Done()) continue;
    const absl::Status st = q->status();
    // A receive refused as too large is the part's error, not the lane's.
    if (!st.ok() && (r.comm->is_send || !absl::IsInvalidArgument(st))) return st;
  }
  return absl::OkStatus();
}

void DropStripes(Request& r, int i) {
  SplitPart& sp = r.split[i];
  sp.stripes.clear();
  sp.stripes_posted = false;
  sp.stripe_bytes = 0;
  sp.stripe_error = absl::OkStatus();
}

std::string DescribeSplit(const SplitCounters& s) {
  return absl::StrCat("split ", s.parts, " part(s): ", s.primary_bytes, " bytes on their lanes, ",
                      s.home_bytes, " on home",
                      s.stripe_bytes > 0 ? absl::StrCat(" (", s.stripe_bytes, " on stripes)") : "");
}

}  // namespace mixnet::nccl
