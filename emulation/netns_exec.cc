// fork + setns + exec (see netns_exec.h). Between fork and exec the child
// only makes system calls: everything it needs is prepared before fork.
#include "emulation/netns_exec.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/status.h"

extern char** environ;

namespace mixnet::emulation {

absl::StatusOr<pid_t> SpawnCommandInNamespace(absl::string_view netns,
                                              const std::vector<std::string>& argv,
                                              const std::vector<std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("SpawnCommandInNamespace: empty argv");
  ASSIGN_OR_RETURN(int fd, netns::OpenNamespaceFd(netns));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Environment: inherited, then `env` overrides by name.
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    vars[kv.substr(0, kv.find('='))] = kv;
  }
  for (const std::string& kv : env) vars[kv.substr(0, kv.find('='))] = kv;
  std::vector<std::string> env_storage;
  for (auto& [k, kv] : vars) env_storage.push_back(std::move(kv));
  std::vector<char*> envp;
  for (const std::string& kv : env_storage) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus(absl::StrCat("namespace ", netns, ": ", argv[0]), "fork", err);
  }
  if (pid == 0) {
    if (setns(fd, CLONE_NEWNET) != 0) _exit(126);
    close(fd);
    // Private mounts and a sysfs of this namespace; best effort.
    if (unshare(CLONE_NEWNS) == 0 && mount("", "/", "none", MS_SLAVE | MS_REC, nullptr) == 0) {
      umount2("/sys", MNT_DETACH);
      mount("sysfs", "/sys", "sysfs", 0, nullptr);
    }
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fd);
  return pid;
}

absl::StatusOr<int> WaitForCommand(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  absl::Duration sleep = absl::Milliseconds(1);
  while (true) {
    int wstatus = 0;
    pid_t r = waitpid(pid, &wstatus, deadline == absl::InfiniteFuture() ? 0 : WNOHANG);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StrCat("pid ", pid), "waitpid");
    }
    if (r == pid) {
      if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
      if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
      continue;
    }
    if (absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid, " still running after ",
                                                      absl::FormatDuration(timeout), "; killed"));
    }
    absl::SleepFor(sleep);
    sleep = std::min(sleep * 2, absl::Milliseconds(50));
  }
}

absl::StatusOr<int> RunCommandInNamespace(absl::string_view netns,
                                          const std::vector<std::string>& argv,
                                          absl::Duration timeout,
                                          const std::vector<std::string>& env) {
  ASSIGN_OR_RETURN(pid_t pid, SpawnCommandInNamespace(netns, argv, env));
  absl::StatusOr<int> rc = WaitForCommand(pid, timeout);
  if (!rc.ok()) {
    return Annotate(rc.status(), absl::StrCat("namespace ", netns, ": ", absl::StrJoin(argv, " ")));
  }
  return rc;
}

}  // namespace mixnet::emulation
