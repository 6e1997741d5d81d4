// A full mesh of plugin connections between the harness's forked ranks and a
// checked exchange over it (see mesh.h). Runs in each rank's own thread.
#include "tests/nccl_net/mesh.h"

#include <unistd.h>

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

namespace mixnet::nccl_test {

using Handle = std::array<char, abi::kHandleMaxSize>;

// Every rank listens once per peer and connects to every peer, all polled
// from this one thread.
absl::StatusOr<Mesh> BuildMesh(const Net& net, int me, Board* b) {
  const int n = b->world;
  std::vector<void*> listens(n, nullptr);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    Handle h{};
    NT_NCCL_OK(net.api->listen(net.ctx, 0, h.data(), &listens[p]));
    NT_REQUIRE(listens[p] != nullptr, "listen returned no comm");
    Publish(b, me, p, 0, h.data());
  }
  std::vector<Handle> peer(n);
  for (int p = 0; p < n; ++p) {
    if (p != me) RETURN_IF_ERROR(Fetch(b, p, me, 0, peer[p].data()));
  }
  Mesh m{std::vector<void*>(n, nullptr), std::vector<void*>(n, nullptr)};
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (bool all = false; !all;) {
    all = true;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      if (m.send[p] == nullptr) {
        NT_NCCL_OK(net.api->connect(net.ctx, 0, peer[p].data(), &m.send[p], nullptr));
      }
      if (m.recv[p] == nullptr) NT_NCCL_OK(net.api->accept(listens[p], &m.recv[p], nullptr));
      all = all && m.send[p] != nullptr && m.recv[p] != nullptr;
    }
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": mesh set-up over the fabric timed out");
    if (!all) usleep(100);
  }
  for (int p = 0; p < n; ++p) {
    if (p != me) NT_NCCL_OK(net.api->close_listen(listens[p]));
  }
  return m;
}

absl::Status ExchangeAll(const Net& net, const Mesh& m, int me, int n, size_t bytes, int seq) {
  return Exchange(net, m, me, std::vector<size_t>(n, bytes), std::vector<size_t>(n, bytes), seq);
}

// Posts are retried while the plugin asks for it (a NULL request: the comm
// is full, or moving to another lane), as NCCL's proxy does.
absl::Status Exchange(const Net& net, const Mesh& m, int me, const std::vector<size_t>& to,
                      const std::vector<size_t>& from, int seq) {
  constexpr size_t kSlack = 64;
  const int n = static_cast<int>(to.size());
  std::vector<std::vector<uint8_t>> sbuf(n), rbuf(n);
  KeepBuffersOnError keep({&sbuf, &rbuf});  // a failed exchange keeps them
  std::vector<void*> smh(n, nullptr), rmh(n, nullptr), sreq(n, nullptr), rreq(n, nullptr);
  std::vector<char> sent(n, 0), received(n, 0);
  int left = 0;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    sbuf[p].resize(to[p]);
    rbuf[p].assign(from[p] + kSlack, 0xEE);
    Fill(sbuf[p].data(), to[p], Seed(me, p, seq));
    NT_NCCL_OK(net.api->reg_mr(m.send[p], sbuf[p].data(), to[p], abi::kPtrHost, &smh[p]));
    NT_NCCL_OK(net.api->reg_mr(m.recv[p], rbuf[p].data(), rbuf[p].size(), abi::kPtrHost, &rmh[p]));
    left += 2;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (left > 0) {
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      if (!received[p] && rreq[p] == nullptr) {
        void* data = rbuf[p].data();
        size_t size = rbuf[p].size();
        int tag = p;
        NT_NCCL_OK(net.api->irecv(m.recv[p], 1, &data, &size, &tag, &rmh[p], nullptr, &rreq[p]));
      }
      if (!sent[p] && sreq[p] == nullptr) {
        NT_NCCL_OK(net.api->isend(m.send[p], sbuf[p].data(), to[p], me, smh[p], nullptr, &sreq[p]));
      }
      for (auto [req, expect, flag] :
           {std::tuple{&sreq[p], to[p], &sent[p]}, std::tuple{&rreq[p], from[p], &received[p]}}) {
        if (*req == nullptr) continue;
        int done = 0, size = -1;
        NT_NCCL_OK(net.api->test(*req, &done, &size));
        if (!done) continue;
        NT_REQUIRE(size == static_cast<int>(expect), "rank ", me, " peer ", p, ": size ", size,
                   " reported for a ", expect, "-byte message");
        *req = nullptr;
        *flag = 1;
        --left;
      }
    }
    if (absl::Now() >= deadline) {
      std::string pending;
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        if (!sent[p]) absl::StrAppend(&pending, " send to ", p, sreq[p] ? "" : " (not posted)");
        if (!received[p]) {
          absl::StrAppend(&pending, " recv from ", p, rreq[p] ? "" : " (not posted)");
        }
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", me, ": exchange ", seq, " timed out; pending:", pending));
    }
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    NT_REQUIRE(Check(rbuf[p].data(), from[p], Seed(p, me, seq)), "rank ", me, ": ", from[p],
               " bytes from rank ", p, " are wrong (exchange ", seq, ")");
    for (size_t k = from[p]; k < rbuf[p].size(); ++k) {
      NT_REQUIRE(rbuf[p][k] == 0xEE, "rank ", me, ": write past the message end at ", k);
    }
    NT_NCCL_OK(net.api->dereg_mr(m.send[p], smh[p]));
    NT_NCCL_OK(net.api->dereg_mr(m.recv[p], rmh[p]));
  }
  keep.Release();
  return absl::OkStatus();
}

absl::Status CloseMesh(const Net& net, const Mesh& m) {
  for (size_t p = 0; p < m.send.size(); ++p) {
    if (m.send[p] != nullptr) NT_NCCL_OK(net.api->close_send(m.send[p]));
    if (m.recv[p] != nullptr) NT_NCCL_OK(net.api->close_recv(m.recv[p]));
  }
  NT_NCCL_OK(net.api->finalize(net.ctx));
  return absl::OkStatus();
}

}  // namespace mixnet::nccl_test
