// Nic::device() and MIXNET_PROGRESS_CPUS: a CPU list pins the device's
// progress thread to entry (NIC index) mod n; auto leaves it with the
// affinity it inherited; a CPU that cannot be used fails the device with a
// message naming it. Settings are read once per process, so each case runs in
// a fresh one (threadsafe death tests re-execute the binary).
#include "plugins/nccl_net/nic.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/cpu_affinity.h"

namespace mixnet::nccl {
namespace {

// A loopback NIC at `index`, made after MIXNET_PROGRESS_CPUS is set to `cpus`.
Nic LoopbackNic(int index, const std::string& cpus) {
  setenv("MIXNET_PROGRESS_CPUS", cpus.c_str(), 1);
  return Nic(index, "lo", "127.0.0.1", "mixnet", 100000, "tcp");
}

// Exits 0 when the device's progress thread runs exactly on `want`.
void ExpectProgressCpus(Nic& nic, const std::vector<int>& want) {
  absl::StatusOr<transport::Device*> d = nic.device();
  if (!d.ok()) {
    std::fprintf(stderr, "device: %s\n", d.status().ToString().c_str());
    std::exit(2);
  }
  absl::StatusOr<std::vector<int>> got = (*d)->ProgressThreadCpus();
  if (!got.ok() || *got != want) {
    std::fprintf(stderr, "progress thread CPUs differ from the expected ones\n");
    std::exit(3);
  }
  std::exit(0);
}

class NicPinningDeathTest : public testing::Test {
 protected:
  void SetUp() override {
    testing::FLAGS_gtest_death_test_style = "threadsafe";
    absl::StatusOr<std::vector<int>> allowed = AllowedCpus();
    ASSERT_TRUE(allowed.ok()) << allowed.status();
    allowed_ = *allowed;
  }
  std::vector<int> allowed_;
};

TEST_F(NicPinningDeathTest, AListPinsEachNicToItsEntry) {
  const int last = allowed_.back();
  const std::string list = absl::StrCat(allowed_.front(), ",", last);
  // NIC 1 takes the second entry; NIC 2 wraps around to the first.
  EXPECT_EXIT(
      {
        Nic nic = LoopbackNic(1, list);
        ExpectProgressCpus(nic, {last});
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        Nic nic = LoopbackNic(2, list);
        ExpectProgressCpus(nic, {allowed_.front()});
      },
      testing::ExitedWithCode(0), "");
}

TEST_F(NicPinningDeathTest, AutoKeepsTheInheritedAffinity) {
  EXPECT_EXIT(
      {
        Nic nic = LoopbackNic(0, "auto");
        ExpectProgressCpus(nic, allowed_);
      },
      testing::ExitedWithCode(0), "");
}

TEST_F(NicPinningDeathTest, AnUnusableCpuFailsTheDeviceNamingIt) {
  if (allowed_.back() >= 1000) GTEST_SKIP() << "CPU 1000 exists here";
  EXPECT_EXIT(
      {
        Nic nic = LoopbackNic(0, "1000");
        absl::StatusOr<transport::Device*> d = nic.device();
        if (d.ok()) std::exit(1);
        std::fprintf(stderr, "%s\n", d.status().ToString().c_str());
        std::exit(0);
      },
      testing::ExitedWithCode(0), "NCCL device mixnet.*1000");
}

}  // namespace
}  // namespace mixnet::nccl
