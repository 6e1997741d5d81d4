// MetricsHttps (see metrics_https.h). Owner's thread; requests on the
// server's threads.
#include "runtime/common/metrics_https.h"

#include <httplib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "runtime/common/log.h"

namespace mixnet {
namespace {

// The common name and DNS subject alternative names of the peer's
// certificate (verified by the handshake); empty without one.
std::vector<std::string> PeerNames(const SSL* ssl) {
  std::vector<std::string> names;
  if (ssl == nullptr) return names;
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return names;
  char cn[256];
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
                                          static_cast<int>(sizeof(cn)));
  if (n > 0) names.emplace_back(cn, static_cast<size_t>(n));
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
    if (g->type != GEN_DNS) continue;
    const ASN1_STRING* s = g->d.dNSName;
    names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
  }
  GENERAL_NAMES_free(sans);
  X509_free(cert);
  return names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttps>> MetricsHttps::Start(
    const std::string& host, int port, const TlsServerOptions& tls, std::vector<std::string> allow,
    std::shared_ptr<prometheus::Registry> registry) {
  if (allow.empty()) {
    return absl::InvalidArgumentError(
        "metrics over mTLS need --metrics-allow-client: name the scrapers' certificates (CN or "
        "DNS SAN); without it every certificate --tls-client-ca signed could read them");
  }
  // The files are read here first, for errors that name them.
  for (const auto& [path, what] : {std::pair{tls.cert_file, "--tls-cert"},
                                   {tls.key_file, "--tls-key"},
                                   {tls.client_ca_file, "--tls-client-ca"}}) {
    if (absl::Status s = ReadPem(path, what).status(); !s.ok()) return s;
  }
  auto m = std::unique_ptr<MetricsHttps>(new MetricsHttps());
  m->registry_ = std::move(registry);
  m->allow_ = std::move(allow);
  m->server_ = std::make_unique<httplib::SSLServer>(tls.cert_file.c_str(), tls.key_file.c_str(),
                                                    tls.client_ca_file.c_str());
  if (!m->server_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics endpoint: OpenSSL refused --tls-cert ",
                                                   tls.cert_file, ", --tls-key ", tls.key_file,
                                                   " or --tls-client-ca ", tls.client_ca_file,
                                                   " (a key that does not match "
                                                   "the certificate?)"));
  }
  MetricsHttps* self = m.get();
  m->server_->Get("/metrics", [self](const httplib::Request& req, httplib::Response& res) {
    const std::vector<std::string> names = PeerNames(req.ssl);
    const bool allowed = std::any_of(names.begin(), names.end(), [self](const std::string& n) {
      return std::find(self->allow_.begin(), self->allow_.end(), n) != self->allow_.end();
    });
    if (!allowed) {
      log::Warn(
          "metrics: refused a scrape from {}:{}: certificate names {}, not in "
          "--metrics-allow-client",
          req.remote_addr, req.remote_port, absl::StrJoin(names, ", "));
      res.status = 403;
      res.set_content("certificate not allowed (--metrics-allow-client)\n", "text/plain");
      return;
    }
    prometheus::TextSerializer text;
    res.set_content(text.Serialize(self->registry_->Collect()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  m->port_ = port == 0 ? m->server_->bind_to_any_port(host) : port;
  if (m->port_ <= 0 || (port != 0 && !m->server_->bind_to_port(host, port))) {
    return absl::UnavailableError(absl::StrCat("cannot listen for metrics on ", host, ":", port,
                                               " (address in use or not on this host)"));
  }
  m->thread_ = std::thread([self] {
    pthread_setname_np(pthread_self(), "mx-metrics-tls");
    self->server_->listen_after_bind();
  });
  // stop() ends only a server that runs already: wait for it (bounded), so
  // that a daemon stopped at once does not leave the thread listening.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!m->server_->is_running() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (!m->server_->is_running()) {
    return absl::InternalError(
        absl::StrCat("metrics endpoint on ", host, ":", m->port_, ": not serving after 5 s"));
  }
  return m;
}

MetricsHttps::~MetricsHttps() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace mixnet
