// Child process supervision for the orchestrator (see children.h).
#include "apps/demo/children.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "emulation/netns_exec.h"
#include "runtime/common/status.h"

namespace mixnet::demo {

std::atomic<bool> g_interrupted{false};

Children::~Children() { KillAll(); }

absl::Status Children::Spawn(const std::string& name, const std::string& netns,
                             const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": empty command"));
  pid_t pid = -1;
  if (!netns.empty()) {
    ASSIGN_OR_RETURN(pid, emulation::SpawnCommandInNamespace(netns, argv));
  } else {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid = fork();
    if (pid < 0) return ErrnoStatus(absl::StrCat("spawning ", name, " (", argv[0], ")"), "fork");
    if (pid == 0) {
      execv(args[0], args.data());
      _exit(127);
    }
  }
  children_.push_back({name, pid});
  return absl::OkStatus();
}

Children::Child* Children::Find(const std::string& name) {
  for (Child& c : children_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool Children::Poll(Child& c) {
  if (c.done) return true;
  int ws = 0;
  pid_t r = waitpid(c.pid, &ws, WNOHANG);
  if (r == c.pid && (WIFEXITED(ws) || WIFSIGNALED(ws))) {
    c.done = true;
    c.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  } else if (r < 0 && errno == ECHILD) {
    c.done = true;
    c.status = 255;
  }
  return c.done;
}

absl::Status Children::WaitAll(absl::Duration timeout, const std::vector<std::string>& names) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    std::vector<std::string> running;
    for (Child& c : children_) {
      if (!names.empty() && std::find(names.begin(), names.end(), c.name) == names.end()) continue;
      if (!Poll(c)) {
        running.push_back(c.name);
        continue;
      }
      if (c.status == 3) {
        return absl::DataLossError(
            absl::StrCat(c.name, " received wrong or missing bytes (exit code 3)"));
      }
      if (c.status != 0) {
        return absl::AbortedError(
            absl::StrCat(c.name, " (pid ", c.pid, ") failed with exit code ", c.status));
      }
    }
    if (running.empty()) return absl::OkStatus();
    if (g_interrupted) return absl::CancelledError("interrupted");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("still running after ",
                                                      absl::FormatDuration(timeout), ": ",
                                                      absl::StrJoin(running, ", ")));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status Children::CheckRunning(const std::string& name) {
  Child* c = Find(name);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat(name, " was never started"));
  if (Poll(*c))
    return absl::AbortedError(
        absl::StrCat(name, " (pid ", c->pid, ") exited with status ", c->status));
  return absl::OkStatus();
}

void Children::Stop(const std::string& name, absl::Duration grace) {
  Child* c = Find(name);
  if (c == nullptr || Poll(*c)) return;
  kill(c->pid, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (!Poll(*c) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  if (!c->done) {
    kill(c->pid, SIGKILL);
    int ws = 0;
    waitpid(c->pid, &ws, 0);
    c->done = true;
    c->status = 128 + SIGKILL;
  }
}

void Children::KillAll(absl::Duration grace) {
  for (Child& c : children_) {
    if (!Poll(c)) kill(c.pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  for (Child& c : children_) {
    while (!Poll(c) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    if (!c.done) {
      kill(c.pid, SIGKILL);
      int ws = 0;
      waitpid(c.pid, &ws, 0);
      c.done = true;
      c.status = 128 + SIGKILL;
    }
  }
  children_.clear();
}

absl::Status WaitForFile(const std::string& path, absl::Duration timeout, Children& children,
                         const std::string& who) {
  const absl::Time deadline = absl::Now() + timeout;
  struct stat st;
  while (stat(path.c_str(), &st) != 0) {
    RETURN_IF_ERROR(children.CheckRunning(who));
    if (g_interrupted) return absl::CancelledError("interrupted");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          who, " not ready after ", absl::FormatDuration(timeout), " (no ", path, ")"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::OkStatus();
}

}  // namespace mixnet::demo
