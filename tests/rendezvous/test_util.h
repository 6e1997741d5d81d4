// Helpers for the rendezvous tests: temporary directories, forked child
// processes with a deadline, free ports and elapsed-time measurement.
// Used from the gtest main thread.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace mixnet::rendezvous::testing {

inline std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "mixnet_rdv_XXXXXX";
  char* d = ::mkdtemp(tmpl.data());
  EXPECT_NE(d, nullptr) << "mkdtemp " << tmpl;
  return tmpl;
}

// rm -rf: std::filesystem::remove_all cannot remove trees deeper than PATH_MAX,
// which very long file-store keys create.
inline void RemoveTree(const std::string& dir) {
  if (dir.empty() || dir.find('\'') != std::string::npos) return;
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// A port that was free a moment ago on 127.0.0.1.
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Forks one child that runs `fn` and exits with its return value (never
// returning into gtest).
inline pid_t ForkChild(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  EXPECT_GT(pid, 0) << "fork";
  return pid;
}

// Waits for every child until `timeout`; kills stragglers. Returns the exit
// codes (-1 for a child that did not exit normally or had to be killed).
inline std::vector<int> WaitChildren(const std::vector<pid_t>& pids, absl::Duration timeout) {
  std::vector<int> codes(pids.size(), -1);
  std::vector<bool> done(pids.size(), false);
  absl::Time deadline = absl::Now() + timeout;
  size_t left = pids.size();
  while (left > 0 && absl::Now() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int st = 0;
      if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        done[i] = true;
        --left;
        if (WIFEXITED(st)) codes[i] = WEXITSTATUS(st);
      }
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (done[i]) continue;
    ::kill(pids[i], SIGKILL);
    ::waitpid(pids[i], nullptr, 0);
  }
  return codes;
}

class Stopwatch {
 public:
  absl::Duration Elapsed() const { return absl::Now() - start_; }

 private:
  absl::Time start_ = absl::Now();
};

}  // namespace mixnet::rendezvous::testing
