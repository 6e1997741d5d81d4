// FileStore-specific tests: key escaping keeps every file inside the store
// directory, long keys map one-to-one, bad directories are rejected.
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/rendezvous/store.h"
#include "tests/rendezvous/test_util.h"

namespace mixnet::rendezvous {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::RemoveTree;

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(FileStoreTest, KeysNeverLeaveTheDirectory) {
  std::string outer = MakeTempDir();
  std::string dir = outer + "/store";
  auto store = CreateFileStore(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  for (const char* key : {"../escape", "../../escape", "/etc/escape", "..", ".", "a/../../b"}) {
    ASSERT_TRUE((*store)->Set(key, "x").ok()) << key;
    EXPECT_EQ(*(*store)->Get(key, absl::ZeroDuration()), "x");
  }
  EXPECT_EQ(Listing(outer), std::set<std::string>{"store"});
  // Every entry is a flat, escaped file name (no subdirectories for short keys).
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    EXPECT_TRUE(e.is_regular_file()) << e.path();
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
  }
  RemoveTree(outer);
}

TEST(FileStoreTest, LongKeysAreDistinctAndRoundTrip) {
  std::string dir = MakeTempDir();
  auto store = CreateFileStore(dir);
  ASSERT_TRUE(store.ok());
  std::vector<std::string> keys;
  for (size_t n : {199, 200, 201, 202, 400, 401, 1000, 5000}) {
    keys.push_back(std::string(n, 'k'));
    keys.push_back(std::string(n, '/'));  // every byte escaped (3x)
    keys.push_back(std::string(n - 1, 'k') + ".");
    keys.push_back(std::string(n, '.'));
  }
  keys.push_back(std::string(kMaxKeyBytes, '\x01'));
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE((*store)->Set(keys[i], absl::StrCat(i)).ok()) << i;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    auto v = (*store)->Get(keys[i], absl::ZeroDuration());
    ASSERT_TRUE(v.ok()) << i << v.status();
    EXPECT_EQ(*v, absl::StrCat(i)) << "key #" << i << " (" << keys[i].size() << " bytes)";
  }
  // A prefix of a long key is a different key.
  EXPECT_EQ((*store)->Get(std::string(200, 'k') + "x", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  for (const std::string& name : Listing(dir)) EXPECT_LE(name.size(), 210u) << name;
  RemoveTree(dir);
}

TEST(FileStoreTest, TimeoutMessageNamesKeyAndDirectory) {
  std::string dir = MakeTempDir();
  auto store = CreateFileStore(dir);
  ASSERT_TRUE(store.ok());
  auto v = (*store)->Get("rank7/addr", absl::Milliseconds(20));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(v.status().message(), ::testing::HasSubstr("'rank7/addr'"));
  EXPECT_THAT(v.status().message(), ::testing::HasSubstr(dir));
  RemoveTree(dir);
}

TEST(FileStoreTest, CreatesMissingDirectoriesAndRejectsFiles) {
  std::string dir = MakeTempDir();
  auto nested = CreateFileStore(dir + "/a/b/c/");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_TRUE(fs::is_directory(dir + "/a/b/c"));
  {
    std::FILE* f = std::fopen((dir + "/plain").c_str(), "w");
    std::fclose(f);
  }
  EXPECT_EQ(CreateFileStore(dir + "/plain").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(CreateFileStore(dir + "/plain/sub").ok());
  EXPECT_EQ(CreateFileStore("").status().code(), absl::StatusCode::kInvalidArgument);
  RemoveTree(dir);
}

TEST(FileStoreTest, NoTemporaryFilesLeftBehind) {
  std::string dir = MakeTempDir();
  auto store = CreateFileStore(dir);
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE((*store)->Set("k", absl::StrCat(i)).ok());
    ASSERT_TRUE((*store)->Add("n", 1).ok());
  }
  EXPECT_EQ(Listing(dir), (std::set<std::string>{".lock", "k", "n"}));
  RemoveTree(dir);
}

}  // namespace
}  // namespace mixnet::rendezvous
