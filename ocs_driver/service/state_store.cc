// mixnet-ocsd's persisted state (see state_store.h): JSON in
// <state-dir>/state.json, replaced with write/fsync/rename/fsync-dir.
#include "ocs_driver/service/state_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status.h"

namespace mixnet::ocs {

absl::StatusOr<StateStore> StateStore::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("empty --state-dir");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("state dir ", dir, ": mkdir failed: ", ec.message()));
  }
  const std::string lock = dir + "/lock";
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(lock, "open");
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("state dir ", dir, " is in use by another mixnet-ocsd (", lock, " locked)"));
    }
    return ErrnoStatus(lock, "flock", err);
  }
  return StateStore(dir, fd);
}

StateStore::StateStore(StateStore&& o) noexcept : dir_(std::move(o.dir_)), lock_fd_(o.lock_fd_) {
  o.lock_fd_ = -1;
}

StateStore::~StateStore() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

absl::StatusOr<std::optional<PersistedState>> StateStore::Load() const {
  const std::string file = path();
  std::ifstream in(file);
  if (!in) {
    if (errno == ENOENT) return std::optional<PersistedState>();
    return ErrnoStatus(file, "open");
  }
  std::stringstream text;
  text << in.rdbuf();
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("state file ", file, ": ", why));
  };
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  PersistedState s;
  try {
    s.epoch = j.at("epoch").get<uint64_t>();
    s.config_version = j.at("config_version").get<uint64_t>();
    s.controller_id = j.value("controller_id", "");
    for (const auto& c : j.at("desired")) {
      const int a = c.at(0).get<int>(), b = c.at(1).get<int>();
      if (a < 1 || b < 1 || a == b) return bad(absl::StrCat("bad circuit ", a, "-", b));
      s.desired.push_back(Circuit::Of(a, b));
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  std::sort(s.desired.begin(), s.desired.end());
  return std::optional<PersistedState>(std::move(s));
}

absl::Status StateStore::Save(const PersistedState& state) const {
  nlohmann::json j;
  j["epoch"] = state.epoch;
  j["config_version"] = state.config_version;
  j["controller_id"] = state.controller_id;
  j["desired"] = nlohmann::json::array();
  for (const Circuit& c : state.desired) j["desired"].push_back({c.a, c.b});
  const std::string data = j.dump() + "\n";
  const std::string file = path(), tmp = file + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(tmp, "open");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      absl::Status s = ErrnoStatus(tmp, "write");
      close(fd);
      return s;
    }
    done += static_cast<size_t>(w);
  }
  if (fsync(fd) != 0) {
    absl::Status s = ErrnoStatus(tmp, "fsync");
    close(fd);
    return s;
  }
  close(fd);
  if (rename(tmp.c_str(), file.c_str()) != 0) return ErrnoStatus(file, "rename");
  int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus(dir_, "open");
  const int rc = fsync(dfd);
  const int err = errno;
  close(dfd);
  if (rc != 0) return ErrnoStatus(dir_, "fsync", err);
  return absl::OkStatus();
}

}  // namespace mixnet::ocs
