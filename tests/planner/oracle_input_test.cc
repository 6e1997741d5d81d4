// The oracle's JSON input (runtime/planner/oracle_input.h) and the
// mixnet-oracle program on it: the incast case of oracle_test.cc (hosts 1..7
// send 1 MB each to host 0; every NIC 1 MB/s, i.e. 0.008 Gbit/s), whose
// floors are worked by hand there: 1750 ms with relays, 4000 ms without.
#include "runtime/planner/oracle_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "mixnet_build_paths.h"
#include "nlohmann/json.hpp"
#include "tests/common/run_binary.h"

namespace mixnet::planner {
namespace {

using ::testing::HasSubstr;
namespace testing = ::mixnet::testing;

std::string IncastJson(const std::string& circuits) {
  std::string rows;
  for (int i = 0; i < 8; ++i) {
    rows += std::string(i ? ", " : "") + "[" + (i ? "1e6" : "0") + ", 0, 0, 0, 0, 0, 0, 0]";
  }
  return R"({"hosts": ["h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"], "bytes": [)" + rows +
         R"(], "eps_gbps": 0.008, "ocs_ports": 3, "ocs_gbps": 0.008)" + circuits + "}";
}

TEST(OracleInputTest, ReadsTheMatrixTheFabricAndTheCircuits) {
  absl::StatusOr<OracleInput> in =
      ParseOracleInput(IncastJson(R"(, "circuits": [["h0", "h1"], [0, 2], ["h3", 0]])"));
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->demand.hosts(), 8);
  EXPECT_EQ(in->demand.at(5, 0), 1e6);
  EXPECT_EQ(in->demand.at(0, 5), 0);
  EXPECT_EQ(in->fabric.eps_Bps[3], 1e6);
  EXPECT_EQ(in->fabric.ocs_ports[7], 3);
  ASSERT_TRUE(in->circuits.has_value());
  ASSERT_EQ(in->circuits->size(), 3u);
  EXPECT_EQ((*in->circuits)[2].a, 3);
  EXPECT_EQ((*in->circuits)[2].b, 0);
  // A flat matrix and per-host lists read the same.
  absl::StatusOr<OracleInput> flat = ParseOracleInput(
      R"({"bytes": [0, 4, 2, 0], "eps_gbps": [8, 16], "ocs_ports": [1, 0], "ocs_gbps": 8})");
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->demand.at(0, 1), 4);
  EXPECT_EQ(flat->fabric.eps_Bps[1], 2e9);
  EXPECT_EQ(flat->hosts[1], "1");
  EXPECT_FALSE(flat->circuits.has_value());
}

TEST(OracleInputTest, BadInputNamesTheField) {
  auto message = [](const std::string& json) {
    absl::StatusOr<OracleInput> in = ParseOracleInput(json);
    EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument) << json;
    return std::string(in.status().message());
  };
  EXPECT_THAT(message("{"), HasSubstr("not valid JSON"));
  EXPECT_THAT(message(R"({"eps_gbps": 1})"), HasSubstr("\"bytes\""));
  EXPECT_THAT(message(R"({"bytes": [1, 2, 3], "eps_gbps": 1})"), HasSubstr("3 entries"));
  EXPECT_THAT(message(R"({"bytes": [0, 1, 1, 0]})"), HasSubstr("\"eps_gbps\" is missing"));
  EXPECT_THAT(message(R"({"bytes": [0, 1, 1, 0], "eps_gbps": [1, 2, 3]})"),
              HasSubstr("list of 2 numbers"));
  EXPECT_THAT(message(R"({"bytes": [0, -1, 1, 0], "eps_gbps": 1})"), HasSubstr("oracle input"));
  EXPECT_THAT(message(IncastJson(R"(, "circuits": [["h0", "h9"]])")),
              HasSubstr("\"h9\" is not a host"));
  EXPECT_THAT(message(IncastJson(R"(, "circuits": [[0, 1, 2]])")), HasSubstr("circuits[0]"));
  EXPECT_THAT(message(R"({"bytes": [0, 1, 1, 0], "eps_gbps": 1, "ocs_ports": 1.5})"),
              HasSubstr("whole number"));
}

// Runs mixnet-oracle on `json`; returns its exit status and stdout + stderr.
std::pair<int, std::string> RunOracle(const std::string& json, const std::string& flags) {
  static int n = 0;
  const std::string path =
      "/tmp/mixnet_oracle_input_" + std::to_string(getpid()) + "_" + std::to_string(n++) + ".json";
  std::ofstream(path) << json;
  testing::BinaryRun r = testing::RunBinary(MIXNET_ORACLE_BIN, flags + " " + path, 60);
  std::remove(path.c_str());
  return {r.exit_code, r.out + r.err};
}

TEST(OracleCliTest, PrintsTheThreeFloors) {
  auto [rc, out] = RunOracle(
      IncastJson(R"(, "circuits": [["h0", "h1"], ["h0", "h2"], ["h0", "h3"]])"), "--json");
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_NEAR(j.at("nonblocking_floor_ms").get<double>(), 1750, 1e-6);
  EXPECT_NEAR(j.at("installed_floor_ms").get<double>(), 1750, 1e-6);
  EXPECT_NEAR(j.at("best_floor_ms").get<double>(), 1750, 1e-6);
  EXPECT_TRUE(j.at("at_bound").get<bool>());
  EXPECT_EQ(j.at("best_circuits").size(), 12u);
  auto [rc2, direct] = RunOracle(IncastJson(""), "--json --direct-only");
  ASSERT_EQ(rc2, 0) << direct;
  EXPECT_NEAR(nlohmann::json::parse(direct).at("best_floor_ms").get<double>(), 4000, 1e-6);
  EXPECT_FALSE(nlohmann::json::parse(direct).contains("installed_floor_ms"));
  auto [rc3, text] = RunOracle(IncastJson(""), "");
  ASSERT_EQ(rc3, 0) << text;
  EXPECT_THAT(text, HasSubstr("(c) best floor over circuit sets: 1750 ms"));
}

TEST(OracleCliTest, BadInputExitsTwoNamingTheProblem) {
  auto [rc, out] = RunOracle(IncastJson(R"(, "circuits": [["h0", "h0"]])"), "");
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(out, HasSubstr("joins a host to itself"));
  auto [rc2, out2] = RunOracle("[1, 2]", "--json");
  EXPECT_EQ(rc2, 2);
  EXPECT_THAT(out2, HasSubstr("the top level must be an object"));
}

}  // namespace
}  // namespace mixnet::planner
