// OcsWatch: one running OcsDriver.Watch stream, read on its own thread, which
// hands every WatchEvent (the snapshot first, then each change) to a
// callback. Cancel() or destruction stops it: once Cancel() has returned no
// new event is delivered (one already inside the callback finishes), and the
// destructor joins the reader thread. Created by OcsClient::Watch; the
// OcsClient must outlive it, and the callback must not destroy it.
//
// Threading: the callback runs on the reader thread; Cancel, WaitFor, done
// and status may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "mixnet/ocs/v1/ocs_driver.grpc.pb.h"

namespace mixnet::ocs {

class OcsWatch {
 public:
  // Return false to end the stream (the final status is then OK).
  using Callback = std::function<bool(const v1::WatchEvent&)>;

  // Starts reading at once. `target` names the daemon in error messages.
  OcsWatch(v1::OcsDriver::Stub* stub, std::string target, Callback on_event);
  ~OcsWatch();  // Cancel() and join.
  OcsWatch(const OcsWatch&) = delete;
  OcsWatch& operator=(const OcsWatch&) = delete;

  // Asks the stream to stop; returns at once. The final status is OK.
  void Cancel();
  // Waits up to `timeout` for the stream to end; true when it has.
  bool WaitFor(absl::Duration timeout);
  bool done() const { return done_.HasBeenNotified(); }
  // The final status once done(): OK after Cancel or the callback's false,
  // otherwise the stream's error (Unavailable when the daemon went away) or
  // OK when the daemon ended the stream.
  absl::Status status() const;
  // Events handed to the callback so far.
  int events() const;

 private:
  void Run(v1::OcsDriver::Stub* stub, Callback on_event);

  const std::string target_;
  grpc::ClientContext context_;
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int events_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace mixnet::ocs
