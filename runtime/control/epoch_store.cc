// EpochStore (see epoch_store.h): atomic, durable epoch file. Start-up and
// planner thread.
#include "runtime/control/epoch_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status.h"

namespace mixnet::control {
namespace {

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StrCat("epoch file ", path), "write");
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EpochStore> EpochStore::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("controller state dir: empty path");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("controller state dir ", dir, ": create: ", ec.message()));
  }
  const std::string lock = dir + "/controller.lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(absl::StrCat("controller state dir lock ", lock), "open");
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "controller state dir ", dir, " is in use by another controller (", lock, " locked)"));
    }
    return ErrnoStatus(absl::StrCat("controller state dir lock ", lock), "flock", err);
  }
  return EpochStore(dir, fd);
}

EpochStore::EpochStore(EpochStore&& o) noexcept : dir_(std::move(o.dir_)), lock_fd_(o.lock_fd_) {
  o.lock_fd_ = -1;
}

EpochStore::~EpochStore() {
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
}

absl::StatusOr<uint64_t> EpochStore::Load() const {
  const std::string file = path();
  std::ifstream in(file);
  if (!in) {
    if (errno == ENOENT || !std::filesystem::exists(file)) return 0;
    return ErrnoStatus(absl::StrCat("epoch file ", file), "open");
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    if (!j.contains("highest_epoch") || !j["highest_epoch"].is_number_unsigned()) {
      return absl::InvalidArgumentError(
          absl::StrCat("epoch file ", file, ": no unsigned 'highest_epoch'"));
    }
    return j["highest_epoch"].get<uint64_t>();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("epoch file ", file, ": ", e.what()));
  }
}

absl::Status EpochStore::Save(uint64_t epoch, const std::string& controller_id) const {
  const std::string file = path();
  const std::string tmp = file + ".tmp";
  nlohmann::json j;
  j["highest_epoch"] = epoch;
  j["controller_id"] = controller_id;
  const std::string data = j.dump() + "\n";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(absl::StrCat("epoch file ", tmp), "open");
  absl::Status s = WriteAll(fd, data, tmp);
  if (s.ok() && fsync(fd) != 0) s = ErrnoStatus(absl::StrCat("epoch file ", tmp), "fsync");
  if (close(fd) != 0 && s.ok()) s = ErrnoStatus(absl::StrCat("epoch file ", tmp), "close");
  if (!s.ok()) return s;
  if (rename(tmp.c_str(), file.c_str()) != 0) {
    return ErrnoStatus(absl::StrCat("epoch file ", tmp, " -> ", file), "rename");
  }
  const int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus(absl::StrCat("controller state dir ", dir_), "open");
  const int rc = fsync(dfd);
  const int err = errno;
  close(dfd);
  if (rc != 0) return ErrnoStatus(absl::StrCat("controller state dir ", dir_), "fsync", err);
  return absl::OkStatus();
}

}  // namespace mixnet::control
