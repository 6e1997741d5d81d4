// The command-line flags every OCS client program shares (mixnetctl,
// mixnet_ocs_bench): --target, --timeout-ms and the TLS options, registered
// on a CLI11 (sub)command; the TLS options alone for mixnet-controller's
// switch clients. Main thread only.
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

// Adds --target (required when `target_required`), --timeout-ms and the TLS
// flags (AddOcsTlsFlags, no prefix) to `app`.
void AddOcsClientFlags(CLI::App* app, OcsClientFlags* flags, bool target_required);

// Adds --<prefix>tls, --<prefix>tls-ca, --<prefix>tls-cert, --<prefix>tls-key
// and --<prefix>tls-server-name to `app` (mixnet-controller: prefix "ocs-",
// for the calls to every --ocs switch).
void AddOcsTlsFlags(CLI::App* app, OcsTlsOptions* tls, const std::string& prefix);

}  // namespace mixnet::ocs
