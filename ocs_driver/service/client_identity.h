// Who may change the switch: the --allow-client list of mixnet-ocsd and its
// match against a client certificate.
//
// An entry without '=' is a common name ("ctl-2") and matches a certificate
// whose CN is exactly that. An entry with '=' is a whole distinguished name
// ("CN=ctl-2,O=mixnet", RFC 4514 / RFC 2253 syntax: ',' or ';' between
// RDNs, '+' inside a multi-valued RDN, '\' escapes a special character or
// gives a byte as two hex digits, a value may be "quoted", spaces around
// names and values are ignored). It matches when the certificate's subject
// has the same attributes, in any order: gRPC reports the subject in RFC
// 2253 form, which lists the RDNs last-first ("O=mixnet,CN=ctl-2" for a
// certificate made with -subj /CN=ctl-2/O=mixnet), so the order an operator
// writes must not matter. Attribute names compare case-insensitively
// ("cn" = "CN"), values exactly (case matters); every attribute of the
// subject must be listed ("CN=ctl-2" alone does not match a subject that
// also has O=mixnet: use the bare common name for that).
//
// Pure functions and an immutable list; any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace mixnet::ocs {

// One attribute of a distinguished name: the name upper-cased ("CN"), the
// value unescaped.
using DnAttribute = std::pair<std::string, std::string>;

// The attributes of `dn`, sorted (so two names with the same attributes in
// any order compare equal). InvalidArgument naming the problem for a
// malformed name (no '=', an empty attribute name, a bad escape, an
// unterminated quote).
absl::StatusOr<std::vector<DnAttribute>> ParseDistinguishedName(absl::string_view dn);

class ClientAllowList {
 public:
  // InvalidArgument naming the entry when one is empty or malformed.
  static absl::StatusOr<ClientAllowList> Create(const std::vector<std::string>& entries);
  ClientAllowList() = default;

  bool empty() const { return common_names_.empty() && subjects_.empty(); }

  // True when a certificate with subject `subject` (RFC 2253, as gRPC's
  // x509_subject property) and common names `common_names` is listed.
  bool Allows(absl::string_view subject, const std::vector<std::string>& common_names) const;

 private:
  std::vector<std::string> common_names_;
  std::vector<std::vector<DnAttribute>> subjects_;
};

}  // namespace mixnet::ocs
