// Runs a program under test as a child process with a time limit
// (`timeout -k 5 LIMIT`), collecting its stdout, stderr and exit code: for
// the end-to-end tests of mixnet-demo and mixnet_route_bench. Header-only;
// blocks the calling (test) thread until the program ends.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace mixnet::testing {

struct BinaryRun {
  int exit_code = -1;  // -1: did not run or was killed by a signal
  std::string out;
  std::string err;
};

// Runs "`binary` `args`" through the shell, killed after `limit_s` seconds.
inline BinaryRun RunBinary(const std::string& binary, const std::string& args, int limit_s) {
  static std::atomic<int> n{0};
  const std::string err_file =
      absl::StrCat("/tmp/mixnet_run_binary_", getpid(), "_", n.fetch_add(1), ".err");
  const std::string cmd =
      absl::StrCat("timeout -k 5 ", limit_s, " ", binary, " ", args, " 2>", err_file);
  BinaryRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, got);
  const int st = pclose(f);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_file.c_str());
  return r;
}

}  // namespace mixnet::testing
