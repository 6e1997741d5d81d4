// --allow-client parsing and matching (see client_identity.h). Any thread.
#include "ocs_driver/service/client_identity.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mixnet::ocs {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::Status Malformed(absl::string_view dn, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("distinguished name '", dn, "': ", why,
                   " (expected NAME=VALUE pairs separated by ',', e.g. CN=ctl-1,O=mixnet)"));
}

}  // namespace

absl::StatusOr<std::vector<DnAttribute>> ParseDistinguishedName(absl::string_view dn) {
  std::vector<DnAttribute> out;
  size_t i = 0;
  const size_t n = dn.size();
  while (true) {
    // Attribute name, up to '='.
    const size_t eq = dn.find('=', i);
    if (eq == absl::string_view::npos) return Malformed(dn, "an attribute without '='");
    std::string type(absl::StripAsciiWhitespace(dn.substr(i, eq - i)));
    if (type.empty()) return Malformed(dn, "an empty attribute name");
    for (char c : type) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') {
        return Malformed(dn, absl::StrCat("bad attribute name '", type, "'"));
      }
    }
    absl::AsciiStrToUpper(&type);
    // Value, up to an unescaped ',', ';' or '+' (or the end).
    i = eq + 1;
    while (i < n && dn[i] == ' ') ++i;
    std::string value;
    size_t kept = 0;  // value.size() without trailing unescaped spaces
    bool quoted = false;
    if (i < n && dn[i] == '"') {
      quoted = true;
      ++i;
    }
    bool closed = !quoted;
    for (; i < n; ++i) {
      const char c = dn[i];
      if (c == '\\') {
        if (i + 1 >= n) return Malformed(dn, "'\\' at the end");
        const int hi = HexDigit(dn[i + 1]);
        const int lo = i + 2 < n ? HexDigit(dn[i + 2]) : -1;
        if (hi >= 0 && lo >= 0) {
          value.push_back(static_cast<char>(hi * 16 + lo));
          i += 2;
        } else if (absl::string_view(",+\"\\<>;=# ").find(dn[i + 1]) != absl::string_view::npos) {
          value.push_back(dn[i + 1]);
          i += 1;
        } else {
          return Malformed(dn, absl::StrCat("bad escape '\\", std::string(1, dn[i + 1]), "'"));
        }
        kept = value.size();
        continue;
      }
      if (quoted && !closed) {
        if (c == '"') {
          closed = true;
          kept = value.size();
        } else {
          value.push_back(c);
          kept = value.size();
        }
        continue;
      }
      if (c == ',' || c == ';' || c == '+') break;
      if (quoted) {  // only spaces may follow a closing quote
        if (c != ' ') return Malformed(dn, "text after a closing quote");
        continue;
      }
      value.push_back(c);
      if (c != ' ') kept = value.size();
    }
    if (!closed) return Malformed(dn, "an unterminated quote");
    value.resize(kept);
    out.emplace_back(std::move(type), std::move(value));
    if (i >= n) break;
    ++i;  // past the separator
    if (absl::StripAsciiWhitespace(dn.substr(i)).empty()) {
      return Malformed(dn, "a separator at the end");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<ClientAllowList> ClientAllowList::Create(const std::vector<std::string>& entries) {
  ClientAllowList list;
  for (const std::string& e : entries) {
    const absl::string_view entry = absl::StripAsciiWhitespace(e);
    if (entry.empty()) return absl::InvalidArgumentError("--allow-client: empty entry");
    if (entry.find('=') == absl::string_view::npos) {
      list.common_names_.emplace_back(entry);
      continue;
    }
    absl::StatusOr<std::vector<DnAttribute>> dn = ParseDistinguishedName(entry);
    if (!dn.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--allow-client: ", dn.status().message()));
    }
    list.subjects_.push_back(*std::move(dn));
  }
  return list;
}

bool ClientAllowList::Allows(absl::string_view subject,
                             const std::vector<std::string>& common_names) const {
  for (const std::string& cn : common_names) {
    if (std::find(common_names_.begin(), common_names_.end(), cn) != common_names_.end()) {
      return true;
    }
  }
  if (subjects_.empty() || subject.empty()) return false;
  absl::StatusOr<std::vector<DnAttribute>> parsed = ParseDistinguishedName(subject);
  if (!parsed.ok()) return false;
  return std::find(subjects_.begin(), subjects_.end(), *parsed) != subjects_.end();
}

}  // namespace mixnet::ocs
