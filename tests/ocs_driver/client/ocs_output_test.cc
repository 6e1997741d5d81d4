// mixnetctl's output formats (ocs_output.h) for an Apply reply and Watch
// events whose actual state is unknown (the daemon could not read the switch
// back): the text says "unknown" and the JSON has null, never an empty list,
// and cleared one-way leftovers are listed. Label cpu; test thread only.
#include "ocs_driver/client/ocs_output.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixnet::ocs {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

OcsApplyResult UnknownReply() {
  OcsApplyResult r;
  r.status = absl::UnavailableError("switch 10.0.0.50:5025: connection lost");
  r.has_response = true;
  r.response.set_epoch(1);
  r.response.set_config_version(2);
  r.response.set_actual_unknown(true);
  r.response.add_cleared("ingress 2 -> egress 19 (duplex 2 -> 3, one-way)");
  v1::CircuitResult* c = r.response.add_results();
  c->mutable_circuit()->set_port_a(2);
  c->mutable_circuit()->set_port_b(3);
  c->set_op(v1::CircuitResult::ADD);
  c->set_code(14);
  c->set_message("circuit {2,3} could not be verified (state unknown)");
  return r;
}

TEST(OcsOutputTest, UnknownActualStateIsPrintedAsUnknown) {
  const OcsApplyResult r = UnknownReply();
  const std::string text = ApplyText(r, absl::Milliseconds(3));
  EXPECT_THAT(text, HasSubstr("actual: unknown"));
  EXPECT_THAT(text, Not(HasSubstr("none")));
  EXPECT_THAT(text, HasSubstr("cleared ingress 2 -> egress 19"));
  const nlohmann::json j = ApplyJson(r, absl::Milliseconds(3));
  EXPECT_TRUE(j.at("actual").is_null()) << j.dump();
  EXPECT_EQ(j.at("actual_unknown"), true);
  EXPECT_EQ(j.at("cleared").size(), 1u);

  OcsApplyResult known = r;
  known.response.set_actual_unknown(false);
  EXPECT_THAT(ApplyText(known, absl::Milliseconds(3)), HasSubstr("actual (0 circuits): none"));
  EXPECT_EQ(ApplyJson(known, absl::Milliseconds(3)).at("actual"), nlohmann::json::array());
}

TEST(OcsOutputTest, WatchEventWithUnknownCircuits) {
  v1::WatchEvent e;
  e.set_kind(v1::WatchEvent::CHANGE);
  e.set_epoch(1);
  e.set_config_version(2);
  e.set_circuits_unknown(true);
  e.set_error("connection lost");
  EXPECT_THAT(WatchEventText(e), HasSubstr("circuits unknown"));
  EXPECT_TRUE(WatchEventJson(e).at("circuits").is_null());
  e.set_kind(v1::WatchEvent::SNAPSHOT);
  EXPECT_THAT(WatchEventText(e), HasSubstr("circuits unknown"));
  e.set_circuits_unknown(false);
  EXPECT_THAT(WatchEventText(e), HasSubstr("0 circuits: none"));
}

}  // namespace
}  // namespace mixnet::ocs
