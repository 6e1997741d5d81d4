// Test helper: a CA and certificates made at test time with the openssl
// command in a temporary directory (nothing is committed), for the mTLS
// tests of mixnet-ocsd's clients (mixnetctl, OcsClient, mixnet-controller),
// of the controller's own API, and of both daemons' HTTPS /metrics (curl).
// EC P-256 keys, valid two days. Header-only; the test thread.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/ocs_driver/client/command_runner.h"

namespace mixnet::testing {

// Runs openssl with `args`; an error naming the command and its output.
inline absl::Status Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  CommandResult r = RunCommand(args, absl::Seconds(30));
  if (r.rc != 0) {
    return absl::InternalError(
        absl::StrCat(r.command, "\nrc=", r.rc, "\nstdout:\n", r.out, "\nstderr:\n", r.err));
  }
  return absl::OkStatus();
}

inline const std::vector<std::string>& EcKeyArgs() {
  static const std::vector<std::string> args = {"-newkey", "ec", "-pkeyopt",
                                                "ec_paramgen_curve:prime256v1", "-nodes"};
  return args;
}

// A self-signed CA "<dir>/<name>.crt/.key".
inline absl::Status MakeCa(const std::string& dir, const std::string& name) {
  std::vector<std::string> args = {"req", "-x509"};
  args.insert(args.end(), EcKeyArgs().begin(), EcKeyArgs().end());
  for (std::string a : {std::string("-keyout"), dir + "/" + name + ".key", std::string("-out"),
                        dir + "/" + name + ".crt", std::string("-days"), std::string("2"),
                        std::string("-subj"), "/CN=" + name}) {
    args.push_back(a);
  }
  return Openssl(args);
}

// A certificate "<dir>/<name>.crt/.key" for CN `cn` (subject /O=MixNet/CN=cn,
// or `subject` when given), signed by `ca`, with the extension lines `ext`.
inline absl::Status MakeCert(const std::string& dir, const std::string& ca, const std::string& name,
                             const std::string& cn, const std::string& ext, int serial,
                             const std::string& subject = "") {
  const std::string base = dir + "/" + name;
  std::ofstream(base + ".ext") << ext;
  std::vector<std::string> req = {"req", "-new"};
  req.insert(req.end(), EcKeyArgs().begin(), EcKeyArgs().end());
  for (std::string a : {std::string("-keyout"), base + ".key", std::string("-out"), base + ".csr",
                        std::string("-subj"), subject.empty() ? "/O=MixNet/CN=" + cn : subject}) {
    req.push_back(a);
  }
  if (absl::Status s = Openssl(req); !s.ok()) return s;
  return Openssl({"x509", "-req", "-in", base + ".csr", "-CA", dir + "/" + ca + ".crt", "-CAkey",
                  dir + "/" + ca + ".key", "-set_serial", std::to_string(serial), "-days", "2",
                  "-out", base + ".crt", "-extfile", base + ".ext"});
}

// Extension lines of a client certificate and of a server certificate for
// 127.0.0.1 and localhost.
inline constexpr char kClientCertExt[] = "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n";
inline constexpr char kLocalServerCertExt[] =
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    "basicConstraints=CA:FALSE\n";

// curl's exit code and output (with "HTTP <code>" last) for `url`, trusting
// `ca`, with the client certificate `cert` and its `key` ("": none).
inline CommandResult CurlGet(const std::string& url, const std::string& ca, const std::string& cert,
                             const std::string& key) {
  std::vector<std::string> args = {"/usr/bin/curl", "-sS", "--max-time", "10",
                                   "--cacert",      ca,    "-w",         "\nHTTP %{http_code}\n"};
  if (!cert.empty()) {
    for (const std::string& a : {std::string("--cert"), cert, std::string("--key"), key}) {
      args.push_back(a);
    }
  }
  args.push_back(url);
  return RunCommand(args, absl::Seconds(20));
}

// One certificate for MakePki: "<name>.crt/.key" for CN `cn`, signed by the
// CA `ca`, with the extension lines `ext`.
struct CertToMake {
  std::string name;
  std::string ca;
  std::string cn;
  std::string ext;
};

// The self-signed CAs `cas`, then `certs` in order (serials 2, 3, ...).
inline absl::Status MakePki(const std::string& dir, const std::vector<std::string>& cas,
                            const std::vector<CertToMake>& certs) {
  for (const std::string& ca : cas) {
    if (absl::Status s = MakeCa(dir, ca); !s.ok()) return s;
  }
  int serial = 2;
  for (const CertToMake& c : certs) {
    if (absl::Status s = MakeCert(dir, c.ca, c.name, c.cn, c.ext, serial++); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace mixnet::testing
