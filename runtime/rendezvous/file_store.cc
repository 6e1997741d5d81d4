// FileStore: the rendezvous store on a shared directory (one host, or a shared
// file system). Each key is one file; Set writes a temporary file and renames it
// over the key's file, so readers see all of a value or nothing. Get polls with
// a short backoff. Add takes flock() on "<dir>/.lock" so counters are exact
// across processes. Runs on the calling thread; thread-safe (no mutable state
// besides a process-wide mutex serialising Add).
//
// File names: bytes [A-Za-z0-9_-] and '.' (except as a name's first byte) are
// kept, every other byte becomes %XX. An escaped key longer than one name is
// cut into 200-byte pieces; all but the last become directories named
// "<piece>%%". Neither "%%" nor a leading '.' ever comes out of escaping, so
// the mapping is one-to-one, never leaves the directory, and cannot collide
// with the lock file or temporary files (".tmp.*"). Directories are walked
// with openat(O_NOFOLLOW), so keys of any allowed length work (no PATH_MAX).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/status.h"
#include "runtime/rendezvous/store.h"
#include "runtime/rendezvous/store_internal.h"

namespace mixnet::rendezvous {
namespace {

using internal::UniqueFd;

constexpr size_t kMaxNameBytes = 200;
constexpr absl::Duration kLockTimeout = absl::Seconds(60);
constexpr absl::Duration kMaxPollInterval = absl::Milliseconds(20);

// Serialises Adds within this process so that only other processes contend for
// the flock (which has no blocking-with-timeout form and is therefore polled).
ABSL_CONST_INIT absl::Mutex g_add_mu(absl::kConstInit);

std::atomic<uint64_t> g_tmp_counter{0};

bool IsPlain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// The key's path relative to the store directory, as its components.
std::vector<std::string> EscapeKey(absl::string_view key) {
  std::vector<std::string> parts;
  std::string cur;
  for (unsigned char c : key) {
    auto encode = [&] {
      return IsPlain(c) && !(c == '.' && cur.empty()) ? std::string(1, static_cast<char>(c))
                                                      : absl::StrFormat("%%%02X", c);
    };
    std::string enc = encode();
    if (cur.size() + enc.size() > kMaxNameBytes) {
      parts.push_back(absl::StrCat(cur, "%%"));
      cur.clear();
      enc = encode();
    }
    cur += enc;
  }
  parts.push_back(std::move(cur));
  return parts;
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StrCat("file store: writing ", what), "write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Where a key's file lives: its directory (open) and its name in there. Paths
// are walked with openat() so keys of any length work (no PATH_MAX) and a
// symbolic link planted in the store cannot redirect a write.
struct Location {
  UniqueFd parent;
  std::string name;
  std::string display;  // for messages, shortened
};

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    RETURN_IF_ERROR(internal::CheckValue(key, value));
    ASSIGN_OR_RETURN(std::optional<Location> loc, Locate(key, /*create_dirs=*/true));
    return WriteAtomic(*loc, value);
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    absl::Time deadline = timeout == absl::InfiniteDuration()
                              ? absl::InfiniteFuture()
                              : absl::Now() + std::max(timeout, absl::ZeroDuration());
    absl::Duration backoff = absl::Milliseconds(1);
    while (true) {
      ASSIGN_OR_RETURN(std::optional<Location> loc, Locate(key, /*create_dirs=*/false));
      if (loc.has_value()) {
        ASSIGN_OR_RETURN(std::optional<std::string> value, ReadIfExists(*loc));
        if (value.has_value()) return std::move(*value);
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("file store ", dir_, ": key ", internal::QuoteKey(key), " not set within ",
                         absl::FormatDuration(timeout), " (waited for ", Display(key), ")"));
      }
      internal::SleepBackoff(&backoff, kMaxPollInterval, deadline);
    }
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    ASSIGN_OR_RETURN(std::optional<Location> loc, Locate(key, /*create_dirs=*/true));
    absl::MutexLock process_lock(&g_add_mu);
    ASSIGN_OR_RETURN(UniqueFd lock, LockCounters());  // released when `lock` closes
    ASSIGN_OR_RETURN(std::optional<std::string> current, ReadIfExists(*loc));
    ASSIGN_OR_RETURN(int64_t sum,
                     internal::AddToCounter(key, current.has_value() ? &*current : nullptr, delta));
    RETURN_IF_ERROR(WriteAtomic(*loc, absl::StrCat(sum)));
    return sum;
  }

 private:
  std::string Display(absl::string_view key) const {
    std::string rel = absl::StrJoin(EscapeKey(key), "/");
    if (rel.size() > 240) rel = absl::StrCat(rel.substr(0, 240), "...");
    return absl::StrCat(dir_, "/", rel);
  }

