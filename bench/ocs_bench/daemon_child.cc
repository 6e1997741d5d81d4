// DaemonChild: see daemon_child.h.
#include "bench/ocs_bench/daemon_child.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "runtime/common/status.h"

// MIXNET_OCSD_BUILD_PATH when the build tree has mixnet-ocsd (bench/ocs_bench/CMakeLists.txt).
#if __has_include("mixnet_build_paths.h")
#include "mixnet_build_paths.h"
#endif

namespace mixnet::ocs::bench {
namespace {

bool Reap(pid_t pid, absl::Duration timeout, int* status) {
  absl::Time end = absl::Now() + timeout;
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonChild>> DaemonChild::Start(
    const std::string& binary, const std::vector<std::string>& args, const std::string& base_dir,
    absl::Duration timeout) {
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("mixnet-ocsd binary '", binary, "' is not executable (use --daemon PATH)"));
  }
  std::string tmpl = absl::StrCat(base_dir.empty() ? "/tmp" : base_dir, "/mixnet_ocs_bench_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus(tmpl, "mkdtemp");
  std::string dir = tmpl;
  std::string ready = dir + "/ready";
  std::string log = dir + "/daemon.log";
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const char* a : {"--listen", "127.0.0.1:0", "--state-dir"}) argv.push_back(a);
  argv.push_back(dir + "/state");
  argv.push_back("--ready-file");
  argv.push_back(ready);
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    std::filesystem::remove_all(dir);
    return ErrnoStatus("mixnet-ocsd", "fork");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(126);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  std::unique_ptr<DaemonChild> child(new DaemonChild(dir, pid));
  absl::Time end = absl::Now() + timeout;
  while (true) {
    std::ifstream in(ready);
    std::string addr;
    if (in && std::getline(in, addr) && !addr.empty()) {
      child->address_ = std::string(absl::StripAsciiWhitespace(addr));
      return child;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      child->pid_ = -1;
      return absl::UnavailableError(absl::StrCat("mixnet-ocsd exited before it was ready (",
                                                 WIFEXITED(status)
                                                     ? absl::StrCat("exit ", WEXITSTATUS(status))
                                                     : absl::StrCat("signal ", WTERMSIG(status)),
                                                 "); its log:\n", child->LogTail()));
    }
    if (absl::Now() >= end) {
      return absl::DeadlineExceededError(absl::StrCat("mixnet-ocsd not ready within ",
                                                      absl::FormatDuration(timeout), "; its log:\n",
                                                      child->LogTail()));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string DaemonChild::LogTail() const {
  std::ifstream in(dir_ + "/daemon.log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

void DaemonChild::Stop() {
  if (pid_ > 0) {
    int status = 0;
    kill(pid_, SIGTERM);
    if (!Reap(pid_, absl::Seconds(5), &status)) {
      kill(pid_, SIGKILL);
      Reap(pid_, absl::Seconds(5), &status);
    }
    pid_ = -1;
  }
}

DaemonChild::~DaemonChild() {
  Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string FindDaemonBinary() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path next = self.parent_path() / "mixnet-ocsd";
    if (access(next.c_str(), X_OK) == 0) return next.string();
  }
#ifdef MIXNET_OCSD_BUILD_PATH
  if (access(MIXNET_OCSD_BUILD_PATH, X_OK) == 0) return MIXNET_OCSD_BUILD_PATH;
#endif
  return "";
}

}  // namespace mixnet::ocs::bench
