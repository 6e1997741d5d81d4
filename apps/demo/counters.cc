// Counter sampling for the demo's workers (see counters.h).
#include "apps/demo/counters.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "emulation/links.h"
#include "ocs_driver/netns/nl_socket.h"
#include "runtime/common/status.h"
#include "runtime/common/tcp_counters.h"

namespace mixnet::demo {
namespace {

absl::StatusOr<std::string> ReadAll(const char* path) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::map<std::string, ByteCounters>> ReadNicCounters(
    const std::vector<std::string>& ifnames) {
  ASSIGN_OR_RETURN(std::string text, ReadAll("/proc/self/net/dev"));
  std::map<std::string, ByteCounters> all;
  // "  eth0: rx_bytes rx_packets ... (8 rx fields) tx_bytes ..."
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string name(absl::StripAsciiWhitespace(line.substr(0, colon)));
    std::vector<absl::string_view> f =
        absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipWhitespace());
    ByteCounters c;
    if (f.size() < 9 || !absl::SimpleAtoi(f[0], &c.rx) || !absl::SimpleAtoi(f[8], &c.tx)) continue;
    all[name] = c;
  }
  std::map<std::string, ByteCounters> out;
  for (const std::string& n : ifnames) {
    auto it = all.find(n);
    if (it == all.end()) {
      return absl::NotFoundError(absl::StrCat("/proc/self/net/dev: no interface ", n));
    }
    out[n] = it->second;
  }
  return out;
}

absl::StatusOr<uint64_t> ReadTcpRetransmits() {
  ASSIGN_OR_RETURN(const TcpCounters c, ReadTcpCounters());
  return c.retrans_segs;
}

absl::StatusOr<CpuTimes> ReadCpuTimes() {
  ASSIGN_OR_RETURN(std::string text, ReadAll("/proc/stat"));
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
  absl::string_view first = absl::string_view(text).substr(0, text.find('\n'));
  if (!absl::ConsumePrefix(&first, "cpu ")) return absl::DataLossError("/proc/stat: no cpu line");
  std::vector<absl::string_view> f = absl::StrSplit(first, ' ', absl::SkipWhitespace());
  CpuTimes t;
  for (size_t i = 0; i < f.size() && i < 8; ++i) {  // guest time is inside user
    uint64_t v = 0;
    if (!absl::SimpleAtoi(f[i], &v)) return absl::DataLossError("/proc/stat: bad cpu line");
    t.total += v;
    if (i == 3 || i == 4) t.idle += v;
  }
  return t;
}

RemoteLinkCounters::RemoteLinkCounters(std::unique_ptr<netns::NlSocket> sock,
                                       std::vector<std::string> ifnames)
    : sock_(std::move(sock)), ifnames_(std::move(ifnames)) {}
RemoteLinkCounters::~RemoteLinkCounters() = default;

absl::StatusOr<std::unique_ptr<RemoteLinkCounters>> RemoteLinkCounters::Open(
    const std::string& netns, std::vector<std::string> ifnames) {
  ASSIGN_OR_RETURN(std::unique_ptr<netns::NlSocket> sock, netns::NlSocket::Open(netns));
  return std::unique_ptr<RemoteLinkCounters>(
      new RemoteLinkCounters(std::move(sock), std::move(ifnames)));
}

absl::StatusOr<std::map<std::string, ByteCounters>> RemoteLinkCounters::Read() {
  ASSIGN_OR_RETURN(std::vector<emulation::LinkInfo> links, emulation::ReadLinks(*sock_));
  std::map<std::string, ByteCounters> out;
  for (const std::string& n : ifnames_) {
    bool found = false;
    for (const emulation::LinkInfo& l : links) {
      if (l.name != n) continue;
      out[n] = ByteCounters{l.counters.rx_bytes, l.counters.tx_bytes};
      found = true;
    }
    if (!found) return absl::NotFoundError(absl::StrCat(sock_->NetnsLabel(), ": no link ", n));
  }
  return out;
}

nlohmann::json CountersToJson(const std::map<std::string, ByteCounters>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, c] : m) j[name] = {c.rx, c.tx};
  return j;
}

absl::StatusOr<std::map<std::string, ByteCounters>> CountersFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("NIC counters: not an object");
  std::map<std::string, ByteCounters> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() ||
        !v[1].is_number_unsigned()) {
      return absl::InvalidArgumentError(
          absl::StrCat("NIC counters of ", it.key(), ": want [rx, tx], got ", v.dump()));
    }
    out[it.key()] = ByteCounters{v[0].get<uint64_t>(), v[1].get<uint64_t>()};
  }
  return out;
}

std::map<std::string, ByteCounters> Delta(const std::map<std::string, ByteCounters>& a,
                                          const std::map<std::string, ByteCounters>& b) {
  std::map<std::string, ByteCounters> out;
  for (const auto& [n, c] : b) {
    auto it = a.find(n);
    const ByteCounters base = it == a.end() ? ByteCounters{} : it->second;
    out[n] = ByteCounters{c.rx - base.rx, c.tx - base.tx};
  }
  return out;
}

}  // namespace mixnet::demo
