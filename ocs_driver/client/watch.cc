// OcsWatch: see watch.h. The reader thread is the only one that calls into the
// stream; other threads only cancel its ClientContext.
#include "ocs_driver/client/watch.h"

#include <utility>

#include "ocs_driver/client/grpc_status.h"

namespace mixnet::ocs {

OcsWatch::OcsWatch(v1::OcsDriver::Stub* stub, std::string target, Callback on_event)
    : target_(std::move(target)) {
  thread_ = std::thread([this, stub, cb = std::move(on_event)]() mutable { Run(stub, cb); });
}

OcsWatch::~OcsWatch() {
  Cancel();
  if (thread_.joinable()) thread_.join();
}

void OcsWatch::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  context_.TryCancel();
}

bool OcsWatch::WaitFor(absl::Duration timeout) {
  return done_.WaitForNotificationWithTimeout(timeout);
}

absl::Status OcsWatch::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

int OcsWatch::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

void OcsWatch::Run(v1::OcsDriver::Stub* stub, Callback on_event) {
  v1::WatchRequest request;
  std::unique_ptr<grpc::ClientReader<v1::WatchEvent>> reader = stub->Watch(&context_, request);
  v1::WatchEvent event;
  bool stopped_by_us = false;
  while (reader->Read(&event)) {
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) break;
      ++events_;
    }
    if (!on_event(event)) {
      stopped_by_us = true;
      context_.TryCancel();
      break;
    }
  }
  grpc::Status final_status = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_ || stopped_by_us) {
      status_ = absl::OkStatus();
    } else {
      status_ = FromGrpcStatus(final_status, target_, "Watch");
    }
  }
  done_.Notify();
}

}  // namespace mixnet::ocs
