// Tests for the cluster spec: YAML parsing of good specs, a table of bad specs
// (each must fail with InvalidArgument naming the line and field), file
// loading, the one-host default spec and the circuit checks. Single-threaded.
#include "runtime/cluster/cluster_spec.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixnet::cluster {
namespace {

using ::testing::HasSubstr;

// Line numbers matter: the bad-spec table below points into this text.
constexpr char kGoodSpec[] =
    R"(name: demo
ocs_switches:
  - {name: ocs0, ports: 8, switch_ms: 25}
hosts:
  - name: h0
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.1/16, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.1/16, gbps: 0.4, switch: ocs0, port: 1}
      - {name: ocs1, role: ocs, address: 10.20.0.2/16, gbps: 0.4, switch: ocs0, port: 2}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 10.10.0.2, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.1.1/16, gbps: 0.4, switch: ocs0, port: 3}
  - name: h2
    nics:
      - {name: eps0, role: eps, address: 10.10.0.3/16, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.2.1/16, gbps: 0.4, switch: ocs0, port: 5}
regions:
  - {name: r0, hosts: [h0, h1]}
  - {name: r1, hosts: [h2]}
circuits:
  - {switch: ocs0, ports: [1, 3]}
)";

TEST(ClusterSpecTest, ParsesGoodSpec) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(kGoodSpec, "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "demo");
  ASSERT_EQ(spec->ocs_switches.size(), 1u);
  EXPECT_EQ(spec->ocs_switches[0].name, "ocs0");
  EXPECT_EQ(spec->ocs_switches[0].ports, 8);
  EXPECT_DOUBLE_EQ(spec->ocs_switches[0].switch_ms, 25);
  ASSERT_EQ(spec->hosts.size(), 3u);

  const HostSpec& h0 = spec->hosts[0];
  EXPECT_EQ(h0.name, "h0");
  EXPECT_EQ(h0.gpus, 8);
  EXPECT_EQ(h0.region, "r0");
  ASSERT_EQ(h0.nics.size(), 3u);
  EXPECT_EQ(h0.nics[0].name, "eps0");
  EXPECT_EQ(h0.nics[0].role, NicRole::kEps);
  EXPECT_EQ(h0.nics[0].address, "10.10.0.1");
  EXPECT_EQ(h0.nics[0].prefix_len, 16);
  EXPECT_DOUBLE_EQ(h0.nics[0].gbps, 0.2);
  EXPECT_EQ(h0.nics[0].ocs_switch, "");
  EXPECT_EQ(h0.nics[0].ocs_port, 0);
  EXPECT_EQ(h0.nics[2].role, NicRole::kOcs);
  EXPECT_EQ(h0.nics[2].ocs_switch, "ocs0");
  EXPECT_EQ(h0.nics[2].ocs_port, 2);
  EXPECT_DOUBLE_EQ(h0.nics[2].gbps, 0.4);

  const HostSpec& h1 = spec->hosts[1];
  EXPECT_EQ(h1.gpus, 1);  // default
  EXPECT_EQ(h1.nics[0].address, "10.10.0.2");
  EXPECT_EQ(h1.nics[0].prefix_len, 32);  // no "/len"
  EXPECT_EQ(spec->hosts[2].region, "r1");

  ASSERT_EQ(spec->regions.size(), 2u);
  EXPECT_EQ(spec->regions[0].name, "r0");
  EXPECT_EQ(spec->regions[0].hosts, (std::vector<std::string>{"h0", "h1"}));
  ASSERT_EQ(spec->circuits.size(), 1u);
  EXPECT_EQ(spec->circuits[0].ocs_switch, "ocs0");
  EXPECT_EQ(spec->circuits[0].port_a, 1);
  EXPECT_EQ(spec->circuits[0].port_b, 3);
}

