// Shared OCS client flags: see client_flags.h.
#include "ocs_driver/client/client_flags.h"

#include "absl/time/time.h"

namespace mixnet::ocs {

OcsClientOptions OcsClientFlags::Options() const {
  OcsClientOptions o;
  o.target = target;
  o.tls = tls;
  o.timeout = absl::Milliseconds(timeout_ms);
  return o;
}

void AddOcsClientFlags(CLI::App* app, OcsClientFlags* flags, bool target_required) {
  CLI::Option* target =
      app->add_option("--target", flags->target,
                      "OCS driver address: host:port, [v6]:port or unix:/path/to/socket");
  if (target_required) target->required();
  app->add_option("--timeout-ms", flags->timeout_ms, "deadline of each call in milliseconds")
      ->check(CLI::Range(1, 3600 * 1000))
      ->capture_default_str();
  AddOcsTlsFlags(app, &flags->tls, "");
}

void AddOcsTlsFlags(CLI::App* app, OcsTlsOptions* tls, const std::string& prefix) {
  const std::string p = "--" + prefix;
  app->add_flag(
      p + "tls", tls->enabled,
      "use TLS (implied by the " + p + "tls-* files; system roots without " + p + "tls-ca)");
  app->add_option(p + "tls-ca", tls->ca_file, "PEM CA bundle that signs the server certificate")
      ->check(CLI::ExistingFile);
  app->add_option(p + "tls-cert", tls->cert_file, "PEM client certificate (mTLS)")
      ->check(CLI::ExistingFile);
  app->add_option(p + "tls-key", tls->key_file, "PEM client private key (mTLS)")
      ->check(CLI::ExistingFile);
  app->add_option(p + "tls-server-name", tls->server_name,
                  "name to verify in the server certificate instead of the target's host");
}

}  // namespace mixnet::ocs
