// Buffers of a checked alltoallv (see exchange.h).
#include "apps/demo/exchange.h"

#include <algorithm>

namespace mixnet::demo {

void PrepareExchange(const std::vector<size_t>& bytes, int n, int rank, bool transpose,
                     const BlockId& base, Exchange& x) {
  x.send_counts.assign(n, 0);
  x.recv_counts.assign(n, 0);
  x.send_displs.assign(n, 0);
  x.recv_displs.assign(n, 0);
  size_t s = 0, r = 0;
  for (int j = 0; j < n; ++j) {
    const size_t out = transpose ? bytes[j * n + rank] : bytes[rank * n + j];
    const size_t in = transpose ? bytes[rank * n + j] : bytes[j * n + rank];
    x.send_counts[j] = out;
    x.send_displs[j] = s;
    x.recv_counts[j] = in;
    x.recv_displs[j] = r;
    s += out;
    r += in;
  }
  x.send.resize(s);
  x.recv.assign(r, kPoison);
  for (int j = 0; j < n; ++j) {
    BlockId id = base;
    id.src = rank;
    id.dst = j;
    FillBlock(id, x.send.data() + x.send_displs[j], x.send_counts[j]);
  }
}

void PoisonReceive(Exchange& x) { std::fill(x.recv.begin(), x.recv.end(), kPoison); }

std::vector<size_t> VerifyExchange(const Exchange& x, int n, int rank, const BlockId& base) {
  std::vector<size_t> wrong(n, 0);
  for (int j = 0; j < n; ++j) {
    BlockId id = base;
    id.src = j;
    id.dst = rank;
    wrong[j] = VerifyBlock(id, x.recv.data() + x.recv_displs[j], x.recv_counts[j]);
  }
  return wrong;
}

}  // namespace mixnet::demo
