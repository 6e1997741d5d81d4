// Settings table: parsing, validation, and that docs/settings.md has a row for every variable.
#include "runtime/common/settings.h"

#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_SOURCE_DIR
#include "runtime/common/status.h"

namespace mixnet {
namespace {

absl::StatusOr<Settings> From(std::map<std::string, std::string> env) {
  return Settings::FromEnv([&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

TEST(Settings, DefaultsWhenUnset) {
  auto s = From({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->transport, "tcp");
  EXPECT_EQ(s->timeout_ms, 30000);
  EXPECT_EQ(s->sockets_per_path, 2);
}

TEST(Settings, ParsesValues) {
  auto s = From({{"MIXNET_TIMEOUT_MS", "1234"}, {"MIXNET_SOCKET_IFNAME", "^docker,lo"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->timeout_ms, 1234);
  EXPECT_EQ(s->socket_ifname, "^docker,lo");
  for (const char* cpus : {"auto", "none", "0,2-3"}) {
    auto p = From({{"MIXNET_PROGRESS_CPUS", cpus}});
    ASSERT_TRUE(p.ok()) << cpus << ": " << p.status();
    EXPECT_EQ(p->progress_cpus, cpus);
  }
}

TEST(Settings, BadValuesNameTheVariable) {
  for (auto [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"MIXNET_TIMEOUT_MS", "soon"},
                                                        {"MIXNET_SOCKETS_PER_PATH", "0"},
                                                        {"MIXNET_CHUNK_BYTES", "12"},
                                                        {"MIXNET_CONNECT_TIMEOUT_MS", "-5"},
                                                        {"MIXNET_PROGRESS_CPUS", "fast"},
                                                        {"MIXNET_PROGRESS_CPUS", "3-1"},
                                                        {"MIXNET_LOCK_CHECKS", "2"}}) {
    auto s = From({{name, value}});
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(name), std::string::npos) << s.status();
  }
}

TEST(Settings, SettingsReferenceListsEverySetting) {
  std::ifstream in(std::string(MIXNET_SOURCE_DIR) + "/docs/settings.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  for (const Settings::Doc& d : Settings::Documentation()) {
    EXPECT_NE(text.str().find("| `" + d.name + "` |"), std::string::npos)
        << d.name << " has no row in docs/settings.md";
  }
}

TEST(ErrnoStatus, MapsCodesAndNamesTheCall) {
  absl::Status s = ErrnoStatus("connecting to 10.0.0.2:5000", "connect", ECONNREFUSED);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("connect failed"), std::string::npos);
  EXPECT_NE(s.message().find("errno 111"), std::string::npos);
  EXPECT_EQ(ErrnoStatus("x", "y", ETIMEDOUT).code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace mixnet
