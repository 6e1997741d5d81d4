// Traffic for the NCCL plugin's topology-epoch tests (loopback and emulated
// cluster): skewed exchanges that make the controller join partner hosts by
// circuits, pipelined exchanges with many requests in flight across moves,
// and a probe of which address pairs have established TCP connections.
// Header-only; runs in each forked rank (plugin_harness.h).
#pragma once

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/common/tcp_counters.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {

inline constexpr int kEpochWorld = 4;

// IPv4 address as /proc/net/tcp prints it (the in-memory bytes as hex).
inline std::string ProcHex(const std::string& dotted) {
  std::vector<std::string> p = absl::StrSplit(dotted, '.');
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%02X%02X%02X%02X", std::stoi(p[3]), std::stoi(p[2]),
                std::stoi(p[1]), std::stoi(p[0]));
  return buf;
}

// Established TCP connections between two addresses (either direction).
inline int Established(const std::string& a, const std::string& b) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);
  const std::string ha = ProcHex(a), hb = ProcHex(b);
  int n = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 4 || f[3] != "01") continue;
    const std::string l = f[1].substr(0, 8), r = f[2].substr(0, 8);
    if ((l == ha && r == hb) || (l == hb && r == ha)) ++n;
  }
  return n;
}

// Many requests in flight per comm across moves: to and from every peer, 4
// rounds of two tags (a rendezvous-sized and an eager-sized message), received
// with grouped receives (n = 2), all posted before any is waited for, posts
// retried while the plugin asks for it. Every byte checked.
inline absl::Status Pipelined(const Net& net, const Mesh& m, int me, int seq) {
  constexpr int kRounds = 4;
  constexpr size_t kSizes[2] = {(64 << 10) + 1, 1000};
  struct Peer {
    std::vector<std::vector<uint8_t>> out, in;  // [round * 2 + t]
    std::vector<void*> sreq, rreq;
    int next_send = 0, next_recv = 0, done = 0;
  };
  std::vector<Peer> peers(kEpochWorld);
  for (int p = 0; p < kEpochWorld; ++p) {
    if (p == me) continue;
    Peer& q = peers[p];
    for (int k = 0; k < 2 * kRounds; ++k) {
      q.out.emplace_back(kSizes[k % 2]);
      Fill(q.out.back().data(), kSizes[k % 2], Seed(me, p, seq * 64 + k));
      q.in.emplace_back(kSizes[k % 2], 0xEE);
    }
    q.sreq.assign(2 * kRounds, nullptr);
    q.rreq.assign(kRounds, nullptr);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (bool all = false; !all;) {
    all = true;
    for (int p = 0; p < kEpochWorld; ++p) {
      if (p == me) continue;
      Peer& q = peers[p];
      while (q.next_recv < kRounds) {
        const int r = q.next_recv;
        void* data[2] = {q.in[2 * r].data(), q.in[2 * r + 1].data()};
        size_t sizes[2] = {kSizes[0], kSizes[1]};
        int tags[2] = {1000 + p, 2000 + p};
        NT_NCCL_OK(net.api->irecv(m.recv[p], 2, data, sizes, tags, nullptr, nullptr, &q.rreq[r]));
        if (q.rreq[r] == nullptr) break;  // retry later
        ++q.next_recv;
      }
      while (q.next_send < 2 * kRounds) {
        const int k = q.next_send;
        NT_NCCL_OK(net.api->isend(m.send[p], q.out[k].data(), q.out[k].size(),
                                  (k % 2 == 0 ? 1000 : 2000) + me, nullptr, nullptr, &q.sreq[k]));
        if (q.sreq[k] == nullptr) break;
        ++q.next_send;
      }
      for (auto* reqs : {&q.sreq, &q.rreq}) {
        for (void*& req : *reqs) {
          if (req == nullptr) continue;
          int done = 0;
          int sizes[2] = {-1, -1};
          NT_NCCL_OK(net.api->test(req, &done, sizes));
          if (!done) continue;
          req = nullptr;
          ++q.done;
        }
      }
      all = all && q.done == 3 * kRounds;
    }
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": pipelined exchange ", seq, " timed out");
  }
  for (int p = 0; p < kEpochWorld; ++p) {
    if (p == me) continue;
    for (int k = 0; k < 2 * kRounds; ++k) {
      NT_REQUIRE(Check(peers[p].in[k].data(), kSizes[k % 2], Seed(p, me, seq * 64 + k)), "rank ",
                 me, ": pipelined message ", k, " of exchange ", seq, " from rank ", p,
                 " is wrong");
    }
  }
  return absl::OkStatus();
}

