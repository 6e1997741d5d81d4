// FakeLineServer: the TCP side of the fake switches of the polatis tests (SCPI
// and TL1): listens on 127.0.0.1 with an ephemeral port, serves each
// connection in its own thread, hands every received line to a protocol
// handler and sends back what it answers. It records every line with its
// arrival time and injects transport faults: a delay before replies, garbage
// replies, and closing the connection right after the k-th line.
//
// Threading: an accept thread plus one thread per connection; the handler
// runs on the connection threads (it must lock its own state). Public methods
// may be called from any thread; Stop() (and the destructor) wakes and joins
// all threads, also those sleeping in SleepUnlessStopped.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mixnet::ocs::testing {

class FakeLineServer {
 public:
  struct Received {
    std::string line;
    absl::Time at;
  };
  struct Reply {
    bool answer = false;
    std::string text;  // sent as is (the handler adds line endings)
  };
  // Called with the connection number (1, 2, ... in accept order) and the
  // line without its line ending.
  using Handler = std::function<Reply(int connection, const std::string& line)>;

  explicit FakeLineServer(Handler handler);
  ~FakeLineServer();
  FakeLineServer(const FakeLineServer&) = delete;
  FakeLineServer& operator=(const FakeLineServer&) = delete;

  absl::Status Start();
  void Stop();
  int port() const { return port_; }

  // Delay before sending a reply (only to lines starting with `only_prefix`,
  // case-insensitive, when given).
  void SetReplyDelay(absl::Duration delay, std::string only_prefix = "");
  // Lines starting with `prefix` (case-insensitive) are answered with `reply`
  // + "\n" instead of reaching the handler, except the first `skip` of them;
  // an empty prefix turns this off.
  void SetGarbageReply(std::string prefix, std::string reply, int skip = 0);
  // Closes the connection right after the k-th next line (handled, not
  // answered). 0: never.
  void DropAfterLines(int k);

  std::vector<Received> received() const;
  int accepted() const;

  // For handlers: sleeps `d` or until Stop().
  void SleepUnlessStopped(absl::Duration d);

 private:
  void Run();
  void Serve(int fd, int connection);

  Handler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Received> received_ ABSL_GUARDED_BY(mu_);
  absl::Duration reply_delay_ ABSL_GUARDED_BY(mu_);
  std::string reply_delay_prefix_ ABSL_GUARDED_BY(mu_);
  std::string garbage_prefix_ ABSL_GUARDED_BY(mu_);
  std::string garbage_reply_ ABSL_GUARDED_BY(mu_);
  int garbage_skip_ ABSL_GUARDED_BY(mu_) = 0;
  int drop_after_ ABSL_GUARDED_BY(mu_) = 0;
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mixnet::ocs::testing
