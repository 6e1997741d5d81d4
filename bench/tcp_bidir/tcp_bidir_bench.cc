// mixnet_tcp_bidir_bench: two emulated hosts send each other one large
// message at the same time over one shaped link pair (EPS or an OCS
// circuit), by rendezvous (the default eager threshold) and eagerly (the
// threshold raised above the message), and prints each exchange beside its
// floor (bytes over the link rate) and how much the two directions
// overlapped; then the median of each case and rendezvous / eager. Needs
// root (network namespaces; all removed on exit; after a crash:
// mixnet-fabric down --prefix P). Runs on the main thread plus the helper
// threads of BidirFabric::Exchange.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/tcp_bidir/bidir_exchange.h"
#include "nlohmann/json.hpp"

namespace mixnet::bench {
namespace {

struct Options {
  double gbps = 0.025;
  std::string bytes = "8M";
  std::string links = "eps,circuit";
  std::string modes = "rendezvous,eager";
  int rounds = 1;
  int skew_ms = 20;
  int sockets = 2;
  std::string chunk = "256K";
  bool json = false;
  std::string prefix;
  std::string congestion;
};

// "8M", "512K", "1G" or a plain number of bytes.
bool ParseBytes(const std::string& text, size_t* out) {
  if (text.empty()) return false;
  size_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
      mult = size_t{1} << 10;
      break;
    case 'M':
      mult = size_t{1} << 20;
      break;
    case 'G':
      mult = size_t{1} << 30;
      break;
    default:
      break;
  }
  if (mult != 1) digits.pop_back();
  uint64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n) || n == 0) return false;
  *out = static_cast<size_t>(n) * mult;
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void PrintRow(const Options& o, const std::string& link, const std::string& mode, int round,
              size_t bytes, const BidirResult& r) {
  if (o.json) {
    nlohmann::json j = {{"kind", "exchange"},
                        {"link", link},
                        {"mode", mode},
                        {"round", round},
                        {"bytes_per_direction", bytes},
                        {"gbps", o.gbps},
                        {"time_s", r.seconds},
                        {"floor_s", r.floor_seconds},
                        {"x_floor", r.ratio()},
                        {"overlap", r.overlap},
                        {"start_to_h1_s", r.start_s[1]},
                        {"start_to_h0_s", r.start_s[0]},
                        {"done_h1_s", r.done_s[1]},
                        {"done_h0_s", r.done_s[0]},
                        {"nic_bytes_to_h1", r.nic_bytes[1]},
                        {"nic_bytes_to_h0", r.nic_bytes[0]},
                        {"retransmits", r.retransmits}};
    std::cout << j.dump() << std::endl;
    return;
  }
  std::printf("%-8s %-10s %5d %10zu %8.3f %8.3f %7.2f %8.0f%% %7.3f %7.3f %7.3f %7.3f %7llu\n",
              link.c_str(), mode.c_str(), round, bytes, r.seconds, r.floor_seconds, r.ratio(),
              100 * r.overlap, r.start_s[1], r.done_s[1], r.start_s[0], r.done_s[0],
              static_cast<unsigned long long>(r.retransmits));
  std::fflush(stdout);
}

