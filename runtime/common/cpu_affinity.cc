// CPU affinity helpers (see cpu_affinity.h).
#include "runtime/common/cpu_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/common/status.h"

namespace mixnet {
namespace {

std::vector<int> CpusOf(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

absl::StatusOr<std::vector<int>> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    const int err = errno;
    return absl::InternalError(
        absl::StrCat("sched_getaffinity failed: ", ErrnoText(err), " (errno ", err, ")"));
  }
  return CpusOf(set);
}

absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> range = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = -1;
    int hi = -1;
    bool ok = absl::SimpleAtoi(range[0], &lo);
    if (ok) ok = range.size() == 1 ? (hi = lo, true) : absl::SimpleAtoi(range[1], &hi);
    if (!ok || lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("bad CPU list element '", part, "' in '", text,
                                                     "' (want N or N-M, 0 <= N <= M < ",
                                                     CPU_SETSIZE, ")"));
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

absl::Status PinThread(std::thread& thread, int cpu, const std::string& thread_name) {
  if (!thread.joinable()) {
    return absl::FailedPreconditionError(absl::StrCat(thread_name, " is not running"));
  }
  if (cpu < 0 || cpu >= CPU_SETSIZE) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pin ", thread_name, " to CPU ", cpu));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int err = pthread_setaffinity_np(thread.native_handle(), sizeof(set), &set);
  if (err != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pinning ", thread_name, " to CPU ", cpu,
                     ": pthread_setaffinity_np failed: ", ErrnoText(err), " (errno ", err, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ThreadCpus(std::thread& thread) {
  if (!thread.joinable()) return absl::FailedPreconditionError("the thread is not running");
  cpu_set_t set;
  CPU_ZERO(&set);
  int err = pthread_getaffinity_np(thread.native_handle(), sizeof(set), &set);
  if (err != 0) {
    return absl::InternalError(
        absl::StrCat("pthread_getaffinity_np failed: ", ErrnoText(err), " (errno ", err, ")"));
  }
  return CpusOf(set);
}

}  // namespace mixnet