TEST(ClusterSpecTest, Lookups) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(kGoodSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_NE(spec->FindHost("h1"), nullptr);
  EXPECT_EQ(spec->FindHost("h1")->name, "h1");
  EXPECT_EQ(spec->FindHost("h9"), nullptr);
  ASSERT_NE(spec->FindHost("h0")->FindNic("ocs1"), nullptr);
  EXPECT_EQ(spec->FindHost("h0")->FindNic("ocs1")->ocs_port, 2);
  EXPECT_EQ(spec->FindHost("h0")->FindNic("ocs7"), nullptr);
  ASSERT_NE(spec->FindSwitch("ocs0"), nullptr);
  EXPECT_EQ(spec->FindSwitch("ocs1"), nullptr);

  std::optional<ClusterSpec::PortOwner> owner = spec->FindPort("ocs0", 5);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->host->name, "h2");
  EXPECT_EQ(owner->nic->name, "ocs0");
  EXPECT_FALSE(spec->FindPort("ocs0", 4).has_value());
  EXPECT_FALSE(spec->FindPort("nope", 1).has_value());
  EXPECT_EQ(NicRoleName(NicRole::kEps), "eps");
  EXPECT_EQ(NicRoleName(NicRole::kOcs), "ocs");
}

TEST(ClusterSpecTest, MinimalLoopbackSpecAndBlockStyle) {
  constexpr char kText[] = R"(hosts:
  - name: local
    nics:
      - name: lo
        role: eps
        address: 127.0.0.1
        gbps: 100
)";
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(kText);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "");
  ASSERT_EQ(spec->hosts.size(), 1u);
  EXPECT_EQ(spec->hosts[0].gpus, 1);
  EXPECT_EQ(spec->hosts[0].region, "");
  EXPECT_EQ(spec->hosts[0].nics[0].name, "lo");
  EXPECT_EQ(spec->hosts[0].nics[0].address, "127.0.0.1");
  EXPECT_EQ(spec->hosts[0].nics[0].prefix_len, 32);
  EXPECT_TRUE(spec->ocs_switches.empty());
  EXPECT_TRUE(spec->regions.empty());
  EXPECT_TRUE(spec->circuits.empty());
}

TEST(ClusterSpecTest, AnchorsAndAliasesWork) {
  constexpr char kText[] = R"(hosts:
  - name: a
    nics:
      - &eps {name: eth0, role: eps, address: 10.0.0.1, gbps: 1}
  - name: b
    nics:
      - {name: eth0, role: eps, address: 10.0.0.2, gbps: 1}
)";
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(kText);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->hosts[1].nics[0].address, "10.0.0.2");
}

// One bad spec: kGoodSpec with `find` (which must occur once) replaced by
// `replace`; an empty `find` replaces the whole text. `want` must be a
// substring of the InvalidArgument message.
struct BadSpecCase {
  const char* name;
  const char* find;
  const char* replace;
  const char* want;
};

std::string ApplyCase(const BadSpecCase& c) {
  std::string text = kGoodSpec;
  if (*c.find == '\0') return c.replace;
  size_t pos = text.find(c.find);
  EXPECT_NE(pos, std::string::npos) << c.find;
  EXPECT_EQ(text.find(c.find, pos + 1), std::string::npos) << "not unique: " << c.find;
  if (pos == std::string::npos) return text;
  return text.replace(pos, std::string(c.find).size(), c.replace);
}

