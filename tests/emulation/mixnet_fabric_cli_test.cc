// The mixnet-fabric binary run as a process (label netns, needs root):
// up / status / down exit codes and output, idempotent down, a bad spec, and
// the refusal without root (the child drops to uid 65534 before exec).
// Test thread only; each run is a fork + exec with its output captured.
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "emulation/emulated_fabric.h"
#include "emulation/fabric_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_FABRIC_BIN
#include "nlohmann/json.hpp"
#include "ocs_driver/netns/netns.h"
#include "tests/emulation/netns_test_util.h"
#include "tests/emulation/test_spec.h"

namespace mixnet::emulation {
namespace {

using ::testing::HasSubstr;

struct Result {
  int rc = -1;
  std::string out;  // stdout + stderr
};

// Runs the binary with `args`; as uid/gid `drop_to` when >= 0.
Result RunFabric(const std::vector<std::string>& args, int drop_to = -1) {
  std::vector<std::string> argv = {MIXNET_FABRIC_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    if (drop_to >= 0) {
      if (setgroups(0, nullptr) != 0 || setresgid(drop_to, drop_to, drop_to) != 0 ||
          setresuid(drop_to, drop_to, drop_to) != 0) {
        _exit(125);
      }
    }
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(pipefd[1]);
  Result r;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) r.out.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

class FabricCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    char tmpl[] = "/tmp/mixnet_fabric_cli_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    spec_path_ = dir_ + "/spec.yaml";
    std::ofstream(spec_path_) << testing::kThreeHostSpec;
    prefix_ = testing::UniquePrefix("cli");
  }
  void TearDown() override {
    if (!prefix_.empty()) (void)EmulatedFabric::DownPrefix(prefix_);  // even on failure
    if (!dir_.empty()) {
      unlink(spec_path_.c_str());
      unlink((dir_ + "/bad.yaml").c_str());
      rmdir(dir_.c_str());
    }
  }
  std::string dir_, spec_path_, prefix_;
};

TEST_F(FabricCliTest, UpStatusDown) {
  Result up = RunFabric({"up", spec_path_, "--prefix", prefix_});
  ASSERT_EQ(up.rc, 0) << up.out;
  EXPECT_THAT(up.out, HasSubstr(prefix_));
  EXPECT_EQ(netns::ListNamespaces(prefix_ + "-").value().size(), 5u);

  Result st = RunFabric({"status", "--prefix", prefix_});
  ASSERT_EQ(st.rc, 0) << st.out;
  EXPECT_THAT(st.out, HasSubstr("circuits: p1<->p3"));
  EXPECT_THAT(st.out, HasSubstr(prefix_ + "-h2 (host)"));
  EXPECT_THAT(st.out, HasSubstr("200Mbit"));

  Result js = RunFabric({"status", spec_path_, "--prefix", prefix_, "--json"});
  ASSERT_EQ(js.rc, 0) << js.out;
  // The log goes to stderr; the JSON object starts at the first '{'.
  auto j = nlohmann::json::parse(js.out.substr(js.out.find('{')), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << js.out;
  EXPECT_EQ(j["prefix"], prefix_);
  ASSERT_EQ(j["namespaces"].size(), 5u);
  bool saw_ocs = false;
  for (const auto& ns : j["namespaces"]) {
    if (ns["role"] != "ocs") continue;
    saw_ocs = true;
    EXPECT_EQ(ns["circuits"], nlohmann::json::parse(R"([["p1","p3"]])"));
  }
  EXPECT_TRUE(saw_ocs);

  Result again = RunFabric({"up", spec_path_, "--prefix", prefix_});
  EXPECT_NE(again.rc, 0);
  EXPECT_THAT(again.out, HasSubstr("in use"));

  Result down = RunFabric({"down", "--prefix", prefix_});
  ASSERT_EQ(down.rc, 0) << down.out;
  EXPECT_TRUE(netns::ListNamespaces(prefix_ + "-").value().empty());
  Result down2 = RunFabric({"down", spec_path_, "--prefix", prefix_});
  EXPECT_EQ(down2.rc, 0) << down2.out;
  Result st2 = RunFabric({"status", "--prefix", prefix_});
  EXPECT_EQ(st2.rc, 0) << st2.out;
  EXPECT_THAT(st2.out, HasSubstr("no namespaces"));
}

TEST_F(FabricCliTest, DefaultPrefixAndDownBySpec) {
  Result up = RunFabric({"up", spec_path_});
  ASSERT_EQ(up.rc, 0) << up.out;
  // "fabric up: prefix <P>"
  const std::string marker = "prefix ";
  size_t at = up.out.find(marker);
  ASSERT_NE(at, std::string::npos) << up.out;
  std::string prefix = up.out.substr(at + marker.size());
  prefix = prefix.substr(0, prefix.find_first_of(" \n"));
  prefix_ = prefix;  // TearDown removes it if the rest fails
  EXPECT_TRUE(IsDefaultPrefixOf(prefix, "emutest")) << prefix;
  EXPECT_EQ(netns::ListNamespaces(prefix + "-").value().size(), 5u);
  Result down = RunFabric({"down", spec_path_});
  ASSERT_EQ(down.rc, 0) << down.out;
  EXPECT_THAT(down.out, HasSubstr(prefix));
  EXPECT_TRUE(netns::ListNamespaces(prefix + "-").value().empty());
}

TEST_F(FabricCliTest, BadInput) {
  std::ofstream(dir_ + "/bad.yaml") << "name: x\nhosts: [1, 2\n";
  Result bad = RunFabric({"up", dir_ + "/bad.yaml", "--prefix", prefix_});
  EXPECT_NE(bad.rc, 0);
  EXPECT_THAT(bad.out, HasSubstr("bad.yaml"));
  Result missing = RunFabric({"up", dir_ + "/missing.yaml", "--prefix", prefix_});
  EXPECT_NE(missing.rc, 0);
  Result bad_prefix = RunFabric({"up", spec_path_, "--prefix", "Has-Dash"});
  EXPECT_NE(bad_prefix.rc, 0);
  EXPECT_THAT(bad_prefix.out, HasSubstr("prefix"));
  Result no_args = RunFabric({"down"});
  EXPECT_NE(no_args.rc, 0);
  Result no_cmd = RunFabric({});
  EXPECT_NE(no_cmd.rc, 0);
  EXPECT_TRUE(netns::ListNamespaces(prefix_ + "-").value().empty());
}

TEST_F(FabricCliTest, RefusesWithoutRoot) {
  Result r = RunFabric({"up", spec_path_, "--prefix", prefix_}, /*drop_to=*/65534);
  if (r.rc == 125 || r.rc == 127) GTEST_SKIP() << "cannot run the binary as uid 65534 here";
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("needs root"));
  EXPECT_TRUE(netns::ListNamespaces(prefix_ + "-").value().empty());
}

// The library refuses with PermissionDenied (the message says why) without
// root. As root, a death-test child drops to uid 65534 first.
TEST(FabricPrivilegesTest, LibraryReturnsPermissionDenied) {
  auto spec = cluster::ClusterSpec::Parse(testing::kThreeHostSpec, "test_spec.h");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto up_denied = [&]() {
    auto f = EmulatedFabric::Up(*spec, "nonroot");
    return absl::IsPermissionDenied(f.status()) &&
           absl::StrContains(f.status().message(), "needs root");
  };
  if (geteuid() != 0) {
    EXPECT_TRUE(up_denied());
    EXPECT_TRUE(absl::IsPermissionDenied(EmulatedFabric::DownPrefix("nonroot")));
    return;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
            setresuid(65534, 65534, 65534) != 0) {
          _exit(2);
        }
        _exit(up_denied() && absl::IsPermissionDenied(EmulatedFabric::DownPrefix("nonroot")) ? 0
                                                                                             : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace mixnet::emulation
