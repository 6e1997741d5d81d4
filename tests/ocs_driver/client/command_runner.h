// Test helper: runs a program (mixnetctl, mixnet_ocs_bench, openssl) as a
// child process with its stdout and stderr captured separately, bounded by a
// timeout after which it is SIGKILLed, so no test can hang on a child.
// Start() returns at once (for `mixnetctl ocs watch` running while the test
// applies); Finish() collects. Header-only; one thread per ChildCommand.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace mixnet::testing {

struct CommandResult {
  int rc = -1;  // exit code; 128 + signal when killed; -1 when it could not start
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
  std::string command;
};

class ChildCommand {
 public:
  explicit ChildCommand(std::vector<std::string> argv) : argv_(std::move(argv)) {
    command_ = absl::StrJoin(argv_, " ");
    int out[2];
    int err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return;
    if (pipe2(err, O_CLOEXEC) != 0) {
      close(out[0]);
      close(out[1]);
      return;
    }
    std::vector<char*> cargv;
    for (std::string& a : argv_) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(out[1], 1);
      dup2(err[1], 2);
      int null = open("/dev/null", O_RDONLY);
      if (null >= 0) dup2(null, 0);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (pid_ < 0) {
      close(out[0]);
      close(err[0]);
      return;
    }
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~ChildCommand() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }
  ChildCommand(const ChildCommand&) = delete;
  ChildCommand& operator=(const ChildCommand&) = delete;

  // Reads until both pipes close and the child exits, or `timeout` passes
  // (then SIGKILL). Call once.
  CommandResult Finish(absl::Duration timeout) {
    CommandResult r;
    r.command = command_;
    if (pid_ <= 0) return r;
    const absl::Time deadline = absl::Now() + timeout;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0) {
        r.timed_out = true;
        kill(pid_, SIGKILL);
        break;
      }
      pollfd fds[2];
      int n = 0;
      if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
      if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
      if (poll(fds, n, static_cast<int>(std::min<int64_t>(left, 100))) < 0 && errno != EINTR) {
        break;
      }
      for (int i = 0; i < n; ++i) {
        if (fds[i].revents == 0) continue;
        char buf[4096];
        ssize_t got = read(fds[i].fd, buf, sizeof(buf));
        int& fd = fds[i].fd == out_fd_ ? out_fd_ : err_fd_;
        std::string& dst = fds[i].fd == out_fd_ ? r.out : r.err;
        if (got > 0) {
          dst.append(buf, static_cast<size_t>(got));
        } else if (got == 0 || errno != EINTR) {
          close(fd);
          fd = -1;
        }
      }
    }
    int status = 0;
    // The pipes are closed; the exit follows at once (or the SIGKILL above).
    while (true) {
      pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) break;
      if (absl::Now() > deadline + absl::Seconds(5)) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        r.timed_out = true;
        break;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    pid_ = -1;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }

 private:
  std::vector<std::string> argv_;
  std::string command_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
};

inline CommandResult RunCommand(std::vector<std::string> argv,
                                absl::Duration timeout = absl::Seconds(30)) {
  ChildCommand child(std::move(argv));
  return child.Finish(timeout);
}

}  // namespace mixnet::testing