const BadSpecCase kBadSpecs[] = {
    {"RoleNotEpsOrOcs", "role: ocs, address: 10.20.1.1", "role: foo, address: 10.20.1.1",
     "spec.yaml:14: hosts[1].nics[1].role: expected eps or ocs, got 'foo'"},
    {"MissingHostName", "- name: h2\n", "- gpus: 2\n",
     "spec.yaml:15: hosts[2].name: missing required field"},
    {"MissingNics",
     "    nics:\n      - {name: eps0, role: eps, address: 10.10.0.3/16, gbps: 0.2}\n"
     "      - {name: ocs0, role: ocs, address: 10.20.2.1/16, gbps: 0.4, switch: ocs0, port: 5}\n",
     "", "spec.yaml:15: hosts[2].nics: missing required field"},
    {"EmptyNics",
     "    nics:\n      - {name: eps0, role: eps, address: 10.10.0.3/16, gbps: 0.2}\n"
     "      - {name: ocs0, role: ocs, address: 10.20.2.1/16, gbps: 0.4, switch: ocs0, port: 5}\n",
     "    nics: []\n", "spec.yaml:16: hosts[2].nics: expected at least one NIC"},
    {"MissingNicName", "{name: eps0, role: eps, address: 10.10.0.2,",
     "{role: eps, address: 10.10.0.2,",
     "spec.yaml:13: hosts[1].nics[0].name: missing required field"},
    {"MissingRole", "{name: eps0, role: eps, address: 10.10.0.2,",
     "{name: eps0, address: 10.10.0.2,",
     "spec.yaml:13: hosts[1].nics[0].role: missing required field"},
    {"MissingAddress", "address: 10.10.0.3/16, ", "",
     "spec.yaml:17: hosts[2].nics[0].address: missing required field"},
    {"MissingGbps", "address: 10.10.0.2, gbps: 0.2", "address: 10.10.0.2",
     "spec.yaml:13: hosts[1].nics[0].gbps: missing required field"},
    {"ZeroGbps", "address: 10.10.0.1/16, gbps: 0.2", "address: 10.10.0.1/16, gbps: 0",
     "spec.yaml:8: hosts[0].nics[0].gbps: must be > 0, got 0"},
    {"NegativeGbps", "address: 10.10.0.1/16, gbps: 0.2", "address: 10.10.0.1/16, gbps: -1",
     "spec.yaml:8: hosts[0].nics[0].gbps: must be > 0"},
    {"GbpsNotANumber", "address: 10.10.0.1/16, gbps: 0.2", "address: 10.10.0.1/16, gbps: fast",
     "spec.yaml:8: hosts[0].nics[0].gbps: expected a number, got 'fast'"},
    {"UnknownNicKey", "switch: ocs0, port: 3", "swtich: ocs0, port: 3",
     "spec.yaml:14: hosts[1].nics[1].swtich: unknown field 'swtich'"},
    {"UnknownHostKey", "- name: h1", "- nmae: h1", "spec.yaml:11: hosts[1].nmae: unknown field"},
    {"UnknownTopLevelKey", "regions:", "region:", "spec.yaml:19: region: unknown field 'region'"},
    {"DuplicateKey", "    gpus: 8\n", "    gpus: 8\n    gpus: 4\n",
     "spec.yaml:7: hosts[0].gpus: duplicate field (first at line 6)"},
    {"DuplicateHostName", "- name: h2", "- name: h1",
     "spec.yaml:15: hosts[2].name: duplicate host name 'h1' (first at line 11)"},
    {"NullHostName", "- name: h2",
     "- name:", "spec.yaml:15: hosts[2].name: expected a string, got nothing"},
    {"HostNameIsASequence", "- name: h2", "- name: [h2]",
     "spec.yaml:15: hosts[2].name: expected a string, got a sequence"},
    {"FractionalPort", "port: 5}", "port: 1.5}",
     "spec.yaml:18: hosts[2].nics[1].port: expected an integer, got '1.5'"},
    {"InfiniteGbps", "address: 10.10.0.1/16, gbps: 0.2", "address: 10.10.0.1/16, gbps: .inf",
     "spec.yaml:8: hosts[0].nics[0].gbps: expected a number, got '.inf'"},
    {"NegativeSwitchMs", "switch_ms: 25", "switch_ms: -5",
     "spec.yaml:3: ocs_switches[0].switch_ms: must be >= 0, got -5"},
    {"TabIndentation", "    gpus: 8\n", "\tgpus: 8\n", "spec.yaml:6: YAML syntax error"},
    {"BadHostName", "- name: h2", "- name: h 2", "spec.yaml:15: hosts[2].name: bad name 'h 2'"},
    {"DuplicateNicName", "{name: ocs1,", "{name: ocs0,",
     "spec.yaml:10: hosts[0].nics[2].name: duplicate NIC name 'ocs0' on host h0"},
    {"NicNameTooLong", "{name: eps0, role: eps, address: 10.10.0.3/16",
     "{name: eps0123456789abcd, role: eps, address: 10.10.0.3/16",
     "spec.yaml:17: hosts[2].nics[0].name: bad interface name"},
    {"BadOctet", "10.10.0.3/16", "10.10.0.300/16",
     "spec.yaml:17: hosts[2].nics[0].address: expected an IPv4 address"},
    {"ThreeOctets", "10.10.0.3/16", "10.10.3/16", "spec.yaml:17: hosts[2].nics[0].address:"},
    {"LeadingZeroOctet", "10.10.0.3/16", "10.10.0.03/16", "leading zero"},
    {"BadPrefix", "10.20.2.1/16", "10.20.2.1/33", "spec.yaml:18: hosts[2].nics[1].address:"},
    {"EmptyPrefix", "10.20.2.1/16", "10.20.2.1/", "spec.yaml:18: hosts[2].nics[1].address:"},
    {"DuplicateAddress", "10.10.0.3/16", "10.10.0.1/24",
     "spec.yaml:17: hosts[2].nics[0].address: address 10.10.0.1 is already used by h0/eps0"},
    {"OcsNicWithoutSwitch", "gbps: 0.4, switch: ocs0, port: 3}", "gbps: 0.4, port: 3}",
     "spec.yaml:14: hosts[1].nics[1].switch: missing required field"},
    {"OcsNicWithoutPort", "switch: ocs0, port: 5}", "switch: ocs0}",
     "spec.yaml:18: hosts[2].nics[1].port: missing required field"},
    {"UnknownSwitch", "switch: ocs0, port: 5}", "switch: ocs9, port: 5}",
     "spec.yaml:18: hosts[2].nics[1].switch: unknown switch 'ocs9'"},
    {"PortAboveRange", "port: 5}", "port: 9}",
     "spec.yaml:18: hosts[2].nics[1].port: port 9 out of range 1..8 of switch ocs0"},
    {"PortZero", "port: 5}", "port: 0}",
     "spec.yaml:18: hosts[2].nics[1].port: port 0 out of range"},
    {"PortNotAnInteger", "port: 5}", "port: five}",
     "spec.yaml:18: hosts[2].nics[1].port: expected an integer, got 'five'"},
    {"PortCabledTwice", "port: 5}", "port: 3}",
     "spec.yaml:18: hosts[2].nics[1].port: port 3 of switch ocs0 is already cabled to h1/ocs0"},
    {"EpsNicWithSwitch", "address: 10.10.0.2, gbps: 0.2}",
     "address: 10.10.0.2, gbps: 0.2, switch: ocs0, port: 4}",
     "spec.yaml:13: hosts[1].nics[0].switch: only OCS NICs are cabled to a switch port"},
    {"EpsNicWithPort", "address: 10.10.0.2, gbps: 0.2}", "address: 10.10.0.2, gbps: 0.2, port: 4}",
     "spec.yaml:13: hosts[1].nics[0].port: only OCS NICs"},
    {"ZeroGpus", "gpus: 8", "gpus: 0", "spec.yaml:6: hosts[0].gpus: must be in 1..4096, got 0"},
    {"GpusNotAnInteger", "gpus: 8", "gpus: eight",
     "spec.yaml:6: hosts[0].gpus: expected an integer, got 'eight'"},
    {"SwitchWithoutPorts", "{name: ocs0, ports: 8, switch_ms: 25}", "{name: ocs0, switch_ms: 25}",
     "spec.yaml:3: ocs_switches[0].ports: missing required field"},
    {"DuplicateSwitch", "  - {name: ocs0, ports: 8, switch_ms: 25}\n",
     "  - {name: ocs0, ports: 8, switch_ms: 25}\n  - {name: ocs0, ports: 4}\n",
     "spec.yaml:4: ocs_switches[1].name: duplicate switch name 'ocs0' (first at line 3)"},
    {"RegionUnknownHost", "[h2]", "[h7]", "spec.yaml:21: regions[1].hosts[0]: unknown host 'h7'"},
    {"HostInTwoRegions", "[h2]", "[h2, h1]",
     "spec.yaml:21: regions[1].hosts[1]: host h1 is already in region r0"},
    {"DuplicateRegion", "{name: r1,", "{name: r0,",
     "spec.yaml:21: regions[1].name: duplicate region name 'r0' (first at line 20)"},
    {"CircuitUnknownSwitch", "{switch: ocs0, ports: [1, 3]}", "{switch: ocsX, ports: [1, 3]}",
     "spec.yaml:23: circuits[0].switch: unknown switch 'ocsX'"},
    {"CircuitPortOutOfRange", "ports: [1, 3]", "ports: [1, 30]",
     "spec.yaml:23: circuits[0].ports[1]: port 30 out of range 1..8 of switch ocs0"},
    {"CircuitUncabledPort", "ports: [1, 3]", "ports: [7, 3]",
     "spec.yaml:23: circuits[0].ports[0]: port 7 of switch ocs0 is not cabled to any NIC"},
    {"CircuitPortUsedTwice", "ports: [1, 3]}\n",
     "ports: [1, 3]}\n  - {switch: ocs0, ports: [2, 3]}\n",
     "spec.yaml:24: circuits[1].ports[1]: port 3 of switch ocs0 is already used by circuits[0]"},
    {"CircuitSelfLoop", "ports: [1, 3]", "ports: [3, 3]",
     "spec.yaml:23: circuits[0].ports: self-loop: both ends are port 3"},
    {"CircuitSameHost", "ports: [1, 3]", "ports: [1, 2]",
     "spec.yaml:23: circuits[0].ports: circuit joins two NICs of host h0 (ocs0 and ocs1)"},
    {"CircuitCrossesRegions", "ports: [1, 3]", "ports: [1, 5]",
     "spec.yaml:23: circuits[0].ports: circuit crosses regions"},
    {"CircuitThreePorts", "ports: [1, 3]", "ports: [1, 3, 5]",
     "spec.yaml:23: circuits[0].ports: expected two ports [a, b], got 3 entries"},
    {"CircuitMissingPorts", "{switch: ocs0, ports: [1, 3]}", "{switch: ocs0}",
     "spec.yaml:23: circuits[0].ports: missing required field"},
    {"YamlSyntaxError", "[h0, h1]}", "[h0, h1}", "spec.yaml:20: YAML syntax error"},
    {"EmptyDocument", "", "", "spec.yaml:1: expected a mapping at the top level"},
    {"TopLevelSequence", "", "- a\n- b\n", "spec.yaml:1: expected a mapping at the top level"},
    {"MissingHosts", "", "name: x\n", "spec.yaml:1: hosts: missing required field"},
    {"HostsNotASequence", "", "name: x\nhosts: h0\n",
     "spec.yaml:2: hosts: expected a sequence of hosts, got 'h0'"},
    {"HostNotAMapping", "", "hosts:\n  - h0\n",
     "spec.yaml:2: hosts[0]: expected a mapping, got 'h0'"},
    {"EmptyHosts", "", "hosts: []\n", "spec.yaml:1: hosts: expected at least one host"},
};

