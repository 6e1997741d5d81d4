// The traffic matrices of mixnet_route_bench (see route_cases.h).
#include "bench/route_bench/route_cases.h"

#include <cmath>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "apps/demo/workload.h"
#include "bench/planner_bench/workloads.h"
#include "runtime/common/status.h"

namespace mixnet::bench {
namespace {

// The parts of a case name: its kind and, for partner-<s> and trace-l<k>,
// the number after it.
struct CaseName {
  std::string kind;  // uniform, zipf, expert8, hot-experts, partner, trace
  double share = 0;
  int layer = 0;
};

absl::StatusOr<CaseName> ParseName(std::string_view name) {
  const absl::string_view n(name.data(), name.size());
  for (const char* k : {"uniform", "zipf", "expert8", "hot-experts"}) {
    if (n == k) return CaseName{k};
  }
  CaseName c;
  if (absl::StartsWith(n, "partner-")) {
    c.kind = "partner";
    if (!absl::SimpleAtod(n.substr(8), &c.share) || !(c.share >= 0 && c.share <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("case '", n, "': the partner share must be a number in [0, 1]"));
    }
    return c;
  }
  if (absl::StartsWith(n, "trace-l")) {
    c.kind = "trace";
    if (!absl::SimpleAtoi(n.substr(7), &c.layer) || c.layer < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("case '", n, "': want trace-l<layer>, layer >= 0"));
    }
    return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown case '", n,
                   "' (uniform, zipf, expert8, hot-experts, partner-<share>, trace-l<layer>)"));
}

// The demo's workload with the options of a case (tokens and token bytes
// only set the shape: the matrix is normalised afterwards).
absl::StatusOr<TrafficMatrix> DemoMatrix(const CaseName& c, const CaseOptions& o,
                                         std::string* what) {
  demo::WorkloadOptions w;
  w.hosts = o.hosts;
  w.layers = 1;
  w.seed = o.seed;
  w.tokens = 1024;
  w.token_bytes = 4096;
  int64_t iteration = 0;
  int layer = 0;
  if (c.kind == "trace") {
    if (o.trace.empty()) return absl::InvalidArgumentError("trace cases need a --trace file");
    w.trace = o.trace;
    w.placement = "contiguous";
    iteration = o.trace_iteration;
    layer = c.layer;
  } else {
    w.affine_share = c.kind == "partner" ? c.share : 0;
  }
  ASSIGN_OR_RETURN(demo::Workload wl, demo::Workload::Create(w));
  if (layer >= wl.layers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("case trace-l", layer, ": trace ", o.trace, " has ", wl.layers(), " layers"));
  }
  if (c.kind == "trace") {
    *what = absl::StrFormat("trace %s, iteration %d, layer %d", o.trace, iteration, layer);
  } else if (c.kind == "partner") {
    *what =
        absl::StrFormat("%.0f%% to a partner host, the rest Zipf(1.2) over experts", 100 * c.share);
  } else {
    *what = "Zipf(1.2) over experts, one hot ranking for all sources";
  }
  return wl.DispatchMatrix(iteration, layer);
}

}  // namespace

TrafficMatrix BenchCase::Matrix() const {
  TrafficMatrix m(hosts);
  for (int s = 0; s < hosts; ++s) {
    for (int d = 0; d < hosts; ++d) m.at(s, d) = static_cast<double>(bytes[s * hosts + d]);
  }
  return m;
}

size_t BenchCase::OffDiagonalBytes() const {
  size_t sum = 0;
  for (int s = 0; s < hosts; ++s) {
    for (int d = 0; d < hosts; ++d) sum += s == d ? 0 : bytes[s * hosts + d];
  }
  return sum;
}

absl::StatusOr<std::vector<std::string>> ParseCaseList(std::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view piece :
       absl::StrSplit(absl::string_view(list.data(), list.size()), ',', absl::SkipWhitespace())) {
    const absl::string_view n = absl::StripAsciiWhitespace(piece);
    RETURN_IF_ERROR(ParseName(std::string_view(n.data(), n.size())).status());
    out.emplace_back(n);
  }
  if (out.empty()) return absl::InvalidArgumentError("--cases: no case given");
  return out;
}

std::vector<size_t> NormaliseToBytes(const TrafficMatrix& m, double bytes_per_host) {
  const int n = m.hosts();
  std::vector<size_t> out(static_cast<size_t>(n) * n, 0);
  const double total = m.OffDiagonalTotal();
  if (!(total > 0)) return out;
  std::vector<double> p;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s != d) p.push_back(m.at(s, d) / total);
    }
  }
  const std::vector<int64_t> b =
      demo::Apportion(p, static_cast<int64_t>(std::floor(n * bytes_per_host)));
  size_t k = 0;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s != d) out[static_cast<size_t>(s) * n + d] = static_cast<size_t>(b[k++]);
    }
  }
  return out;
}

absl::StatusOr<BenchCase> MakeCase(std::string_view name, const CaseOptions& o) {
  if (o.hosts < 2) return absl::InvalidArgumentError(absl::StrCat("--hosts ", o.hosts, " < 2"));
  if (!(o.bytes_per_host > 0) || !std::isfinite(o.bytes_per_host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bytes-per-host ", o.bytes_per_host, ": need > 0"));
  }
  ASSIGN_OR_RETURN(const CaseName c, ParseName(name));
  BenchCase out;
  out.name = std::string(name);
  out.hosts = o.hosts;
  TrafficMatrix m;
  if (c.kind == "uniform" || c.kind == "zipf" || c.kind == "expert8") {
    FabricParams p;
    p.bytes_per_host = o.bytes_per_host;
    std::mt19937_64 rng(o.seed);
    const Traffic t = c.kind == "uniform" ? Traffic::kUniform
                      : c.kind == "zipf"  ? Traffic::kZipf
                                          : Traffic::kExpert8;
    m = MakeTraffic(t, o.hosts, p, rng);
    out.what = c.kind == "uniform" ? "every host about the same to every host (+-5%)"
               : c.kind == "zipf"
                   ? absl::StrFormat("each source Zipf(%.1f) over its own order of peers", p.zipf_s)
                   : "the paper's 8-expert skew (host j holds expert j % 8), +-5% per source";
  } else {
    ASSIGN_OR_RETURN(m, DemoMatrix(c, o, &out.what));
  }
  out.bytes = NormaliseToBytes(m, o.bytes_per_host);
  return out;
}

}  // namespace mixnet::bench
