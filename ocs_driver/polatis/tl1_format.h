// TL1 text formats as spoken by Polatis switches on TCP port 3082: command
// lines `VERB:TID:AID:CTAG::PARAMS;` and response blocks
//
//      <SID> <date> <time>
//   M  <CTAG> COMPLD            (or DENY, then an error code such as SROF)
//      "1,17"                   (quoted data lines)
//      /* comment */
//   ;
//
// plus autonomous messages (`A  <atag> REPT ...`, `*C ...`) and
// acknowledgements (`IP <ctag>` ... `<`) that a client skips. Pure
// functions; any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mixnet::ocs::tl1 {

// "VERB:TID:AID:CTAG:;" or, with params, "VERB:TID:AID:CTAG::PARAMS;".
std::string FormatCommand(absl::string_view verb, absl::string_view tid, absl::string_view aid,
                          absl::string_view ctag, absl::string_view params = "");

struct Response {
  std::string ctag;
  std::string status;               // COMPLD, DENY, PRTL, ...
  std::string code;                 // DENY error code (first bare body word), else ""
  std::string comment;              // text of /* ... */ body lines
  std::vector<std::string> quoted;  // contents of "..." body lines, quotes removed
  bool completed() const { return status == "COMPLD"; }
};

enum class BlockKind { kResponse, kAutonomous, kAcknowledgement };

// Classifies one block of trimmed lines (without its terminating ';' or '<')
// and fills `out` for a response. InvalidArgument when the block is none of
// the three (quoting it).
absl::StatusOr<BlockKind> ParseBlock(const std::vector<std::string>& lines, Response* out);

// RTRV-PATCH data lines "in,out" -> {in, out}.
absl::StatusOr<std::vector<std::pair<int, int>>> ParsePatches(const Response& r);

// RTRV-NETYPE data: "<vendor>,<model>,<type>,<version>" (fields may be
// quoted with \"); missing fields empty.
struct NeType {
  std::string vendor;
  std::string model;
  std::string type;
  std::string version;
};
absl::StatusOr<NeType> ParseNeType(const Response& r);

// The N of an "...NxN..." model name (e.g. N-OST-48x48-HU1 -> 48), or 0.
int SizeFromModel(absl::string_view model);

}  // namespace mixnet::ocs::tl1