class BadSpecTest : public ::testing::TestWithParam<BadSpecCase> {};

TEST_P(BadSpecTest, FailsWithLineAndField) {
  const std::string text = ApplyCase(GetParam());
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(text, "spec.yaml");
  ASSERT_FALSE(spec.ok()) << "parsed:\n" << text;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(GetParam().want)) << "spec:\n"
                                                                                << text;
}

INSTANTIATE_TEST_SUITE_P(Table, BadSpecTest, ::testing::ValuesIn(kBadSpecs),
                         [](const ::testing::TestParamInfo<BadSpecCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ClusterSpecTest, TableHasEnoughCases) { EXPECT_GE(std::size(kBadSpecs), 15u); }

// Every prefix and many single-byte corruptions of a good spec either parse or
// fail with InvalidArgument naming the source; nothing throws or crashes.
TEST(ClusterSpecTest, TruncatedAndCorruptedSpecsFailCleanly) {
  const std::string good = kGoodSpec;
  auto check = [](const std::string& text) {
    absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(text, "fuzz.yaml");
    if (spec.ok()) return;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("fuzz.yaml")) << text;
  };
  for (size_t n = 0; n <= good.size(); ++n) check(good.substr(0, n));
  const std::string alphabet = "{}[]:,-#&*!|>'\"%@`\t\n 0a9/";
  uint32_t state = 12345;
  for (int i = 0; i < 1000; ++i) {
    state = state * 1103515245u + 12345u;
    std::string text = good;
    text[(state >> 8) % text.size()] = alphabet[(state >> 20) % alphabet.size()];
    check(text);
  }
}

