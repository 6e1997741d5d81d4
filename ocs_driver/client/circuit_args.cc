// Circuit argument and file parsing: see circuit_args.h.
#include "ocs_driver/client/circuit_args.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

bool ParsePort(absl::string_view s, uint32_t* port) {
  if (s.empty() || s.find_first_not_of("0123456789") != absl::string_view::npos) return false;
  return absl::SimpleAtoi(s, port) && *port >= 1;
}

absl::StatusOr<uint32_t> PortFromJson(const nlohmann::json& v, absl::string_view where) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 ||
      v.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a port number >= 1, got ", v.dump()));
  }
  return v.get<uint32_t>();
}

}  // namespace

absl::StatusOr<v1::Circuit> ParseCircuitArg(absl::string_view text) {
  size_t sep = text.find_first_of("-:");
  uint32_t a = 0;
  uint32_t b = 0;
  if (sep == absl::string_view::npos || !ParsePort(text.substr(0, sep), &a) ||
      !ParsePort(text.substr(sep + 1), &b)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad circuit '", text, "': expected PORT-PORT with ports >= 1, e.g. 1-2"));
  }
  v1::Circuit c;
  c.set_port_a(a);
  c.set_port_b(b);
  return c;
}

absl::StatusOr<std::vector<v1::Circuit>> CircuitsFromJson(const nlohmann::json& doc,
                                                          absl::string_view source) {
  const nlohmann::json* list = &doc;
  if (doc.is_object()) {
    auto it = doc.find("circuits");
    if (it == doc.end()) it = doc.find("desired");  // `mixnetctl ocs get --json` output
    if (it == doc.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": expected a list of circuits or an object with \"circuits\" (or \"desired\")"));
    }
    list = &*it;
  }
  if (!list->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": circuits must be a list"));
  }
  std::vector<v1::Circuit> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& item = (*list)[i];
    std::string where = absl::StrCat(source, ": circuits[", i, "]");
    v1::Circuit c;
    if (item.is_array() && item.size() == 2) {
      absl::StatusOr<uint32_t> a = PortFromJson(item[0], where);
      if (!a.ok()) return a.status();
      absl::StatusOr<uint32_t> b = PortFromJson(item[1], where);
      if (!b.ok()) return b.status();
      c.set_port_a(*a);
      c.set_port_b(*b);
    } else if (item.is_object() && item.contains("port_a") && item.contains("port_b") &&
               item.size() == 2) {
      absl::StatusOr<uint32_t> a = PortFromJson(item["port_a"], where + ".port_a");
      if (!a.ok()) return a.status();
      absl::StatusOr<uint32_t> b = PortFromJson(item["port_b"], where + ".port_b");
      if (!b.ok()) return b.status();
      c.set_port_a(*a);
      c.set_port_b(*b);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": expected [a, b] or {\"port_a\": a, \"port_b\": b}, got ", item.dump()));
    }
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<std::vector<v1::Circuit>> LoadCircuitsFile(const std::string& path) {
  nlohmann::json doc;
  try {
    if (path == "-") {
      doc = nlohmann::json::parse(std::cin);
    } else {
      std::ifstream in(path);
      if (!in) {
        int err = errno;
        return absl::InvalidArgumentError(
            absl::StrCat("cannot read circuits file '", path, "': ", ErrnoText(err)));
      }
      doc = nlohmann::json::parse(in);
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON: ", e.what()));
  }
  return CircuitsFromJson(doc, path);
}

}  // namespace mixnet::ocs
