// TL1 text formats (see tl1_format.h). Pure functions.
#include "ocs_driver/polatis/tl1_format.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mixnet::ocs::tl1 {
namespace {

absl::Status Bad(absl::string_view what, const std::vector<std::string>& lines) {
  std::string shown = absl::StrJoin(lines, " | ");
  if (shown.size() > 200) shown = shown.substr(0, 200) + "...";
  return absl::InvalidArgumentError(absl::StrCat("malformed TL1 ", what, ": '", shown, "'"));
}

std::vector<std::string> Words(absl::string_view line) {
  return absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
}

}  // namespace

std::string FormatCommand(absl::string_view verb, absl::string_view tid, absl::string_view aid,
                          absl::string_view ctag, absl::string_view params) {
  if (params.empty()) return absl::StrCat(verb, ":", tid, ":", aid, ":", ctag, ":;");
  return absl::StrCat(verb, ":", tid, ":", aid, ":", ctag, "::", params, ";");
}

absl::StatusOr<BlockKind> ParseBlock(const std::vector<std::string>& lines, Response* out) {
  size_t m = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> w = Words(lines[i]);
    if (w.empty()) continue;
    const std::string& first = w[0];
    if (first == "IP" || first == "PF" || first == "OK" || first == "NA" || first == "NG" ||
        first == "RL") {
      if (w.size() <= 2) return BlockKind::kAcknowledgement;
    }
    if (first == "A" || first == "*C" || first == "**" || first == "*" || first == "*^") {
      if (w.size() >= 3) return BlockKind::kAutonomous;
    }
    if (first == "M") {
      if (w.size() < 3) return Bad("response line", lines);
      m = i;
      out->ctag = w[1];
      out->status = w[2];
      break;
    }
  }
  if (m == lines.size()) return Bad("response (no 'M <ctag> <status>' line)", lines);
  out->code.clear();
  out->comment.clear();
  out->quoted.clear();
  bool in_comment = false;
  for (size_t i = m + 1; i < lines.size(); ++i) {
    absl::string_view l = absl::StripAsciiWhitespace(lines[i]);
    if (l.empty()) continue;
    if (in_comment || absl::StartsWith(l, "/*")) {
      absl::string_view text = l;
      absl::ConsumePrefix(&text, "/*");
      in_comment = !absl::ConsumeSuffix(&text, "*/");
      if (!out->comment.empty()) out->comment += ' ';
      out->comment += std::string(absl::StripAsciiWhitespace(text));
      continue;
    }
    if (l.front() == '"') {
      if (l.size() < 2 || l.back() != '"') return Bad("data line", lines);
      out->quoted.emplace_back(l.substr(1, l.size() - 2));
      continue;
    }
    if (out->code.empty() && out->status != "COMPLD") {
      out->code = Words(l)[0];
      continue;
    }
    return Bad("response body", lines);
  }
  return BlockKind::kResponse;
}

absl::StatusOr<std::vector<std::pair<int, int>>> ParsePatches(const Response& r) {
  std::vector<std::pair<int, int>> out;
  for (const auto& q : r.quoted) {
    std::vector<absl::string_view> f = absl::StrSplit(q, ',');
    int a = 0;
    int b = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(f[0]), &a) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(f[1]), &b) || a < 1 || b < 1) {
      return absl::InvalidArgumentError(absl::StrCat("malformed TL1 patch line: '\"", q, "\"'"));
    }
    out.emplace_back(a, b);
  }
  return out;
}

absl::StatusOr<NeType> ParseNeType(const Response& r) {
  if (r.quoted.empty()) return absl::InvalidArgumentError("TL1 RTRV-NETYPE: no data line");
  std::vector<std::string> f = absl::StrSplit(r.quoted[0], ',');
  for (auto& x : f) {
    absl::string_view v = absl::StripAsciiWhitespace(x);
    absl::ConsumePrefix(&v, "\\\"");
    absl::ConsumeSuffix(&v, "\\\"");
    x = std::string(absl::StripAsciiWhitespace(v));
  }
  NeType t;
  t.vendor = f[0];
  if (f.size() > 1) t.model = f[1];
  if (f.size() > 2) t.type = f[2];
  if (f.size() > 3) t.version = f[3];
  if (t.vendor.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("TL1 RTRV-NETYPE: '", r.quoted[0], "'"));
  }
  return t;
}

int SizeFromModel(absl::string_view model) {
  std::string s = absl::AsciiStrToLower(model);
  for (size_t x = s.find('x'); x != std::string::npos; x = s.find('x', x + 1)) {
    size_t lo = x;
    while (lo > 0 && std::isdigit(static_cast<unsigned char>(s[lo - 1]))) --lo;
    size_t hi = x + 1;
    while (hi < s.size() && std::isdigit(static_cast<unsigned char>(s[hi]))) ++hi;
    int a = 0;
    int b = 0;
    if (lo < x && hi > x + 1 && absl::SimpleAtoi(s.substr(lo, x - lo), &a) &&
        absl::SimpleAtoi(s.substr(x + 1, hi - x - 1), &b) && a == b && a > 0) {
      return a;
    }
  }
  return 0;
}

}  // namespace mixnet::ocs::tl1
