// Circuits as users write them for `mixnetctl ocs apply`: "--circuit 1-2"
// arguments, or a JSON file holding either a list of circuits or an object
// with a "circuits" list (or a "desired" list: the output of `mixnetctl ocs
// get --json`), each circuit [a, b] or {"port_a": a, "port_b": b}. Only syntax and port >= 1 are
// checked here; the daemon validates against the switch. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mixnet/ocs/v1/ocs_driver.pb.h"
#include "nlohmann/json.hpp"

namespace mixnet::ocs {

// "A-B" with decimal ports >= 1 (also "A:B"). InvalidArgument naming the text.
absl::StatusOr<v1::Circuit> ParseCircuitArg(absl::string_view text);

// The circuits of a parsed JSON document (see above); `source` names it in errors.
absl::StatusOr<std::vector<v1::Circuit>> CircuitsFromJson(const nlohmann::json& doc,
                                                          absl::string_view source);

// Reads and parses a circuits file ("-" = stdin).
absl::StatusOr<std::vector<v1::Circuit>> LoadCircuitsFile(const std::string& path);

}  // namespace mixnet::ocs
