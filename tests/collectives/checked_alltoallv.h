// Checksummed alltoallv for tests: per-call counts and contents that every
// rank derives alike from (src, dst, call), every byte and guard byte
// verified. Header-only; runs on the calling rank's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/common/status.h"

namespace mixnet::testing {

inline uint8_t Byte(int src, int dst, uint64_t iter, size_t k) {
  uint64_t x = (static_cast<uint64_t>(src) * 1000003u + dst * 7919u + iter * 104729u + k) *
               0x9E3779B97F4A7C15ull;
  return static_cast<uint8_t>(x >> 56);
}

// Bytes rank `src` sends rank `dst` in call `iter` (both ends compute it).
inline size_t Count(int src, int dst, uint64_t iter, size_t scale) {
  return ((src * 7 + dst * 13 + iter * 31) % 17) * scale + (iter % 5) * 4099;
}

// One checksummed alltoallv where rank src sends count(src, dst) bytes to
// rank dst; every byte and the guard bytes verified. When the call fails,
// the blocks from the ranks in `intact` are still checked (DataLoss naming
// the byte when one is wrong; else the call's error).
inline absl::Status CheckedAlltoallv(collectives::Communicator& comm, uint64_t iter,
                                     const std::function<size_t(int, int)>& count,
                                     const std::vector<int>& intact = {}) {
  const int n = comm.size(), me = comm.rank();
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int j = 0; j < n; ++j) {
    sc[j] = count(me, j);
    sd[j] = st;
    st += sc[j];
    rc[j] = count(j, me);
    rd[j] = rt;
    rt += rc[j];
  }
  std::vector<uint8_t> send(st), recv(rt + 64, 0xEE);
  for (int j = 0; j < n; ++j) {
    for (size_t k = 0; k < sc[j]; ++k) send[sd[j] + k] = Byte(me, j, iter, k);
  }
  collectives::AlltoallvArgs a{send.data(), st, sc, sd, recv.data(), rt, rc, rd};
  if (absl::Status s = collectives::Alltoallv(comm, a); !s.ok()) {
    for (int j : intact) {
      for (size_t k = 0; k < rc[j]; ++k) {
        if (recv[rd[j] + k] != Byte(j, me, iter, k)) {
          return absl::DataLossError(absl::StrCat("rank ", me, " call ", iter, ": byte ", k, " of ",
                                                  rc[j], " from rank ", j,
                                                  " is wrong; the call: ", s.ToString()));
        }
      }
    }
    return s;
  }
  for (int j = 0; j < n; ++j) {
    for (size_t k = 0; k < rc[j]; ++k) {
      if (recv[rd[j] + k] != Byte(j, me, iter, k)) {
        return absl::DataLossError(
            absl::StrCat("rank ", me, " call ", iter, ": byte ", k, " from rank ", j, " is wrong"));
      }
    }
  }
  for (size_t k = rt; k < recv.size(); ++k) {
    if (recv[k] != 0xEE) return absl::DataLossError("alltoallv wrote past the receive buffer");
  }
  return absl::OkStatus();
}

// Counts from Count(src, dst, iter, scale).
inline absl::Status CheckedAlltoallv(collectives::Communicator& comm, uint64_t iter, size_t scale) {
  return CheckedAlltoallv(comm, iter,
                          [&](int src, int dst) { return Count(src, dst, iter, scale); });
}

}  // namespace mixnet::testing