// Temporary directory removed at the end of each test.
class LoadFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "cluster_spec_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(LoadFileTest, LoadsGoodFile) {
  std::string path = Write("good.yaml", kGoodSpec);
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::LoadFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->hosts.size(), 3u);
}

TEST_F(LoadFileTest, ErrorsNameTheFile) {
  std::string text = kGoodSpec;
  text.replace(text.find("gpus: 8"), 7, "gpus: -1");
  std::string path = Write("bad.yaml", text);
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::LoadFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(path + ":6: hosts[0].gpus:"));
}

TEST_F(LoadFileTest, MissingFileIsNotFound) {
  std::string path = dir_ + "/nope.yaml";
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::LoadFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound) << spec.status();
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("errno 2"));
}

TEST_F(LoadFileTest, DirectoryIsAnError) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::LoadFile(dir_);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(dir_));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("errno"));
}

TEST(SingleHostTest, OneHostOneEpsNic) {
  ClusterSpec spec = ClusterSpec::SingleHost("node", "lo", "127.0.0.1");
  EXPECT_EQ(spec.name, "node");
  ASSERT_EQ(spec.hosts.size(), 1u);
  EXPECT_EQ(spec.hosts[0].name, "node");
  EXPECT_EQ(spec.hosts[0].gpus, 1);
  ASSERT_EQ(spec.hosts[0].nics.size(), 1u);
  const NicSpec& nic = spec.hosts[0].nics[0];
  EXPECT_EQ(nic.name, "lo");
  EXPECT_EQ(nic.role, NicRole::kEps);
  EXPECT_EQ(nic.address, "127.0.0.1");
  EXPECT_EQ(nic.prefix_len, 32);
  EXPECT_DOUBLE_EQ(nic.gbps, 100);
  EXPECT_TRUE(spec.ocs_switches.empty());
  EXPECT_TRUE(spec.circuits.empty());
}

