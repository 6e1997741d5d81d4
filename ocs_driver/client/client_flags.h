// The command-line flags every OCS client program shares (mixnetctl,
// mixnet_ocs_bench): --target, --timeout-ms and the TLS options, registered
// on a CLI11 (sub)command. Main thread only.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "ocs_driver/client/ocs_client.h"

namespace mixnet::ocs {

struct OcsClientFlags {
  std::string target;
  int timeout_ms = 5000;
  OcsTlsOptions tls;

  OcsClientOptions Options() const;
};

// Adds --target (required when `target_required`), --timeout-ms, --tls,
// --tls-ca, --tls-cert, --tls-key and --tls-server-name to `app`.
void AddOcsClientFlags(CLI::App* app, OcsClientFlags* flags, bool target_required);

}  // namespace mixnet::ocs
