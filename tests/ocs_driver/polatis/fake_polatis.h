// FakePolatis: a fake HUBER+SUHNER Polatis N x N switch speaking SCPI over a
// real TCP socket (127.0.0.1, ephemeral port), for the polatis backend tests.
//
// It follows the documented command syntax (case-insensitive, short or long
// keywords, e.g. `:OXC:SWITch:CONNect:ADD (@1,2),(@17,18)`): *IDN?, *OPC?,
// *CLS, :oxc:swit:size?, :oxc:swit:conn:add|sub|only, :oxc:swit:disc:all,
// :oxc:swit:conn:stat?, :oxc:swit:conn:port? N, :syst:err[:next]?,
// :syst:err:all?, :oxc:boot:mode[?]. Like a real instrument it rejects a bad
// command (syntax, port out of range, port already in use, unknown header) by
// queueing an SCPI error (`-221,"Settings conflict; port 3 already
// connected"`) and not answering it, and leaves the state unchanged.
//
// Fault injection (callable from the test thread at any time): a delay before
// every reply (optionally only for commands with a prefix), garbage replies,
// closing the connection right after the k-th command, ports that fail to
// switch (the rest of the batch is made; an error names the port), and a
// per-connection switching delay that *OPC? waits out (the switch as a
// whole: *OPC? on any connection waits for every change in progress).
// :oxc:swit:conn:stat? reports a connection change only once its switching
// is over, so a map read before *OPC? answered misses what is still moving.
//
// Threading: FakeLineServer's threads (one per connection) run the
// interpreter; the state is behind a mutex and the public methods may be
// called from any thread. Stop() (and the destructor) joins the threads.
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

struct FakePolatisOptions {
  int size = 16;  // N x N: ingress 1..N, egress N+1..2N
  std::string idn = "Polatis,N-OST-16x16-HU1-DMHNS-FAKE,FK000123,7.3.1.4";
};

class FakePolatis {
 public:
  using Received = FakeLineServer::Received;

  explicit FakePolatis(FakePolatisOptions options = {});
  FakePolatis(const FakePolatis&) = delete;
  FakePolatis& operator=(const FakePolatis&) = delete;

  // Listens on 127.0.0.1 with an ephemeral port and starts the threads.
  absl::Status Start() { return server_.Start(); }
  void Stop() { server_.Stop(); }
  int port() const { return server_.port(); }
  int size() const { return options_.size; }

  // State: ingress -> egress, as commanded (changes still switching
  // included; :conn:stat? shows them only once their switching is over).
  std::map<int, int> Connections() const;
  void SetConnection(int ingress, int egress);  // no checks (test setup)

  // Fault injection.
  void SetReplyDelay(absl::Duration delay, std::string only_prefix = "") {
    server_.SetReplyDelay(delay, std::move(only_prefix));
  }
  void SetGarbageReply(std::string prefix, std::string reply, int skip = 0) {
    server_.SetGarbageReply(std::move(prefix), std::move(reply), skip);
  }
  void DropAfterCommands(int k) { server_.DropAfterLines(k); }
  void FailPort(int port);  // connections touching `port` fail to switch
  void RepairPorts();       // no port fails any more
  void SetSwitchingDelay(absl::Duration per_connection);  // connections one after another
  void SetSwitchingTime(absl::Duration per_command);      // all of a command at once
  void QueueError(int code, std::string message);

  std::vector<Received> received() const { return server_.received(); }
  std::vector<std::string> ErrorQueue() const;
  int accepted() const { return server_.accepted(); }

 private:
  // Handles one command line (a connection thread).
  FakeLineServer::Reply Handle(const std::string& line);
  void AddError(int code, const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Modify(const std::string& verb, const std::string& args) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FakePolatisOptions options_;

  mutable absl::Mutex mu_;
  // A commanded change that :conn:stat? shows from `due` (when the
  // switching is over); egress 0 is a removal.
  struct Pending {
    absl::Time due;
    int ingress = 0;
    int egress = 0;
  };
  // Applies the pending changes that are due to shown_.
  void Settle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<int, int> conn_ ABSL_GUARDED_BY(mu_);   // ingress -> egress, as commanded
  std::map<int, int> shown_ ABSL_GUARDED_BY(mu_);  // what :conn:stat? reports
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  std::set<int> failed_ports_ ABSL_GUARDED_BY(mu_);
  absl::Duration switching_delay_ ABSL_GUARDED_BY(mu_);
  bool switching_parallel_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time busy_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string boot_mode_ ABSL_GUARDED_BY(mu_) = "DARK";

  // Last: its threads call Handle, so it stops (is destroyed) first.
  FakeLineServer server_;
};

}  // namespace mixnet::ocs::testing