TEST(SingleHostTest, AddressWithPrefix) {
  ClusterSpec spec = ClusterSpec::SingleHost("n", "eth0", "10.1.2.3/24", 25);
  EXPECT_EQ(spec.hosts[0].nics[0].address, "10.1.2.3");
  EXPECT_EQ(spec.hosts[0].nics[0].prefix_len, 24);
  EXPECT_DOUBLE_EQ(spec.hosts[0].nics[0].gbps, 25);
}

TEST(ParseIpv4Test, AcceptsAndRejects) {
  for (const char* good : {"0.0.0.0", "255.255.255.255", "10.0.0.1/0", "1.2.3.4/32"}) {
    EXPECT_TRUE(ParseIpv4(good).ok()) << good;
  }
  for (const char* bad :
       {"", "1.2.3", "1.2.3.4.5", "1.2.3.256", "1.2.3.-1", "a.b.c.d", "1..2.3", "1.2.3.4/",
        "1.2.3.4/33", "1.2.3.4/x", "01.2.3.4", "1.2.3.4 ", "1.2.3.4/-1"}) {
    absl::StatusOr<Ipv4Address> ip = ParseIpv4(bad);
    EXPECT_FALSE(ip.ok()) << "'" << bad << "'";
    if (!ip.ok()) {
      EXPECT_EQ(ip.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  absl::StatusOr<Ipv4Address> ip = ParseIpv4("192.168.1.20/24");
  ASSERT_TRUE(ip.ok());
  EXPECT_EQ(ip->address, "192.168.1.20");
  EXPECT_EQ(ip->prefix_len, 24);
}

TEST(ValidateCircuitsTest, ChecksAgainstCabling) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(kGoodSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(ValidateCircuits(*spec, {}).ok());
  struct Case {
    std::vector<CircuitSpec> circuits;
    const char* want;
  };
  const Case cases[] = {
      {{{"ocs0", 2, 4}}, "circuits[0].ports[1]: port 4 of switch ocs0 is not cabled"},
      {{{"sw", 1, 3}}, "circuits[0].switch: unknown switch 'sw'"},
      {{{"ocs0", 1, 3}, {"ocs0", 3, 2}},
       "circuits[1].ports[0]: port 3 of switch ocs0 is already used"},
      {{{"ocs0", 1, 2}}, "circuits[0].ports: circuit joins two NICs of host h0"},
      {{{"ocs0", 5, 1}}, "circuits[0].ports: circuit crosses regions"},
      {{{"ocs0", 0, 1}}, "circuits[0].ports[0]: port 0 out of range 1..8"},
      {{{"ocs0", 2, 2}}, "circuits[0].ports: self-loop"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateCircuits(*spec, c.circuits);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.want));
  }
  EXPECT_TRUE(ValidateCircuits(*spec, {{"ocs0", 3, 1}}).ok());
  EXPECT_TRUE(ValidateCircuits(*spec, {{"ocs0", 2, 3}}).ok());
}

}  // namespace
}  // namespace mixnet::cluster
