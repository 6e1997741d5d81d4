// All-to-all(v) implementation (see alltoall.h).
#include "runtime/collectives/alltoall.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/common/status.h"

namespace mixnet::collectives {
namespace {

using internal::CountPair;
using internal::kTagCounts;
using internal::kTagData;
constexpr size_t kAlign = 4096;

absl::Status CheckSide(const char* side, const void* buf, size_t buf_bytes,
                       absl::Span<const size_t> counts, absl::Span<const size_t> displs, int n) {
  if (static_cast<int>(counts.size()) != n || static_cast<int>(displs.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("alltoallv: ", side, " counts/displacements have ", counts.size(), "/",
                     displs.size(), " entries, world size is ", n));
  }
  for (int j = 0; j < n; ++j) {
    if (counts[j] == 0) continue;
    if (buf == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("alltoallv: null ", side, " buffer with ",
                                                     counts[j], " bytes for rank ", j));
    }
    if (displs[j] > buf_bytes || counts[j] > buf_bytes - displs[j]) {
      return absl::InvalidArgumentError(
          absl::StrCat("alltoallv: ", side, " block for rank ", j, " [", displs[j], ", +",
                       counts[j], ") lies outside the ", side, " buffer of ", buf_bytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

std::vector<double> Speeds(const std::vector<PeerPath>& paths) {
  std::vector<double> g;
  g.reserve(paths.size());
  for (const PeerPath& p : paths) g.push_back(p.path.gbps);
  return g;
}

}  // namespace

std::vector<size_t> SplitAcrossPaths(size_t bytes, const std::vector<double>& gbps, size_t first) {
  const size_t n = gbps.size();
  std::vector<size_t> out(n, 0);
  if (n == 0) return out;
  double total = 0;
  for (double g : gbps) total += g > 0 ? g : 0;
  std::vector<double> share(n);
  for (size_t i = 0; i < n; ++i) {
    share[i] = total > 0 ? (gbps[i] > 0 ? gbps[i] : 0) / total : 1.0 / static_cast<double>(n);
  }
  // Whole pages by the largest remainder: each path its share's pages
  // rounded down, then the pages left over one each to the paths whose
  // shares lost most to the rounding. Ties go in turn from `first`, so the
  // pairs of an all-to-all (each with its own `first`) do not all load the
  // same path with their rounding.
  const size_t pages = bytes / kAlign;
  std::vector<double> lost(n, 0);
  size_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    const double ideal = static_cast<double>(pages) * share[i];
    const size_t whole = std::min(static_cast<size_t>(ideal), pages - given);
    out[i] = whole * kAlign;
    lost[i] = ideal - static_cast<double>(whole);
    given += whole;
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (share[i] > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (lost[a] != lost[b]) return lost[a] > lost[b];
    return (a + n - first % n) % n < (b + n - first % n) % n;
  });
  size_t next = 0;
  for (; given < pages; ++given, ++next) out[order[next % order.size()]] += kAlign;
  // The bytes short of a page go with the next path in that order.
  out[order[next % order.size()]] += bytes % kAlign;
  return out;
}

absl::Status Alltoallv(Communicator& comm, const AlltoallvArgs& a) {
  RETURN_IF_ERROR(comm.CheckUsable());
  const int n = comm.size();
  const int me = comm.rank();
  RETURN_IF_ERROR(CheckSide("send", a.send, a.send_bytes, a.send_counts, a.send_displs, n));
  RETURN_IF_ERROR(CheckSide("receive", a.recv, a.recv_bytes, a.recv_counts, a.recv_displs, n));
  if (a.send_counts[me] != a.recv_counts[me]) {
    return absl::InvalidArgumentError(
        absl::StrCat("alltoallv: rank ", me, " sends ", a.send_counts[me],
                     " bytes to itself but expects ", a.recv_counts[me]));
  }
  const uint64_t tag = comm.NextCollectiveTag();
  // Pairs that circuits may join agree on their direct paths per call.
  if (comm.any_dynamic()) return internal::AlltoallvDynamic(comm, a, tag);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);

  std::vector<CountPair> mine(n), theirs(n);
  std::vector<std::unique_ptr<transport::Request>> reqs;
  std::vector<int> owner;
  std::vector<size_t> expected;  // per receive request: bytes it must deliver (SIZE_MAX: skip)
  reqs.reserve(4 * n);
  auto post = [&](absl::StatusOr<std::unique_ptr<transport::Request>> r, int peer,
                  size_t expect) -> absl::Status {
    if (!r.ok()) return comm.Fail(r.status());
    reqs.push_back(*std::move(r));
    owner.push_back(peer);
    expected.push_back(expect);
    return absl::OkStatus();
  };

  // Receives first, from every peer at once.
  for (int k = 1; k < n; ++k) {
    const int peer = (me - k + n) % n;
    std::vector<PeerPath>& paths = comm.paths_to(peer);
    if (paths.empty()) return comm.health().ok() ? absl::InternalError("no path") : comm.health();
    RETURN_IF_ERROR(
        post(paths[0].connection->Irecv(&theirs[peer], sizeof(CountPair), tag + kTagCounts), peer,
             sizeof(CountPair)));
    std::vector<size_t> pieces =
        SplitAcrossPaths(a.recv_counts[peer], Speeds(paths), PairSplitFirst(me, peer));
    size_t off = a.recv_displs[peer];
    for (size_t i = 0; i < paths.size(); ++i) {
      RETURN_IF_ERROR(
          post(paths[i].connection->Irecv(recv + off, pieces[i], tag + kTagData), peer, pieces[i]));
      off += pieces[i];
    }
  }
  // Then sends, starting with the next rank so load spreads over receivers.
  for (int k = 1; k < n; ++k) {
    const int peer = (me + k) % n;
    std::vector<PeerPath>& paths = comm.paths_to(peer);
    mine[peer] = CountPair{a.send_counts[peer], a.recv_counts[peer]};
    RETURN_IF_ERROR(
        post(paths[0].connection->Isend(&mine[peer], sizeof(CountPair), tag + kTagCounts), peer,
             SIZE_MAX));
    std::vector<size_t> pieces =
        SplitAcrossPaths(a.send_counts[peer], Speeds(paths), PairSplitFirst(me, peer));
    size_t off = a.send_displs[peer];
    for (size_t i = 0; i < paths.size(); ++i) {
      RETURN_IF_ERROR(
          post(paths[i].connection->Isend(send + off, pieces[i], tag + kTagData), peer, SIZE_MAX));
      off += pieces[i];
    }
  }
  // Our own block, while the network works.
  if (a.send_counts[me] > 0) {
    std::memmove(recv + a.recv_displs[me], send + a.send_displs[me], a.send_counts[me]);
  }
  absl::Status st = comm.WaitAll(reqs, owner, "alltoallv");
  if (!st.ok() && st.code() != absl::StatusCode::kInvalidArgument) return st;

  // Both ends check both directions, so a mismatch is reported on each rank.
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    if (theirs[peer].sends != a.recv_counts[peer]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: ", comm.PeerName(peer), " sends ", theirs[peer].sends,
          " bytes to rank ", me, ", which expects ", a.recv_counts[peer]));
    }
    if (theirs[peer].expects != a.send_counts[peer]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "alltoallv: count mismatch: rank ", me, " sends ", a.send_counts[peer], " bytes to ",
          comm.PeerName(peer), ", which expects ", theirs[peer].expects));
    }
  }
  if (!st.ok()) return st;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (expected[i] != SIZE_MAX && reqs[i]->bytes() != expected[i]) {
      return absl::InvalidArgumentError(absl::StrCat("alltoallv: ", comm.PeerName(owner[i]),
                                                     " delivered ", reqs[i]->bytes(),
                                                     " bytes, expected ", expected[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status Alltoall(Communicator& comm, const void* send, void* recv, size_t bytes_per_peer) {
  const int n = comm.size();
  std::vector<size_t> counts(n, bytes_per_peer), displs(n);
  for (int j = 0; j < n; ++j) displs[j] = static_cast<size_t>(j) * bytes_per_peer;
  const size_t total = bytes_per_peer * static_cast<size_t>(n);
  if (total > 0 && send != nullptr && recv != nullptr) {
    const char* s = static_cast<const char*>(send);
    const char* r = static_cast<const char*>(recv);
    if (s < r + total && r < s + total) {
      return absl::InvalidArgumentError("alltoall: send and receive buffers overlap");
    }
  }
  AlltoallvArgs a;
  a.send = send;
  a.send_bytes = total;
  a.send_counts = counts;
  a.send_displs = displs;
  a.recv = recv;
  a.recv_bytes = total;
  a.recv_counts = counts;
  a.recv_displs = displs;
  return Alltoallv(comm, a);
}

}  // namespace mixnet::collectives
