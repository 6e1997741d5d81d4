// Named network namespaces (see netns.h). Helper threads do the setns/unshare
// work so the calling thread keeps its namespace.
#include "ocs_driver/netns/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/common/status.h"

namespace mixnet::netns {
namespace {

// Makes /var/run/netns a shared mount (bind-mounting it onto itself first when
// needed), as iproute2 does, so that unmounting a namespace file propagates to
// every mount namespace (e.g. children of RunInNetnsCommand).
absl::Status PrepareRunDir() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (mkdir(kNetnsRunDir, 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(kNetnsRunDir, "mkdir");
  }
  bool bound = false;
  while (mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr) != 0) {
    if (errno != EINVAL || bound) return ErrnoStatus(kNetnsRunDir, "mount(MS_SHARED)");
    if (mount(kNetnsRunDir, kNetnsRunDir, "none", MS_BIND | MS_REC, nullptr) != 0) {
      return ErrnoStatus(kNetnsRunDir, "mount(MS_BIND)");
    }
    bound = true;
  }
  return absl::OkStatus();
}

std::string ProcSysPath(absl::string_view path) {
  return absl::StrCat("/proc/sys/", absl::StripPrefix(path, "/"));
}

}  // namespace

bool IsValidNamespaceName(absl::string_view name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string NamespacePath(absl::string_view name) { return absl::StrCat(kNetnsRunDir, "/", name); }

bool HavePrivileges() { return geteuid() == 0; }

absl::Status CreateNamespace(absl::string_view name) {
  if (!IsValidNamespaceName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("bad namespace name '", name, "'"));
  }
  if (!HavePrivileges()) {
    return absl::PermissionDeniedError(
        absl::StrCat("creating network namespace '", name, "' needs root"));
  }
  RETURN_IF_ERROR(PrepareRunDir());
  const std::string path = NamespacePath(name);
  int fd = open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat("network namespace '", name, "' exists"));
    }
    return ErrnoStatus(path, "open(O_CREAT|O_EXCL)");
  }
  close(fd);
  absl::Status status;
  std::thread t([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      status = ErrnoStatus(absl::StrCat("namespace ", name), "unshare(CLONE_NEWNET)");
      return;
    }
    if (mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
      status = ErrnoStatus(path, "mount(MS_BIND /proc/thread-self/ns/net)");
    }
  });
  t.join();
  if (!status.ok()) unlink(path.c_str());
  return status;
}

absl::Status DeleteNamespace(absl::string_view name) {
  if (!IsValidNamespaceName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("bad namespace name '", name, "'"));
  }
  const std::string path = NamespacePath(name);
  if (umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return ErrnoStatus(path, "umount2");
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(path, "unlink");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListNamespaces(absl::string_view prefix) {
  std::vector<std::string> names;
  DIR* dir = opendir(kNetnsRunDir);
  if (dir == nullptr) {
    if (errno == ENOENT) return names;
    return ErrnoStatus(kNetnsRunDir, "opendir");
  }
  while (dirent* e = readdir(dir)) {
    absl::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    if (absl::StartsWith(n, prefix)) names.emplace_back(n);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool NamespaceExists(absl::string_view name) {
  struct stat st;
  return IsValidNamespaceName(name) && stat(NamespacePath(name).c_str(), &st) == 0;
}

absl::StatusOr<int> OpenNamespaceFd(absl::string_view name) {
  if (!IsValidNamespaceName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("bad namespace name '", name, "'"));
  }
  const std::string path = NamespacePath(name);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("network namespace '", name, "' not found (", path, ")"));
    }
    return ErrnoStatus(path, "open");
  }
  return fd;
}

absl::Status RunInNamespace(absl::string_view name, const std::function<absl::Status()>& fn) {
  int fd = -1;
  if (!name.empty()) {
    ASSIGN_OR_RETURN(fd, OpenNamespaceFd(name));
  }
  absl::Status status;
  std::thread t([&] {
    if (fd >= 0 && setns(fd, CLONE_NEWNET) != 0) {
      status = ErrnoStatus(absl::StrCat("namespace ", name), "setns(CLONE_NEWNET)");
      return;
    }
    status = fn();
  });
  t.join();
  if (fd >= 0) close(fd);
  return status;
}

absl::Status SetSysctls(absl::string_view name,
                        const std::vector<std::pair<std::string, std::string>>& path_values) {
  return RunInNamespace(name, [&]() -> absl::Status {
    for (const auto& [path, value] : path_values) {
      const std::string file = ProcSysPath(path);
      int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus(absl::StrCat("namespace ", name, ": ", file), "open");
      ssize_t n = write(fd, value.data(), value.size());
      int err = errno;
      close(fd);
      if (n != static_cast<ssize_t>(value.size())) {
        return ErrnoStatus(absl::StrCat("namespace ", name, ": ", file, " = ", value), "write",
                           err);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status SetSysctl(absl::string_view name, absl::string_view path, absl::string_view value) {
  return SetSysctls(name, {{std::string(path), std::string(value)}});
}

absl::StatusOr<std::string> GetSysctl(absl::string_view name, absl::string_view path) {
  std::string out;
  RETURN_IF_ERROR(RunInNamespace(name, [&]() -> absl::Status {
    const std::string file = ProcSysPath(path);
    int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(absl::StrCat("namespace ", name, ": ", file), "open");
    char buf[256];
    ssize_t n = read(fd, buf, sizeof(buf));
    int err = errno;
    close(fd);
    if (n < 0) return ErrnoStatus(absl::StrCat("namespace ", name, ": ", file), "read", err);
    out.assign(buf, n);
    return absl::OkStatus();
  }));
  return std::string(absl::StripTrailingAsciiWhitespace(out));
}

}  // namespace mixnet::netns
