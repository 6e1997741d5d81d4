// NCCL net plugin data path, driven through dlopen the way NCCL's proxy drives
// it, with ranks as processes on loopback: full-mesh set-up polled from one
// thread, transfers of 0 B .. 16 MiB with every byte (and guard bytes) checked,
// receives larger than sends, grouped receives with FIFO tag matching, 64
// requests in flight per comm, closing comms with requests in flight, a listen
// comm accepting several connections, and the v8 table's int-sized calls.
// A topology change during transfers belongs to issue 5 (see
// plugins/nccl_net/route_policy.h) and is not tested here.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {
namespace {

using Handle = std::array<char, abi::kHandleMaxSize>;

void RunMeshTest(int world, const std::vector<size_t>& sizes) {
  absl::Status s = RunRanks(world, [&](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet());
    ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
    int seq = 0;
    for (size_t bytes : sizes) RETURN_IF_ERROR(ExchangeAll(net, m, me, world, bytes, seq++));
    // Nobody closes while a peer may still be receiving.
    RETURN_IF_ERROR(Barrier(b));
    return CloseMesh(net, m);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(NcclNetTransfer, TwoRanksManySizes) { RunMeshTest(2, {0, 1, 4096, 65537, 1 << 20, 16 << 20}); }
TEST(NcclNetTransfer, FourRanks) { RunMeshTest(4, {0, 1, 4096, 1 << 20}); }
TEST(NcclNetTransfer, EightRanks) { RunMeshTest(8, {0, 1, 4096, 256 << 10}); }

// A pair of comms: rank 0 sends to rank 1.
absl::Status Pair(const Net& net, int me, Board* b, void** send, void** recv) {
  Handle h{};
  if (me == 1) {
    void* listen = nullptr;
    NT_NCCL_OK(net.api->listen(net.ctx, 0, h.data(), &listen));
    Publish(b, 1, 0, 0, h.data());
    RETURN_IF_ERROR(ConnectAccept(net, nullptr, nullptr, listen, recv));
    NT_NCCL_OK(net.api->close_listen(listen));  // NCCL closes it right after accept
  } else {
    RETURN_IF_ERROR(Fetch(b, 1, 0, 0, h.data()));
    RETURN_IF_ERROR(ConnectAccept(net, h.data(), send, nullptr, nullptr));
  }
  return absl::OkStatus();
}

TEST(NcclNetTransfer, GroupedReceivesMatchByTagInFifoOrder) {
  absl::Status s = RunRanks(2, [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet());
    void *send = nullptr, *recv = nullptr;
    RETURN_IF_ERROR(Pair(net, me, b, &send, &recv));
    // Two grouped receives, both over tags {10, 11, 12, 13}; the sender sends
    // each tag twice, tags out of order. First of each tag -> first receive.
    const int tags[4] = {10, 11, 12, 13};
    const size_t sent[2][4] = {{100, 5000, (1 << 20) - 7, 0}, {1, 0, 70000, 3 << 20}};
    const size_t posted[4] = {4 << 20, 8192, 1 << 20, 4 << 20};  // >= every send of that tag
    if (me == 0) {
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<void*> reqs;
      for (int round = 0; round < 2; ++round) {
        for (int i : {3, 1, 2, 0}) {
          bufs.emplace_back(sent[round][i]);
          Fill(bufs.back().data(), bufs.back().size(), Seed(round, tags[i], 7));
          void* req = nullptr;
          NT_NCCL_OK(net.api->isend(send, bufs.back().data(), bufs.back().size(), tags[i], nullptr,
                                    nullptr, &req));
          NT_REQUIRE(req != nullptr, "isend not posted");
          reqs.push_back(req);
        }
      }
      for (void* r : reqs) {
        ASSIGN_OR_RETURN(int rc, WaitRequest(net, r, nullptr));
        NT_REQUIRE(rc == 0, "send failed: ", rc);
      }
      RETURN_IF_ERROR(Barrier(b));
      NT_NCCL_OK(net.api->close_send(send));
    } else {
      std::vector<uint8_t> bufs[2][4];
      void* reqs[2] = {nullptr, nullptr};
      for (int round = 0; round < 2; ++round) {
        void* data[4];
        size_t sizes[4];
        int t[4];
        for (int i = 0; i < 4; ++i) {
          bufs[round][i].assign(posted[i], 0);
          data[i] = bufs[round][i].data();
          sizes[i] = posted[i];
          t[i] = tags[i];
        }
        NT_NCCL_OK(net.api->irecv(recv, 4, data, sizes, t, nullptr, nullptr, &reqs[round]));
        NT_REQUIRE(reqs[round] != nullptr, "grouped irecv not posted");
      }
      for (int round = 0; round < 2; ++round) {
        int got[4] = {0, 0, 0, 0};
        ASSIGN_OR_RETURN(int rc, WaitRequest(net, reqs[round], got));
        NT_REQUIRE(rc == 0, "grouped receive failed: ", rc);
        for (int i = 0; i < 4; ++i) {
          NT_REQUIRE(got[i] == static_cast<int>(sent[round][i]), "round ", round, " tag ", tags[i],
                     ": size ", got[i], ", sent ", sent[round][i]);
          NT_REQUIRE(Check(bufs[round][i].data(), sent[round][i], Seed(round, tags[i], 7)),
                     "round ", round, " tag ", tags[i], ": wrong bytes");
        }
      }
      RETURN_IF_ERROR(Barrier(b));
      NT_NCCL_OK(net.api->close_recv(recv));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(NcclNetTransfer, SixtyFourRequestsInFlightPerComm) {
  absl::Status s = RunRanks(2, [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet());
    void *send = nullptr, *recv = nullptr;
    RETURN_IF_ERROR(Pair(net, me, b, &send, &recv));
    constexpr int kInFlight = 64;  // NCCL needs 32
    std::vector<std::vector<uint8_t>> bufs(kInFlight);
    std::vector<void*> reqs(kInFlight, nullptr);
    auto size_of = [](int i) { return static_cast<size_t>(i) * 3001 + (i % 4 == 0 ? 200000 : 0); };
    // Every request is posted before any is tested.
    for (int i = 0; i < kInFlight; ++i) {
      const int tag = i % 3;
      if (me == 0) {
        bufs[i].resize(size_of(i));
        Fill(bufs[i].data(), bufs[i].size(), Seed(0, 1, i));
        NT_NCCL_OK(
            net.api->isend(send, bufs[i].data(), bufs[i].size(), tag, nullptr, nullptr, &reqs[i]));
      } else {
        bufs[i].assign(size_of(i) + 1, 0);
        void* data = bufs[i].data();
        size_t size = bufs[i].size();
        int t = tag;
        NT_NCCL_OK(net.api->irecv(recv, 1, &data, &size, &t, nullptr, nullptr, &reqs[i]));
      }
      NT_REQUIRE(reqs[i] != nullptr, "request ", i, " not accepted");
    }
    for (int i = 0; i < kInFlight; ++i) {
      int size = -1;
      ASSIGN_OR_RETURN(int rc, WaitRequest(net, reqs[i], &size));
      NT_REQUIRE(rc == 0 && size == static_cast<int>(size_of(i)), "request ", i, ": rc ", rc,
                 " size ", size);
      if (me == 1) NT_REQUIRE(Check(bufs[i].data(), size_of(i), Seed(0, 1, i)), "msg ", i);
    }
    RETURN_IF_ERROR(Barrier(b));
    NT_NCCL_OK(me == 0 ? net.api->close_send(send) : net.api->close_recv(recv));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(NcclNetTransfer, ClosingWithRequestsInFlight) {
  absl::Status s = RunRanks(2, [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet());
    void *send = nullptr, *recv = nullptr;
    RETURN_IF_ERROR(Pair(net, me, b, &send, &recv));
    std::vector<uint8_t> big(8 << 20, 1);
    std::vector<uint8_t> small(4096, 2);
    if (me == 0) {
      RETURN_IF_ERROR(Barrier(b));  // the receiver has posted
      // A large send that no receive will ever match, plus small ones.
      void* r1 = nullptr;
      void* r2 = nullptr;
      NT_NCCL_OK(net.api->isend(send, big.data(), big.size(), 5, nullptr, nullptr, &r1));
      NT_NCCL_OK(net.api->isend(send, small.data(), small.size(), 6, nullptr, nullptr, &r2));
      NT_REQUIRE(r1 != nullptr && r2 != nullptr, "sends not posted");
      const absl::Time t0 = absl::Now();
      NT_NCCL_OK(net.api->close_send(send));
      NT_REQUIRE(absl::Now() - t0 < absl::Seconds(5), "closeSend took too long");
      int done = 0;
      NT_REQUIRE(net.api->test(r1, &done, nullptr) == abi::kInvalidArgument,
                 "a request of a closed comm must be invalid");
      RETURN_IF_ERROR(Barrier(b));
    } else {
      // Receives for a tag nobody sends stay pending; close the comm under them.
      std::vector<void*> reqs(4, nullptr);
      for (void*& r : reqs) {
        void* data = big.data();
        size_t size = big.size();
        int tag = 99;
        NT_NCCL_OK(net.api->irecv(recv, 1, &data, &size, &tag, nullptr, nullptr, &r));
        NT_REQUIRE(r != nullptr, "irecv not posted");
      }
      RETURN_IF_ERROR(Barrier(b));  // posted
      RETURN_IF_ERROR(Barrier(b));  // the sender has closed
      // The pending receive learns that its peer went away: a remote error.
      absl::StatusOr<int> rc = WaitRequest(net, reqs[0], nullptr, absl::Seconds(10));
      NT_REQUIRE(rc.ok() && *rc == abi::kRemoteError, "pending receive after the peer closed: ",
                 rc.ok() ? absl::StrCat("ncclResult ", *rc) : rc.status().ToString());
      const absl::Time t0 = absl::Now();
      NT_NCCL_OK(net.api->close_recv(recv));
      NT_REQUIRE(absl::Now() - t0 < absl::Seconds(5), "closeRecv took too long");
    }
    NT_NCCL_OK(net.api->finalize(net.ctx));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(NcclNetTransfer, OneListenCommAcceptsSeveralConnections) {
  absl::Status s = RunRanks(3, [](int me, Board* b) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet());
    Handle h{};
    if (me == 0) {
      void* listen = nullptr;
      NT_NCCL_OK(net.api->listen(net.ctx, 0, h.data(), &listen));
      Publish(b, 0, 1, 0, h.data());
      Publish(b, 0, 2, 0, h.data());
      // Rank 1 connects twice with the same handle, rank 2 once.
      std::vector<void*> recvs;
      for (int k = 0; k < 3; ++k) {
        void* r = nullptr;
        RETURN_IF_ERROR(ConnectAccept(net, nullptr, nullptr, listen, &r));
        recvs.push_back(r);
      }
      NT_NCCL_OK(net.api->close_listen(listen));
      std::vector<int> seen;
      for (void* r : recvs) {
        int id = -1;
        void* data = &id;
        size_t size = sizeof(id);
        int tag = 0;
        void* req = nullptr;
        NT_NCCL_OK(net.api->irecv(r, 1, &data, &size, &tag, nullptr, nullptr, &req));
        ASSIGN_OR_RETURN(int rc, WaitRequest(net, req, nullptr));
        NT_REQUIRE(rc == 0, "receive failed");
        seen.push_back(id);
      }
      std::sort(seen.begin(), seen.end());
      NT_REQUIRE((seen == std::vector<int>{10, 11, 20}), "wrong senders: ", seen.size());
      RETURN_IF_ERROR(Barrier(b));
      for (void* r : recvs) NT_NCCL_OK(net.api->close_recv(r));
    } else {
      RETURN_IF_ERROR(Fetch(b, 0, me, 0, h.data()));
      std::vector<void*> sends;
      for (int k = 0; k < (me == 1 ? 2 : 1); ++k) {
        void* sc = nullptr;
        RETURN_IF_ERROR(ConnectAccept(net, h.data(), &sc, nullptr, nullptr));
        int id = me * 10 + k;
        void* req = nullptr;
        NT_NCCL_OK(net.api->isend(sc, &id, sizeof(id), 0, nullptr, nullptr, &req));
        ASSIGN_OR_RETURN(int rc, WaitRequest(net, req, nullptr));
        NT_REQUIRE(rc == 0, "send failed");
        sends.push_back(sc);
      }
      RETURN_IF_ERROR(Barrier(b));
      for (void* sc : sends) NT_NCCL_OK(net.api->close_send(sc));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

// The v8 table (int sizes, logger-only init) in one process over loopback.
TEST(NcclNetTransfer, VersionEightTableLoopback) {
  absl::Status s = RunRanks(1, [](int, Board*) -> absl::Status {
    ASSIGN_OR_RETURN(Loaded lib, LoadPlugin(PluginPath()));
    const abi::NetV8* api = lib.v8;
    NT_REQUIRE(api != nullptr, "no v8 table");
    NT_NCCL_OK(api->init(nullptr));
    Handle h{};
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    NT_NCCL_OK(api->listen(0, h.data(), &listen));
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (send == nullptr || recv == nullptr) {
      if (send == nullptr) NT_NCCL_OK(api->connect(0, h.data(), &send, nullptr));
      if (recv == nullptr) NT_NCCL_OK(api->accept(listen, &recv, nullptr));
      NT_REQUIRE(absl::Now() < deadline, "v8 connect timed out");
    }
    NT_NCCL_OK(api->close_listen(listen));
    std::vector<uint8_t> out(300000), in(400000);
    Fill(out.data(), out.size(), 42);
    void *sreq = nullptr, *rreq = nullptr;
    void* data = in.data();
    int size = static_cast<int>(in.size()), tag = 3;
    NT_NCCL_OK(api->irecv(recv, 1, &data, &size, &tag, nullptr, &rreq));
    NT_NCCL_OK(api->isend(send, out.data(), static_cast<int>(out.size()), 3, nullptr, &sreq));
    int sdone = 0, rdone = 0, got = 0;
    while (!sdone || !rdone) {
      if (!sdone) NT_NCCL_OK(api->test(sreq, &sdone, nullptr));
      if (!rdone) NT_NCCL_OK(api->test(rreq, &rdone, &got));
      NT_REQUIRE(absl::Now() < deadline, "v8 transfer timed out");
    }
    NT_REQUIRE(got == static_cast<int>(out.size()), "size ", got);
    NT_REQUIRE(Check(in.data(), out.size(), 42), "wrong bytes");
    NT_NCCL_OK(api->close_send(send));
    NT_NCCL_OK(api->close_recv(recv));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace mixnet::nccl_test
