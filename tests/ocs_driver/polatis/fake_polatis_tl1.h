// FakePolatisTl1: a fake Polatis N x N switch speaking TL1 over a real TCP
// socket (127.0.0.1, ephemeral port), for the polatis-tl1 backend tests.
//
// Commands (one per line, `VERB:TID:AID:CTAG[::PARAMS];`): ACT-USER (checks
// user and password; every other command on a connection that has not logged
// in is DENY PLNA), CANC-USER, RTRV-NETYPE, RTRV-PATCH, ENT-PATCH::<in>,<out>
// (waits the switching delay, then COMPLD), DLT-PATCH::<port> (ingress or
// egress). Rejections are `M <ctag> DENY` with a code and a comment naming the
// port: IIAC (port out of range, bad AID), SROF (port in use, not connected,
// failed to switch), ICNV (unknown verb), IISP (no ';').
//
// Fault injection: those of FakeLineServer (slow replies, garbage, dropped
// connections) plus failed ports, a switching delay and an autonomous message
// sent before the next response.
//
// Threading: FakeLineServer's connection threads run the interpreter; the
// state is behind a mutex; public methods may be called from any thread.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/ocs_driver/polatis/fake_line_server.h"

namespace mixnet::ocs::testing {

struct FakePolatisTl1Options {
  int size = 16;
  std::string user = "admin";
  std::string password = "s3cret";
  bool size_in_model = true;  // model "N-OST-<N>x<N>-FAKE" or just "N-OST-FAKE"
};

class FakePolatisTl1 {
 public:
  using Received = FakeLineServer::Received;

  explicit FakePolatisTl1(FakePolatisTl1Options options = {});
  FakePolatisTl1(const FakePolatisTl1&) = delete;
  FakePolatisTl1& operator=(const FakePolatisTl1&) = delete;

  absl::Status Start() { return server_.Start(); }
  void Stop() { server_.Stop(); }
  int port() const { return server_.port(); }

  std::map<int, int> Connections() const;  // ingress -> egress
  void SetConnection(int ingress, int egress);

  FakeLineServer& server() { return server_; }  // transport faults, received lines
  void FailPort(int port);
  void SetSwitchingDelay(absl::Duration per_connection);
  void SendAutonomousBeforeNextResponse();

 private:
  FakeLineServer::Reply Handle(int connection, const std::string& line);
  std::string Deny(const std::string& ctag, const std::string& code, const std::string& text)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Compld(const std::string& ctag, const std::vector<std::string>& data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Frame(const std::string& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FakePolatisTl1Options options_;
  mutable absl::Mutex mu_;
  std::map<int, int> conn_ ABSL_GUARDED_BY(mu_);
  std::set<int> logged_in_ ABSL_GUARDED_BY(mu_);  // connection numbers
  std::set<int> failed_ports_ ABSL_GUARDED_BY(mu_);
  absl::Duration switching_delay_ ABSL_GUARDED_BY(mu_);
  bool autonomous_ ABSL_GUARDED_BY(mu_) = false;
  int atag_ ABSL_GUARDED_BY(mu_) = 0;

  FakeLineServer server_;  // last: stops first
};

}  // namespace mixnet::ocs::testing