  // Opens the key's directory, creating missing levels when `create_dirs`;
  // nullopt when a level is missing and `create_dirs` is false.
  absl::StatusOr<std::optional<Location>> Locate(absl::string_view key, bool create_dirs) const {
    std::vector<std::string> parts = EscapeKey(key);
    Location loc;
    loc.display = Display(key);
    loc.name = std::move(parts.back());
    parts.pop_back();
    loc.parent.Reset(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!loc.parent.valid()) return ErrnoStatus(absl::StrCat("file store ", dir_), "open");
    for (const std::string& part : parts) {
      if (create_dirs && ::mkdirat(loc.parent.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus(absl::StrCat("file store: creating a directory for ", loc.display),
                           "mkdirat");
      }
      int fd =
          ::openat(loc.parent.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        if (errno == ENOENT && !create_dirs) return std::optional<Location>();
        return ErrnoStatus(absl::StrCat("file store: opening a directory of ", loc.display),
                           "openat");
      }
      loc.parent.Reset(fd);
    }
    return std::optional<Location>(std::move(loc));
  }

  absl::Status WriteAtomic(const Location& loc, absl::string_view value) const {
    std::string tmp = absl::StrCat(".tmp.", ::getpid(), ".", g_tmp_counter.fetch_add(1));
    std::string what = absl::StrCat(loc.display, " (via ", tmp, ")");
    UniqueFd fd(::openat(loc.parent.get(), tmp.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoStatus(absl::StrCat("file store: creating ", what), "openat");
    absl::Status s = WriteAll(fd.get(), value, what);
    if (s.ok() && ::close(fd.Release()) != 0) {
      s = ErrnoStatus(absl::StrCat("file store: writing ", what), "close");
    }
    if (s.ok() &&
        ::renameat(loc.parent.get(), tmp.c_str(), loc.parent.get(), loc.name.c_str()) != 0) {
      s = ErrnoStatus(absl::StrCat("file store: publishing ", what), "renameat");
    }
    if (!s.ok()) ::unlinkat(loc.parent.get(), tmp.c_str(), 0);
    return s;
  }

  // The file's contents, or nullopt when it does not exist (yet).
  static absl::StatusOr<std::optional<std::string>> ReadIfExists(const Location& loc) {
    UniqueFd fd(::openat(loc.parent.get(), loc.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return std::optional<std::string>();
      return ErrnoStatus(absl::StrCat("file store: reading ", loc.display), "openat");
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      return ErrnoStatus(absl::StrCat("file store: reading ", loc.display), "fstat");
    }
    if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > kMaxValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat("file store: ", loc.display,
                                                     " is not a regular file of at most ",
                                                     kMaxValueBytes, " bytes"));
    }
    // A published file is never modified (Set replaces it by rename), so its
    // size is final.
    std::string value(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < value.size()) {
      ssize_t n = ::read(fd.get(), value.data() + got, value.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(absl::StrCat("file store: reading ", loc.display), "read");
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    value.resize(got);
    return std::optional<std::string>(std::move(value));
  }

  // Exclusive flock on the store's lock file, polled with backoff up to kLockTimeout.
  absl::StatusOr<UniqueFd> LockCounters() const {
    std::string path = absl::StrCat(dir_, "/.lock");
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoStatus(absl::StrCat("file store: opening ", path), "open");
    absl::Time deadline = absl::Now() + kLockTimeout;
    absl::Duration backoff = absl::Microseconds(50);
    while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) {
        return ErrnoStatus(absl::StrCat("file store: locking ", path), "flock");
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "file store: could not lock ", path, " within ", absl::FormatDuration(kLockTimeout)));
      }
      internal::SleepBackoff(&backoff, absl::Milliseconds(5), deadline);
    }
    return fd;
  }

  const std::string dir_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> CreateFileStore(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("file store: empty directory name");
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  // mkdir -p
  for (size_t pos = 1; pos <= d.size(); ++pos) {
    if (pos != d.size() && d[pos] != '/') continue;
    std::string prefix = d.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(absl::StrCat("file store: creating ", prefix), "mkdir");
    }
  }
  struct stat st {};
  if (::stat(d.c_str(), &st) != 0) return ErrnoStatus(absl::StrCat("file store: ", d), "stat");
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("file store: ", d, " is not a directory"));
  }
  if (::access(d.c_str(), W_OK | X_OK) != 0) {
    return ErrnoStatus(absl::StrCat("file store: ", d, " is not writable"), "access");
  }
  return std::make_unique<FileStore>(std::move(d));
}

}  // namespace mixnet::rendezvous
