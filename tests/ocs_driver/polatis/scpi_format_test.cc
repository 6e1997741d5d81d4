// Tests of the Polatis SCPI text formats (channel lists, error entries, *IDN?,
// size) and of the duplex mapping of one-way connections to circuits.
// Single-threaded.
#include "ocs_driver/polatis/scpi_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ocs_driver/polatis/duplex.h"

namespace mixnet::ocs {
namespace {

using scpi::Connection;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ScpiFormat, FormatsPairedLists) {
  EXPECT_EQ(scpi::FormatConnectionLists({{1, 18}, {2, 17}}), "(@1,2),(@18,17)");
  EXPECT_EQ(scpi::FormatConnectionLists({}), "(@),(@)");
}

TEST(ScpiFormat, ParsesConnectionLists) {
  auto c = scpi::ParseConnectionLists("(@1,2),(@17,18)\r");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, ElementsAre(Connection{1, 17}, Connection{2, 18}));
  c = scpi::ParseConnectionLists(" ( @ 1:3 , 7 ) , (@20:22,30) ");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(
      *c, ElementsAre(Connection{1, 20}, Connection{2, 21}, Connection{3, 22}, Connection{7, 30}));
}

class EmptyMapTest : public ::testing::TestWithParam<const char*> {};
TEST_P(EmptyMapTest, IsEmpty) {
  auto c = scpi::ParseConnectionLists(GetParam());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, IsEmpty());
}
INSTANTIATE_TEST_SUITE_P(Forms, EmptyMapTest, ::testing::Values("", "  ", "(@),(@)", "<none>"));

class BadListTest : public ::testing::TestWithParam<const char*> {};
TEST_P(BadListTest, IsInvalidArgumentQuotingTheReply) {
  auto c = scpi::ParseConnectionLists(GetParam());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("malformed"));
}
INSTANTIATE_TEST_SUITE_P(Garbage, BadListTest,
                         ::testing::Values("(@1,2),(@17", "(@1,2),(@17)", "(@1,2)", "hello",
                                           "(@1,x),(@17,18)", "(@1,2),(@17,18) trailing",
                                           "(@0),(@17)", "(@1,2)(@17,18)", "1,17", "(@-1),(@17)",
                                           "(@1:2:3),(@1,2,3)"));

TEST(ScpiFormat, ParsesErrorEntries) {
  auto e = scpi::ParseErrorEntry("0,\"No error\"");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->code, 0);
  EXPECT_EQ(e->message, "No error");
  e = scpi::ParseErrorEntry("+0, No error\r");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->code, 0);
  e = scpi::ParseErrorEntry("-221,\"Settings conflict; port 3 already connected\"");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->code, -221);
  EXPECT_EQ(e->message, "Settings conflict; port 3 already connected");
  e = scpi::ParseErrorEntry("0");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->code, 0);
  EXPECT_FALSE(scpi::ParseErrorEntry("").ok());
  EXPECT_FALSE(scpi::ParseErrorEntry("No error").ok());
  EXPECT_FALSE(scpi::ParseErrorEntry("1x,\"bad\"").ok());
}

TEST(ScpiFormat, FindsPortsNamedInMessages) {
  EXPECT_THAT(scpi::PortsNamedIn("Settings conflict; port 3 already connected"), ElementsAre(3));
  EXPECT_THAT(scpi::PortsNamedIn("Ports 4, 20 and 21 busy"), ElementsAre(4, 20, 21));
  EXPECT_THAT(scpi::PortsNamedIn("bad channels (@5,6)"), ElementsAre(5, 6));
  EXPECT_THAT(scpi::PortsNamedIn("Data out of range"), IsEmpty());
  EXPECT_THAT(scpi::PortsNamedIn("Report 12 portion"), IsEmpty());
}

TEST(ScpiFormat, ParsesIdentityAndSize) {
  auto id = scpi::ParseIdentity("Polatis,N-OST-24x24-HU1,001234,7.3.1, build 9\r");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->manufacturer, "Polatis");
  EXPECT_EQ(id->model, "N-OST-24x24-HU1");
  EXPECT_EQ(id->serial, "001234");
  EXPECT_EQ(id->firmware, "7.3.1, build 9");
  EXPECT_FALSE(scpi::ParseIdentity("  ").ok());

  EXPECT_EQ(*scpi::ParseSize("16,16"), std::make_pair(16, 16));
  EXPECT_EQ(*scpi::ParseSize("48x48"), std::make_pair(48, 48));
  EXPECT_EQ(*scpi::ParseSize(" 8 , 16 "), std::make_pair(8, 16));
  EXPECT_EQ(*scpi::ParseSize("32"), std::make_pair(32, 32));
  for (const char* bad : {"", "abc", "0,0", "16,", "1,2,3", "-4,4"}) {
    EXPECT_FALSE(scpi::ParseSize(bad).ok()) << bad;
  }
}

TEST(DuplexMapping, PairsOfConnectionsAreCircuits) {
  // 8 x 8: ingress 1..8, egress 9..16. {1,2}: 1->10, 2->9. {3,7}: 3->15, 7->11.
  std::vector<std::string> leftovers;
  auto circuits = polatis::CircuitsOf({{7, 11}, {2, 9}, {1, 10}, {3, 15}}, 8, 8, &leftovers);
  EXPECT_THAT(circuits, ElementsAre(Circuit{1, 2}, Circuit{3, 7}));
  EXPECT_THAT(leftovers, IsEmpty());
}

TEST(DuplexMapping, OneWayLoopsAndStrangersAreLeftOut) {
  std::vector<std::string> leftovers;
  // 4->13 (duplex 4->5) without 5->12; 6->14 loops port 6; 1->10 with 2->9.
  auto circuits = polatis::CircuitsOf({{4, 13}, {6, 14}, {1, 10}, {2, 9}}, 8, 8, &leftovers);
  EXPECT_THAT(circuits, ElementsAre(Circuit{1, 2}));
  ASSERT_EQ(leftovers.size(), 2u);
  EXPECT_THAT(leftovers[0], HasSubstr("loops duplex port 6"));
  EXPECT_THAT(leftovers[1], HasSubstr("one-way connection ingress 4 -> egress 13"));
  // A crossed pair that does not match up: 1->10 (1->2) and 2->11 (2->3).
  leftovers.clear();
  EXPECT_THAT(polatis::CircuitsOf({{1, 10}, {2, 11}}, 8, 8, &leftovers), IsEmpty());
  EXPECT_EQ(leftovers.size(), 2u);
}

}  // namespace
}  // namespace mixnet::ocs
