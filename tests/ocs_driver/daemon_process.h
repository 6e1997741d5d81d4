// Test helper: runs mixnet-ocsd as a real child process. Start() gives it a
// unique run dir (ready file, log, and a state dir unless one is given),
// passes --ready-file and --state-dir, and waits (bounded) until the daemon
// wrote its listening address. The child dies with the test process
// (PR_SET_PDEATHSIG) and is SIGKILLed and reaped on destruction, so no
// daemon outlives a test. The binary comes from MIXNET_OCSD_BIN when the
// test's target names it (or from Options::binary):
//   mixnet_build_paths(t MIXNET_OCSD_BIN "$<TARGET_FILE:mixnet-ocsd>")
//   add_dependencies(t mixnet-ocsd)
// Header-only; use a DaemonProcess from one thread, and start it on a thread
// that outlives it (PR_SET_PDEATHSIG fires when the forking thread exits).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#if __has_include("mixnet_build_paths.h")  // cmake/MixnetBuildPaths.cmake
#include "mixnet_build_paths.h"
#endif

namespace mixnet::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/mixnet-ocsd-test-XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }  // empty when mkdtemp failed

 private:
  std::string path_;
};

class DaemonProcess {
 public:
  struct Options {
#ifdef MIXNET_OCSD_BIN
    std::string binary = MIXNET_OCSD_BIN;
#else
    std::string binary;
#endif
    // --state-dir; empty: "<run dir>/state" (gone with this object). Give a
    // TempDir's path to keep the state across a restart.
    std::string state_dir;
    absl::Duration ready_timeout = absl::Seconds(15);
  };

  // Starts `binary args... --state-dir D --ready-file F` and waits for F.
  // On failure (exit, timeout) the error carries the daemon's log.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(const std::vector<std::string>& args,
                                                              Options options) {
    if (options.binary.empty()) {
      return absl::FailedPreconditionError("no mixnet-ocsd binary (define MIXNET_OCSD_BIN)");
    }
    auto d = std::unique_ptr<DaemonProcess>(new DaemonProcess());
    if (d->run_dir_.path().empty()) return absl::InternalError("mkdtemp failed");
    d->state_dir_ = options.state_dir.empty() ? d->run_dir_.path() + "/state" : options.state_dir;
    d->ready_file_ = d->run_dir_.path() + "/ready";
    d->log_file_ = d->run_dir_.path() + "/daemon.log";
    std::vector<std::string> argv = {options.binary};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& a :
         {std::string("--state-dir"), d->state_dir_, std::string("--ready-file"), d->ready_file_}) {
      argv.push_back(a);
    }
    d->command_ = absl::StrJoin(argv, " ");
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      int fd = open(d->log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    d->pid_ = pid;
    const absl::Time deadline = absl::Now() + options.ready_timeout;
    while (true) {
      std::ifstream in(d->ready_file_);
      std::string line;
      if (in && std::getline(in, line) && !line.empty()) {
        d->address_ = std::string(absl::StripAsciiWhitespace(line));
        return d;
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        d->pid_ = -1;
        d->exit_status_ = status;
        return absl::UnavailableError(absl::StrCat("mixnet-ocsd exited (", DescribeStatus(status),
                                                   ") before it was ready: ", d->command_,
                                                   "\n--- log ---\n", d->Log()));
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "mixnet-ocsd not ready within ", absl::FormatDuration(options.ready_timeout), ": ",
            d->command_, "\n--- log ---\n", d->Log()));
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  ~DaemonProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // "127.0.0.1:41234" or "unix:/path": what the daemon wrote to its ready file.
  const std::string& address() const { return address_; }
  const std::string& state_dir() const { return state_dir_; }
  const std::string& run_dir() const { return run_dir_.path(); }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  absl::Status Kill(int sig) {
    if (pid_ <= 0) return absl::FailedPreconditionError("mixnet-ocsd is not running");
    if (kill(pid_, sig) != 0) return absl::InternalError(absl::StrCat("kill ", pid_, " failed"));
    return absl::OkStatus();
  }

  // Waits for the process to exit; its wait status (WIFEXITED/WIFSIGNALED
  // apply). DeadlineExceeded when it is still running after `timeout`.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(10)) {
    if (pid_ <= 0) {
      if (exit_status_.has_value()) return *exit_status_;
      return absl::FailedPreconditionError("mixnet-ocsd was never started");
    }
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return status;
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "mixnet-ocsd (pid ", pid_, ") still running after ", absl::FormatDuration(timeout)));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  // SIGTERM and wait; OK when it exited 0 within `timeout`.
  absl::Status Stop(absl::Duration timeout = absl::Seconds(10)) {
    if (absl::Status s = Kill(SIGTERM); !s.ok()) return s;
    absl::StatusOr<int> st = Wait(timeout);
    if (!st.ok()) return st.status();
    if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
      return absl::InternalError(
          absl::StrCat("mixnet-ocsd ended with ", DescribeStatus(*st), "\n--- log ---\n", Log()));
    }
    return absl::OkStatus();
  }

  // Everything the daemon wrote to stdout/stderr so far.
  std::string Log() const {
    std::ifstream in(log_file_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  static std::string DescribeStatus(int status) {
    if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
    return absl::StrCat("wait status ", status);
  }

 private:
  DaemonProcess() = default;

  TempDir run_dir_;
  std::string state_dir_, ready_file_, log_file_, address_, command_;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

}  // namespace mixnet::testing
