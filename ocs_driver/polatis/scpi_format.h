// Polatis SCPI text formats: channel lists such as `(@1,2),(@17,18)`, error
// queue entries (`0,"No error"`, `-222,"Data out of range"`), `*IDN?` and
// `:oxc:swit:size?` replies. Pure functions; any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mixnet::ocs::scpi {

// One one-way connection of an N x N switch: ingress 1..N -> egress N+1..2N.
struct Connection {
  int ingress = 0;
  int egress = 0;
  friend bool operator==(const Connection&, const Connection&) = default;
  friend auto operator<=>(const Connection&, const Connection&) = default;
};

// `(@i1,i2,...),(@e1,e2,...)`: the argument of :oxc:swit:conn:add|sub|only.
std::string FormatConnectionLists(const std::vector<Connection>& connections);

// Parses the reply to :oxc:swit:conn:stat?: two channel lists of equal
// length, paired in order. Accepts white space, upper/lower case, ranges
// `(@1:3)`, and an empty map as "", "(@),(@)" or "<none>". Anything else is
// InvalidArgument quoting the reply.
absl::StatusOr<std::vector<Connection>> ParseConnectionLists(absl::string_view reply);

// An entry of the SCPI error queue (:syst:err?): `<code>,"<message>"`. Code 0
// means the queue is empty. Tolerant of `+0`, missing quotes and spaces.
struct ErrorEntry {
  int code = 0;
  std::string message;
};
absl::StatusOr<ErrorEntry> ParseErrorEntry(absl::string_view reply);

// Port numbers an error message names: numbers after "port"/"ports" and
// inside channel lists `(@...)`. Empty when the message names none.
std::vector<int> PortsNamedIn(absl::string_view message);

// *IDN?: `<manufacturer>,<model>,<serial>,<firmware>` (missing fields empty).
struct Identity {
  std::string manufacturer;
  std::string model;
  std::string serial;
  std::string firmware;
};
absl::StatusOr<Identity> ParseIdentity(absl::string_view reply);

// :oxc:swit:size?: `<ingress>,<egress>` (also accepts `NxM` and a single N).
absl::StatusOr<std::pair<int, int>> ParseSize(absl::string_view reply);

}  // namespace mixnet::ocs::scpi