// Exchanges skewed traffic (1 MiB to `partner`, 4 KiB to the others) until
// `until()` holds on every rank (voted after each round, so all ranks run
// the same rounds), then `extra` more rounds. Every byte is checked.
inline absl::Status SkewedUntil(const Net& net, const Mesh& m, Board* b, int me, int partner,
                                int* seq, const std::function<bool()>& until, int extra,
                                absl::Duration timeout, const std::string& what) {
  std::vector<size_t> sizes(kEpochWorld, 4 << 10);
  sizes[partner] = 1 << 20;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    RETURN_IF_ERROR(Exchange(net, m, me, sizes, sizes, (*seq)++));
    RETURN_IF_ERROR(Pipelined(net, m, me, (*seq)++));
    ASSIGN_OR_RETURN(bool all, AllAgree(b, me, until()));
    if (all) break;
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": ", what, " did not happen within ",
               absl::FormatDuration(timeout), " (here: ", until() ? "yes" : "no", ")");
  }
  for (int i = 0; i < extra; ++i) {
    RETURN_IF_ERROR(Exchange(net, m, me, sizes, sizes, (*seq)++));
    RETURN_IF_ERROR(Pipelined(net, m, me, (*seq)++));
  }
  return absl::OkStatus();
}

// One rank of an epoch test: the full mesh, a uniform exchange on EPS, then
// partners rank^1 until every rank has a TCP connection between its OCS
// address and its partner's (the plugin moved onto the circuit), then
// partners rank^2 until the new partners are connected that way and the
// send comm to the old partner moved back onto its home EPS lane (the old
// circuit's connection stays open, suspended: a kept lane, path_mover.h),
// then partners rank^1 again until the send comm to it switched back onto
// that kept lane (no new connection). `ocs_address(rank)` is that rank's
// host's OCS address; rank r is host hr.
inline absl::Status EpochRank(int me, Board* b,
                              const std::function<std::string(int)>& ocs_address) {
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
  ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
  int seq = 0;
  RETURN_IF_ERROR(Exchange(net, m, me, std::vector<size_t>(kEpochWorld, 12345),
                           std::vector<size_t>(kEpochWorld, 12345), seq++));
  const int p1 = me ^ 1, p2 = me ^ 2;
  RETURN_IF_ERROR(SkewedUntil(
      net, m, b, me, p1, &seq, [&] { return Established(ocs_address(me), ocs_address(p1)) > 0; },
      20, absl::Seconds(40), absl::StrCat("a circuit to partner rank ", p1)));
  RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
  RETURN_IF_ERROR(SkewedUntil(
      net, m, b, me, p2, &seq,
      [&] {
        return Established(ocs_address(me), ocs_address(p2)) > 0 &&
               CountLoggedLines(absl::StrCat("send comm to h", p1, " "),
                                "switched to eps0 -> eps0 (EPS) (home") > 0;
      },
      20, absl::Seconds(40),
      absl::StrCat("moving from partner ", p1, "'s circuit to partner ", p2, "'s")));
  RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
  // Partners rank^1 again: the comms go back onto the lanes they kept on
  // that circuit (through its dark time), with no new connection (the TCP
  // connections this rank's namespace opened meanwhile are printed: on the
  // emulated cluster each rank has its own).
  const absl::StatusOr<TcpCounters> tcp_before = ReadTcpCounters();
  RETURN_IF_ERROR(SkewedUntil(
      net, m, b, me, p1, &seq,
      [&] {
        return CountLoggedLines(absl::StrCat("send comm to h", p1, " "),
                                "(a kept lane: no new connection)") > 0;
      },
      5, absl::Seconds(40),
      absl::StrCat("moving back onto partner ", p1, "'s circuit on the lane kept there")));
  const absl::StatusOr<TcpCounters> tcp_after = ReadTcpCounters();
  if (tcp_before.ok() && tcp_after.ok()) {
    fprintf(stderr,
            "rank %d: back onto partner %d's circuit: %llu TCP connection(s) opened, %llu reset\n",
            me, p1, static_cast<unsigned long long>(tcp_after->opens() - tcp_before->opens()),
            static_cast<unsigned long long>(tcp_after->estab_resets - tcp_before->estab_resets));
  }
  RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
  RETURN_IF_ERROR(CloseMesh(net, m));
  for (const std::string& l : LoggedLines()) {
    if (l.find("router v2") != std::string::npos || l.find(" part(s): ") != std::string::npos ||
        l.find("split from") != std::string::npos)
      fprintf(stderr, "rank %d: %s\n", me, l.c_str());
  }
  return absl::OkStatus();
}

}  // namespace mixnet::nccl_test
