// The plugin's default interface choice (interface_choice.h) on hand-made
// interface lists: what NCCL's socket transport would pick with
// NCCL_SOCKET_IFNAME unset, worked out by hand for each list. Label cpu.
#include "plugins/nccl_net/interface_choice.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixnet::nccl {
namespace {

using ::testing::HasSubstr;

InterfaceEntry If(const std::string& name, const std::string& ip, bool up = true) {
  return InterfaceEntry{name, ip, up, name == "lo"};
}

TEST(InterfaceChoice, SkipsLoopbackDockerStyleAndDownInterfaces) {
  absl::StatusOr<InterfaceChoice> c = ChooseInterface(
      {If("lo", "127.0.0.1"), If("docker0", "172.17.0.1"), If("virbr0", "192.168.122.1"),
       If("veth1a2b", "169.254.3.3"), If("eth0", "10.0.0.7", /*up=*/false), If("eth1", ""),
       If("ens5", "10.1.0.7"), If("ens6", "10.2.0.7")});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ifname, "ens5");
  EXPECT_EQ(c->ip, "10.1.0.7");
  EXPECT_THAT(c->explanation, HasSubstr("using ens5 (10.1.0.7)"));
  EXPECT_THAT(c->explanation, HasSubstr("lo (loopback)"));
  EXPECT_THAT(c->explanation, HasSubstr("docker0 (docker-style)"));
  EXPECT_THAT(c->explanation, HasSubstr("eth0 (down)"));
  EXPECT_THAT(c->explanation, HasSubstr("eth1 (no IPv4 address)"));
  EXPECT_THAT(c->explanation, HasSubstr("ens6 (not the first)"));
}

TEST(InterfaceChoice, PrefersIpoibAsNcclDoes) {
  absl::StatusOr<InterfaceChoice> c =
      ChooseInterface({If("lo", "127.0.0.1"), If("eth0", "10.0.0.7"), If("ib0", "10.9.0.7")});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ifname, "ib0");
}

TEST(InterfaceChoice, FallsBackToDockerStyleThenLoopback) {
  absl::StatusOr<InterfaceChoice> c =
      ChooseInterface({If("lo", "127.0.0.1"), If("docker0", "172.17.0.1")});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ifname, "docker0");
  c = ChooseInterface({If("lo", "127.0.0.1"), If("eth0", "10.0.0.7", false)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ifname, "lo");
  EXPECT_THAT(c->explanation, HasSubstr("loopback (this host only)"));
}

TEST(InterfaceChoice, NothingUpWithAnAddressIsAnError) {
  absl::StatusOr<InterfaceChoice> c = ChooseInterface({If("eth0", "10.0.0.7", false)});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("MIXNET_SOCKET_IFNAME"));
}

}  // namespace
}  // namespace mixnet::nccl
