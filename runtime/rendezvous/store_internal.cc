// Helpers shared by the rendezvous stores (see store_internal.h). Any thread.
#include "runtime/rendezvous/store_internal.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/rendezvous/store.h"

namespace mixnet::rendezvous::internal {

std::string QuoteKey(absl::string_view key) {
  constexpr size_t kShown = 200;
  if (key.size() <= kShown) return absl::StrCat("'", absl::CHexEscape(key), "'");
  return absl::StrCat("'", absl::CHexEscape(key.substr(0, kShown)), "...' (", key.size(),
                      " bytes)");
}

absl::Status CheckKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous key must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key ", QuoteKey(key), " is ",
                                                   key.size(), " bytes; the limit is ",
                                                   kMaxKeyBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckValue(absl::string_view key, absl::string_view value) {
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous value of key ", QuoteKey(key),
                                                   " is ", value.size(), " bytes; the limit is ",
                                                   kMaxValueBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> AddToCounter(absl::string_view key, const std::string* current,
                                     int64_t delta) {
  int64_t value = 0;
  if (current != nullptr && !absl::SimpleAtoi(*current, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Add on key ", QuoteKey(key), ": its value is not an integer counter"));
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Add on key ", QuoteKey(key), ": ", value, " + ", delta, " overflows int64"));
  }
  return sum;
}

int64_t TimeoutToMillis(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return -1;
  if (timeout <= absl::ZeroDuration()) return 0;
  return absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
}

void SleepBackoff(absl::Duration* backoff, absl::Duration max, absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  absl::SleepFor(std::max(absl::ZeroDuration(), std::min(*backoff, left)));
  *backoff = std::min(*backoff * 2, max);
}

}  // namespace mixnet::rendezvous::internal
