// A byte-checked stream between two partner ranks of the NCCL plugin tests:
// each rank sends a list of messages (own sizes and tags) to its partner and
// receives as many, at most a window of each posted at once, receives
// posted in message order (so in order per tag) and larger than the message,
// retried while the plugin asks for it, as NCCL's proxy does. A message
// lost, duplicated or out of order per tag lands in the wrong buffer and
// fails the byte check. Used by the fabric cut and multipath tests.
// Header-only; runs in each forked rank (plugin_harness.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {

struct StreamPlan {
  std::vector<size_t> sizes;  // message k's size
  std::vector<int> tags;      // message k's NCCL tag
  int send_window = 8;        // sends posted ahead
  int recv_window = 8;        // receives posted ahead
  size_t recv_slack = 64;     // receives are posted this much larger
  int seed = 1000;            // payload seeds: Seed(src, dst, seed + k)
  // Called after each completed send with the number done so far.
  std::function<void(int sends_done)> on_send_done;
  absl::Duration timeout = absl::Seconds(60);
  // After the last completion, keep the receive buffers this long and fail
  // if a byte of one changes (a write after NCCL was told it is done).
  absl::Duration linger = absl::ZeroDuration();
};

inline absl::Status Stream(const Net& net, const Mesh& m, int me, int partner,
                           const StreamPlan& plan) {
  const int kMessages = static_cast<int>(plan.sizes.size());
  NT_REQUIRE(plan.tags.size() == plan.sizes.size(), "a tag per message");
  std::vector<std::vector<uint8_t>> out(kMessages), in(kMessages);
  for (int k = 0; k < kMessages; ++k) {
    out[k].resize(plan.sizes[k]);
    Fill(out[k].data(), out[k].size(), Seed(me, partner, plan.seed + k));
    in[k].assign(plan.sizes[k] + plan.recv_slack, 0xEE);
  }
  KeepBuffersOnError keep({&in, &out});  // a failed stream keeps them
  std::vector<void*> sreq(kMessages, nullptr), rreq(kMessages, nullptr);
  int next_send = 0, next_recv = 0, sends_done = 0, recvs_done = 0;
  const absl::Time deadline = absl::Now() + plan.timeout;
  while (sends_done < kMessages || recvs_done < kMessages) {
    while (next_recv < kMessages && next_recv - recvs_done < plan.recv_window) {
      void* data = in[next_recv].data();
      size_t size = in[next_recv].size();
      int tag = plan.tags[next_recv];
      NT_NCCL_OK(net.api->irecv(m.recv[partner], 1, &data, &size, &tag, nullptr, nullptr,
                                &rreq[next_recv]));
      if (rreq[next_recv] == nullptr) break;  // retry later (the plugin asks for it)
      ++next_recv;
    }
    while (next_send < kMessages && next_send - sends_done < plan.send_window) {
      NT_NCCL_OK(net.api->isend(m.send[partner], out[next_send].data(), out[next_send].size(),
                                plan.tags[next_send], nullptr, nullptr, &sreq[next_send]));
      if (sreq[next_send] == nullptr) break;
      ++next_send;
    }
    for (int k = 0; k < kMessages; ++k) {
      for (auto [req, count, is_recv] :
           {std::tuple{&sreq[k], &sends_done, false}, std::tuple{&rreq[k], &recvs_done, true}}) {
        if (*req == nullptr) continue;
        int done = 0, size = -1;
        NT_NCCL_OK(net.api->test(*req, &done, &size));
        if (!done) continue;
        *req = nullptr;
        ++*count;
        if (!is_recv) {
          NT_REQUIRE(size == static_cast<int>(plan.sizes[k]), "rank ", me, ": send ", k,
                     " reported ", size, " bytes, sent ", plan.sizes[k]);
          if (plan.on_send_done) plan.on_send_done(sends_done);
          continue;
        }
        const size_t want = plan.sizes[k];
        NT_REQUIRE(size == static_cast<int>(want), "rank ", me, ": message ", k, " from rank ",
                   partner, " reported ", size, " bytes, sent ", want);
        NT_REQUIRE(Check(in[k].data(), want, Seed(partner, me, plan.seed + k)), "rank ", me,
                   ": message ", k, " (tag ", plan.tags[k], ", ", want, " bytes) from rank ",
                   partner, " is wrong: lost, duplicated or out of order");
        for (size_t b = want; b < in[k].size(); ++b) {
          NT_REQUIRE(in[k][b] == 0xEE, "rank ", me, ": message ", k, " wrote past its end");
        }
      }
    }
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": stream timed out (", sends_done,
               " sends and ", recvs_done, " receives done)");
  }
  if (plan.linger > absl::ZeroDuration()) {
    absl::SleepFor(plan.linger);
    for (int k = 0; k < kMessages; ++k) {
      const size_t want = plan.sizes[k];
      bool same = Check(in[k].data(), want, Seed(partner, me, plan.seed + k));
      for (size_t b = want; same && b < in[k].size(); ++b) same = in[k][b] == 0xEE;
      if (same) continue;
      size_t first = 0;
      std::vector<uint8_t> ref(want);
      Fill(ref.data(), want, Seed(partner, me, plan.seed + k));
      while (first < want && in[k][first] == ref[first]) ++first;
      int from = -1;  // which message's bytes landed there
      for (int j = 0; j < kMessages && first < want; ++j) {
        std::vector<uint8_t> other(plan.sizes[j]);
        Fill(other.data(), other.size(), Seed(partner, me, plan.seed + j));
        for (size_t off = 0; off + 64 <= other.size(); off += 4096) {
          if (std::memcmp(other.data() + off, in[k].data() + first, 64) == 0) {
            from = j;
            break;
          }
        }
        if (from >= 0) break;
      }
      NT_REQUIRE(false, "rank ", me, ": message ", k, " (tag ", plan.tags[k], ", ", want,
                 " bytes) changed after it completed, from byte ", first, " (bytes of message ",
                 from, ")");
    }
  }
  keep.Release();
  return absl::OkStatus();
}

}  // namespace mixnet::nccl_test
