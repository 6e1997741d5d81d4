// The kernel's TCP counters of the calling thread's namespace (see tcp_counters.h).
#include "runtime/common/tcp_counters.h"

#include <cerrno>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/common/status.h"

namespace mixnet {

absl::StatusOr<TcpCounters> ParseTcpCounters(const std::string& snmp) {
  // Two "Tcp:" lines: the field names, then the values.
  std::vector<absl::string_view> names, values;
  for (absl::string_view line : absl::StrSplit(snmp, '\n')) {
    if (!absl::ConsumePrefix(&line, "Tcp:")) continue;
    (names.empty() ? names : values) = absl::StrSplit(line, ' ', absl::SkipWhitespace());
  }
  std::map<absl::string_view, uint64_t> field;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    uint64_t v = 0;
    if (absl::SimpleAtoi(values[i], &v)) field[names[i]] = v;
  }
  TcpCounters c;
  for (const auto& [name, slot] :
       {std::pair<const char*, uint64_t*>{"ActiveOpens", &c.active_opens},
        {"PassiveOpens", &c.passive_opens},
        {"EstabResets", &c.estab_resets},
        {"RetransSegs", &c.retrans_segs}}) {
    auto it = field.find(name);
    if (it == field.end()) {
      return absl::DataLossError(absl::StrCat("net/snmp: no Tcp ", name));
    }
    *slot = it->second;
  }
  return c;
}

absl::StatusOr<TcpCounters> ReadTcpCounters() {
  const char* path = "/proc/thread-self/net/snmp";
  std::ifstream in(path);
  if (!in) return ErrnoStatus(path, "open");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<TcpCounters> c = ParseTcpCounters(text.str());
  if (!c.ok()) return Annotate(c.status(), path);
  return c;
}

}  // namespace mixnet