int Run(const Options& o) {
  size_t bytes = 0, chunk = 0;
  if (!ParseBytes(o.bytes, &bytes) || !ParseBytes(o.chunk, &chunk)) {
    std::cerr << "mixnet_tcp_bidir_bench: bad --bytes '" << o.bytes << "' or --chunk '" << o.chunk
              << "'\n";
    return 2;
  }
  std::vector<std::string> links = absl::StrSplit(o.links, ',', absl::SkipEmpty());
  std::vector<std::string> modes = absl::StrSplit(o.modes, ',', absl::SkipEmpty());
  for (const std::string& m : modes) {
    if (m != "rendezvous" && m != "eager") {
      std::cerr << "mixnet_tcp_bidir_bench: mode '" << m << "': rendezvous or eager\n";
      return 2;
    }
  }
  const std::string prefix = o.prefix.empty() ? absl::StrCat("tcpbidir", getpid()) : o.prefix;
  absl::StatusOr<std::unique_ptr<BidirFabric>> fabric = BidirFabric::Up(
      o.gbps, prefix, o.congestion.empty() ? AllowedCongestionControl() : o.congestion);
  if (!fabric.ok()) {
    std::cerr << "mixnet_tcp_bidir_bench: " << fabric.status() << "\n";
    return 1;
  }
  if (!o.json) {
    std::printf(
        "# fabric %s: 2 hosts, every link %g Gbit/s (%.0f bytes/s) per direction; "
        "h1 posts %d ms after h0; TCP %s, %d sockets, chunk %s\n",
        prefix.c_str(), o.gbps, (*fabric)->rate_bytes_per_s(), o.skew_ms,
        (o.congestion.empty() ? AllowedCongestionControl() : o.congestion).c_str(), o.sockets,
        o.chunk.c_str());
    std::printf(
        "# time: first post to last receive; floor: busier NIC's tx bytes / rate; "
        "overlap: share of the slower direction across when the faster finished\n");
    std::printf("%-8s %-10s %5s %10s %8s %8s %7s %9s %7s %7s %7s %7s %7s\n", "link", "mode",
                "round", "bytes", "time_s", "floor_s", "x_floor", "overlap", "go->h1", "done_h1",
                "go->h0", "done_h0", "retrans");
  }
  std::map<std::pair<std::string, std::string>, std::vector<double>> times, ratios;
  int rc = 0;
  for (int round = 0; round < o.rounds && rc == 0; ++round) {
    for (const std::string& link : links) {
      for (const std::string& mode : modes) {
        BidirOptions b;
        b.link = link;
        b.bytes = bytes;
        b.sockets_per_connection = o.sockets;
        b.chunk_bytes = chunk;
        b.skew = absl::Milliseconds(o.skew_ms);
        b.eager_bytes = mode == "eager" ? bytes : transport::DeviceOptions{}.eager_bytes;
        absl::StatusOr<BidirResult> r = (*fabric)->Exchange(b);
        if (!r.ok()) {
          std::cerr << "mixnet_tcp_bidir_bench: " << link << "/" << mode << ": " << r.status()
                    << "\n";
          rc = 1;
          break;
        }
        PrintRow(o, link, mode, round, bytes, *r);
        times[{link, mode}].push_back(r->seconds);
        ratios[{link, mode}].push_back(r->ratio());
      }
      if (rc != 0) break;
    }
  }
  for (const std::string& link : links) {
    const auto rv = times.find({link, "rendezvous"});
    const auto ea = times.find({link, "eager"});
    for (const std::string& mode : modes) {
      auto t = times.find({link, mode});
      if (t == times.end()) continue;
      const double med = Median(t->second);
      const double xf = Median(ratios[{link, mode}]);
      const double vs_eager = (mode == "rendezvous" && ea != times.end() && rv != times.end())
                                  ? med / Median(ea->second)
                                  : 0;
      if (o.json) {
        nlohmann::json j = {{"kind", "summary"},    {"link", link},
                            {"mode", mode},         {"runs", t->second.size()},
                            {"time_s_median", med}, {"x_floor_median", xf}};
        if (vs_eager > 0) j["rendezvous_over_eager"] = vs_eager;
        std::cout << j.dump() << std::endl;
      } else {
        std::printf("# %-8s %-10s median %.3f s = %.2fx floor", link.c_str(), mode.c_str(), med,
                    xf);
        if (vs_eager > 0) std::printf(", %.2fx eager", vs_eager);
        std::printf(" (%zu runs)\n", t->second.size());
      }
    }
  }
  absl::Status down = (*fabric)->Down();
  if (!down.ok()) {
    std::cerr << "mixnet_tcp_bidir_bench: " << down << "\n";
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace mixnet::bench

int main(int argc, char** argv) {
  mixnet::bench::Options o;
  CLI::App app{
      "mixnet_tcp_bidir_bench: both directions of one emulated link pair at once, TCP "
      "rendezvous vs eager (root)"};
  app.add_option("--gbps", o.gbps, "Rate of every link, Gbit/s per direction")
      ->capture_default_str();
  app.add_option("--bytes", o.bytes, "Message per direction (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("--links", o.links, "eps, circuit (comma list)")->capture_default_str();
  app.add_option("--modes", o.modes, "rendezvous, eager (comma list)")->capture_default_str();
  app.add_option("--rounds", o.rounds, "Repetitions of every case, interleaved")
      ->capture_default_str();
  app.add_option("--skew-ms", o.skew_ms, "h1 posts its receive and send this much after h0")
      ->capture_default_str();
  app.add_option("--sockets", o.sockets, "TCP sockets per connection")->capture_default_str();
  app.add_option("--chunk", o.chunk, "Striping chunk (DeviceOptions::chunk_bytes)")
      ->capture_default_str();
  app.add_option("--prefix", o.prefix, "Namespace prefix (default tcpbidir<pid>)");
  app.add_option("--tcp-congestion", o.congestion,
                 "Hosts' TCP congestion control (default: cubic where a namespace may choose "
                 "it, else reno)");
  app.add_flag("--json", o.json, "One JSON object per exchange, then one per case");
  CLI11_PARSE(app, argc, argv);
  if (o.rounds < 1 || o.sockets < 1 || o.skew_ms < 0) {
    std::cerr << "mixnet_tcp_bidir_bench: need --rounds >= 1, --sockets >= 1, --skew-ms >= 0\n";
    return 2;
  }
  return mixnet::bench::Run(o);
}
