// Barrier and small allgather (see sync.h).
#include "runtime/collectives/sync.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet::collectives {

absl::Status Barrier(Communicator& comm) {
  RETURN_IF_ERROR(comm.CheckUsable());
  const int n = comm.size();
  const int me = comm.rank();
  const uint64_t tag = comm.NextCollectiveTag();
  for (int dist = 1, round = 0; dist < n; dist *= 2, ++round) {
    const int to = (me + dist) % n;
    const int from = (me - dist + n) % n;
    std::vector<std::unique_ptr<transport::Request>> reqs;
    auto r = comm.paths_to(from)[0].connection->Irecv(nullptr, 0, tag + round);
    auto s = comm.paths_to(to)[0].connection->Isend(nullptr, 0, tag + round);
    if (!r.ok() || !s.ok()) return comm.Fail(!r.ok() ? r.status() : s.status());
    reqs.push_back(*std::move(r));
    reqs.push_back(*std::move(s));
    RETURN_IF_ERROR(comm.WaitAll(reqs, {from, to}, "barrier"));
  }
  return absl::OkStatus();
}

absl::Status Allgather(Communicator& comm, const void* send, void* recv, size_t bytes) {
  RETURN_IF_ERROR(comm.CheckUsable());
  if (bytes > 0 && (send == nullptr || recv == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("allgather: null buffer with ", bytes, " bytes per rank"));
  }
  const int n = comm.size();
  const int me = comm.rank();
  const uint64_t tag = comm.NextCollectiveTag();
  char* out = static_cast<char*>(recv);
  std::vector<std::unique_ptr<transport::Request>> reqs;
  std::vector<int> owner;
  for (int k = 1; k < n; ++k) {
    const int peer = (me - k + n) % n;
    auto r = comm.paths_to(peer)[0].connection->Irecv(out + peer * bytes, bytes, tag);
    if (!r.ok()) return comm.Fail(r.status());
    reqs.push_back(*std::move(r));
    owner.push_back(peer);
  }
  const size_t nrecv = reqs.size();
  for (int k = 1; k < n; ++k) {
    const int peer = (me + k) % n;
    auto s = comm.paths_to(peer)[0].connection->Isend(send, bytes, tag);
    if (!s.ok()) return comm.Fail(s.status());
    reqs.push_back(*std::move(s));
    owner.push_back(peer);
  }
  if (bytes > 0) std::memmove(out + me * bytes, send, bytes);
  RETURN_IF_ERROR(comm.WaitAll(reqs, owner, "allgather"));
  for (size_t i = 0; i < nrecv; ++i) {
    if (reqs[i]->bytes() != bytes) {
      return absl::InvalidArgumentError(absl::StrCat("allgather: ", comm.PeerName(owner[i]),
                                                     " contributed ", reqs[i]->bytes(),
                                                     " bytes, rank ", me, " expects ", bytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace mixnet::collectives
