// Helpers shared by the rendezvous store implementations (file, TCP, prefix):
// argument checks, counter arithmetic, key quoting for messages and an owning
// file descriptor. Internal to runtime/rendezvous; usable from any thread.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mixnet::rendezvous::internal {

// "'key'" with non-printable bytes escaped and very long keys shortened, for
// error messages.
std::string QuoteKey(absl::string_view key);

// InvalidArgument for an empty key or one longer than kMaxKeyBytes.
absl::Status CheckKey(absl::string_view key);
// InvalidArgument for a value longer than kMaxValueBytes.
absl::Status CheckValue(absl::string_view key, absl::string_view value);

// Parses the decimal counter stored under `key` ("" is not a counter) and adds
// `delta`; InvalidArgument when the value is not an integer or the sum overflows.
absl::StatusOr<int64_t> AddToCounter(absl::string_view key, const std::string* current,
                                     int64_t delta);

// Milliseconds of a timeout for the wire and for poll(): negative durations
// become 0, infinite becomes -1, the rest rounds up.
int64_t TimeoutToMillis(absl::Duration timeout);

// Sleeps for `*backoff` (capped by `deadline`) and grows it by 2x up to `max`.
void SleepBackoff(absl::Duration* backoff, absl::Duration max, absl::Time deadline);

// Owns a file descriptor; closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace mixnet::rendezvous::internal
