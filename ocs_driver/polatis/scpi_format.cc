// Polatis SCPI text formats (see scpi_format.h). Pure functions.
#include "ocs_driver/polatis/scpi_format.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mixnet::ocs::scpi {
namespace {

constexpr int kMaxPort = 100000;

absl::Status Bad(absl::string_view what, absl::string_view reply) {
  std::string shown(reply.substr(0, 200));
  return absl::InvalidArgumentError(absl::StrCat("malformed ", what, ": '", shown, "'"));
}

// Parses the inside of one channel list ("1,2,5:7" or "") into ports.
bool ParseChannels(absl::string_view body, std::vector<int>& out) {
  body = absl::StripAsciiWhitespace(body);
  if (body.empty()) return true;
  for (absl::string_view item : absl::StrSplit(body, ',')) {
    item = absl::StripAsciiWhitespace(item);
    std::vector<absl::string_view> range = absl::StrSplit(item, ':');
    int lo = 0;
    int hi = 0;
    if (range.size() == 1) {
      if (!absl::SimpleAtoi(range[0], &lo)) return false;
      hi = lo;
    } else if (range.size() == 2) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(range[0]), &lo) ||
          !absl::SimpleAtoi(absl::StripAsciiWhitespace(range[1]), &hi)) {
        return false;
      }
    } else {
      return false;
    }
    if (lo < 1 || hi < 1 || lo > kMaxPort || hi > kMaxPort) return false;
    int step = lo <= hi ? 1 : -1;
    for (int p = lo;; p += step) {
      out.push_back(p);
      if (p == hi) break;
    }
  }
  return true;
}

// Reads "(@...)" at the front of `s`, leaving `s` after it.
bool ConsumeList(absl::string_view& s, std::vector<int>& out) {
  s = absl::StripLeadingAsciiWhitespace(s);
  if (!absl::ConsumePrefix(&s, "(")) return false;
  s = absl::StripLeadingAsciiWhitespace(s);
  if (!absl::ConsumePrefix(&s, "@")) return false;
  size_t close = s.find(')');
  if (close == absl::string_view::npos) return false;
  if (!ParseChannels(s.substr(0, close), out)) return false;
  s.remove_prefix(close + 1);
  return true;
}

}  // namespace

std::string FormatConnectionLists(const std::vector<Connection>& connections) {
  std::string in = "(@";
  std::string eg = "(@";
  for (size_t i = 0; i < connections.size(); ++i) {
    if (i > 0) {
      in += ',';
      eg += ',';
    }
    absl::StrAppend(&in, connections[i].ingress);
    absl::StrAppend(&eg, connections[i].egress);
  }
  return absl::StrCat(in, "),", eg, ")");
}

absl::StatusOr<std::vector<Connection>> ParseConnectionLists(absl::string_view reply) {
  absl::string_view s = absl::StripAsciiWhitespace(reply);
  std::vector<Connection> out;
  if (s.empty() || absl::EqualsIgnoreCase(s, "<none>")) return out;
  std::vector<int> ingress;
  std::vector<int> egress;
  if (!ConsumeList(s, ingress)) return Bad("connection list", reply);
  s = absl::StripLeadingAsciiWhitespace(s);
  if (!absl::ConsumePrefix(&s, ",")) return Bad("connection list", reply);
  if (!ConsumeList(s, egress)) return Bad("connection list", reply);
  if (!absl::StripAsciiWhitespace(s).empty()) return Bad("connection list", reply);
  if (ingress.size() != egress.size()) return Bad("connection list (unequal lengths)", reply);
  out.reserve(ingress.size());
  for (size_t i = 0; i < ingress.size(); ++i) out.push_back({ingress[i], egress[i]});
  return out;
}

absl::StatusOr<ErrorEntry> ParseErrorEntry(absl::string_view reply) {
  absl::string_view s = absl::StripAsciiWhitespace(reply);
  size_t comma = s.find(',');
  absl::string_view code_text = absl::StripAsciiWhitespace(s.substr(0, comma));
  absl::ConsumePrefix(&code_text, "+");
  ErrorEntry e;
  if (code_text.empty() || !absl::SimpleAtoi(code_text, &e.code)) {
    return Bad("error queue entry", reply);
  }
  if (comma != absl::string_view::npos) {
    absl::string_view msg = absl::StripAsciiWhitespace(s.substr(comma + 1));
    if (msg.size() >= 2 && msg.front() == '"' && msg.back() == '"') {
      msg = msg.substr(1, msg.size() - 2);
    }
    e.message = std::string(msg);
  }
  return e;
}

std::vector<int> PortsNamedIn(absl::string_view message) {
  std::vector<int> ports;
  std::string lower = absl::AsciiStrToLower(message);
  absl::string_view s = lower;
  size_t i = 0;
  while (i < s.size()) {
    bool after_word =
        s.substr(i, 4) == "port" && (i == 0 || !std::isalpha(static_cast<unsigned char>(s[i - 1])));
    bool list = s.substr(i, 2) == "(@";
    if (!after_word && !list) {
      ++i;
      continue;
    }
    i += list ? 2 : 4;
    if (after_word && i < s.size() && s[i] == 's') ++i;
    // Numbers separated by spaces, commas, colons (ranges taken as ends) or "and".
    for (;;) {
      while (i < s.size() && (s[i] == ' ' || s[i] == ',' || s[i] == ':' || s[i] == '#')) ++i;
      if (s.substr(i, 4) == "and ") {
        i += 4;
        continue;
      }
      if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) break;
      int v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && v <= kMaxPort) {
        v = v * 10 + (s[i] - '0');
        ++i;
      }
      if (v >= 1 && v <= kMaxPort) ports.push_back(v);
    }
  }
  return ports;
}

absl::StatusOr<Identity> ParseIdentity(absl::string_view reply) {
  absl::string_view s = absl::StripAsciiWhitespace(reply);
  if (s.empty()) return Bad("*IDN? reply", reply);
  std::vector<std::string> f = absl::StrSplit(s, absl::MaxSplits(',', 3));
  for (auto& x : f) x = std::string(absl::StripAsciiWhitespace(x));
  Identity id;
  id.manufacturer = f[0];
  if (f.size() > 1) id.model = f[1];
  if (f.size() > 2) id.serial = f[2];
  if (f.size() > 3) id.firmware = f[3];
  return id;
}

absl::StatusOr<std::pair<int, int>> ParseSize(absl::string_view reply) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(reply));
  std::vector<absl::string_view> parts = absl::StrSplit(s, absl::ByAnyChar(",x"));
  int in = 0;
  int eg = 0;
  if (parts.size() == 1) {
    if (!absl::SimpleAtoi(parts[0], &in)) return Bad(":oxc:swit:size? reply", reply);
    eg = in;
  } else if (parts.size() == 2) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[0]), &in) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[1]), &eg)) {
      return Bad(":oxc:swit:size? reply", reply);
    }
  } else {
    return Bad(":oxc:swit:size? reply", reply);
  }
  if (in < 1 || eg < 1 || in > kMaxPort || eg > kMaxPort) {
    return Bad(":oxc:swit:size? reply", reply);
  }
  return std::make_pair(in, eg);
}

}  // namespace mixnet::ocs::scpi
