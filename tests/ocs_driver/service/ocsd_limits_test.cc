// mixnet-ocsd's limits as a real process (sim backend): the epoch maximum
// (2^53 - 1, in requests and in a saved state), the measured Apply time in
// GetInfo, request metadata over the limit failing that call alone, and a
// malformed request body answered INVALID_ARGUMENT. Label cpu. Test thread.
#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/grpc_probe.h"
#include "tests/ocs_driver/daemon_process.h"
#include "tests/ocs_driver/service/ocsd_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr uint64_t kTwoTo53Minus1 = 9007199254740991ull;  // the documented maximum

std::unique_ptr<DaemonProcess> StartDaemon(std::vector<std::string> args,
                                           DaemonProcess::Options options = {}) {
  if (std::find(args.begin(), args.end(), "--switch-ms") == args.end()) {
    args.insert(args.end(), {"--switch-ms", "0"});
  }
  args.insert(args.end(), {"--listen", "127.0.0.1:0"});
  auto d = DaemonProcess::Start(args, options);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

// A client's -1 (2^64 - 1) used to be accepted and fenced every later epoch.
TEST(OcsdLimitsTest, EpochAboveTheMaximumIsRefusedAndFencesNothing) {
  auto d = StartDaemon({"--ports", "8"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  for (uint64_t epoch : std::vector<uint64_t>{~0ull, kTwoTo53Minus1 + 1, 1ull << 63}) {
    ApplyOutcome r = Apply(*stub, Req(epoch, 1, {{1, 2}}));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << epoch;
    EXPECT_THAT(r.status.error_message(), HasSubstr("exceeds the maximum 9007199254740991"));
  }
  EXPECT_EQ(Info(*stub).highest_epoch(), 0u);
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}}));
  EXPECT_TRUE(r.status.ok()) << "epoch 1 fenced after a refused epoch: "
                             << r.status.error_message();

  // The maximum itself is an ordinary epoch.
  r = Apply(*stub, Req(kTwoTo53Minus1, 1, {{3, 4}}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(Info(*stub).highest_epoch(), kTwoTo53Minus1);
  EXPECT_THAT(PairsOf(Get(*stub).actual()), ElementsAre(Pair(3, 4)));
}

// A state file left with an epoch above the maximum (by a daemon without the
// check) stops the start with the way out, instead of fencing forever.
TEST(OcsdLimitsTest, SavedEpochAboveTheMaximumStopsTheStart) {
  TempDir state;
  std::ofstream(state.path() + "/state.json")
      << R"({"epoch": 18446744073709551615, "config_version": 1, "controller_id": "x",)"
      << R"( "desired": [[1, 2]]})";
  auto d = DaemonProcess::Start({"--ports", "8", "--listen", "127.0.0.1:0"},
                                {.state_dir = state.path()});
  ASSERT_FALSE(d.ok()) << "started with epoch 2^64-1 at " << (*d)->address();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("above the maximum 9007199254740991"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("state.json"));

  std::ofstream(state.path() + "/state.json")
      << R"({"epoch": 9007199254740991, "config_version": 1, "controller_id": "x",)"
      << R"( "desired": [[1, 2]]})";
  auto ok = StartDaemon({"--ports", "8"}, {.state_dir = state.path()});
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(Info(*StubFor(ok->address())).highest_epoch(), kTwoTo53Minus1);
}

// The sim sleeps --switch-ms once per change, so every Apply that changes the
// switch takes at least 40 ms, and no longer than the client saw it take.
TEST(OcsdLimitsTest, GetInfoReportsTheMeasuredApplyTime) {
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "40"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  v1::GetInfoResponse info = Info(*stub);
  EXPECT_EQ(info.apply_samples(), 0u);
  EXPECT_EQ(info.apply_median_us(), 0u);
  EXPECT_EQ(info.apply_max_us(), 0u);

  absl::Duration client_max = absl::ZeroDuration();
  const std::vector<Pairs> sets = {{{1, 2}}, {{3, 4}}, {{1, 2}, {5, 6}}};
  for (size_t i = 0; i < sets.size(); ++i) {
    const absl::Time start = absl::Now();
    ApplyOutcome r = Apply(*stub, Req(1, i + 1, sets[i]));
    client_max = std::max(client_max, absl::Now() - start);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  info = Info(*stub);
  EXPECT_EQ(info.apply_samples(), 3u);
  EXPECT_GE(info.apply_median_us(), 40000u);
  EXPECT_GE(info.apply_p90_us(), info.apply_median_us());
  EXPECT_GE(info.apply_max_us(), info.apply_p90_us());
  EXPECT_LE(info.apply_max_us(), static_cast<uint64_t>(absl::ToInt64Microseconds(client_max)));

  // Not counted: a no-op, a new version with the same circuits, a refused
  // request, a stale epoch.
  EXPECT_TRUE(Apply(*stub, Req(1, 3, sets[2])).response.noop());
  EXPECT_TRUE(Apply(*stub, Req(1, 4, sets[2])).response.noop());
  EXPECT_FALSE(Apply(*stub, Req(1, 5, {{1, 1}})).status.ok());
  EXPECT_TRUE(Apply(*stub, Req(2, 1, {})).status.ok());  // counted: 4 samples
  EXPECT_FALSE(Apply(*stub, Req(1, 9, {{7, 8}})).status.ok());
  EXPECT_EQ(Info(*stub).apply_samples(), 4u);
}

// gRPC 1.51 with its default 8 KiB limit ended the whole connection, a
// Watch on it included, for one call with 9 KiB of metadata. Now a call
// above 16 KiB fails alone with RESOURCE_EXHAUSTED and changes nothing.
TEST(OcsdLimitsTest, OversizedMetadataFailsOnlyItsCall) {
  auto d = StartDaemon({"--ports", "8"});
  ASSERT_NE(d, nullptr);
  auto channel = grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials());
  auto stub = v1::OcsDriver::NewStub(channel);
  grpc::ClientContext watch_ctx;
  SetDeadline(watch_ctx, 30000);
  auto reader = stub->Watch(&watch_ctx, {});
  v1::WatchEvent e;
  ASSERT_TRUE(reader->Read(&e));
  ASSERT_EQ(e.kind(), v1::WatchEvent::SNAPSHOT);

  // 12 KiB: above gRPC's default, within the documented 16 KiB.
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, 5000);
    ctx.AddMetadata("x-token", std::string(12 * 1024, 'a'));
    v1::GetInfoResponse info;
    grpc::Status s = stub->GetInfo(&ctx, {}, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  for (int kib : {16, 20, 100}) {
    grpc::ClientContext ctx;
    SetDeadline(ctx, 5000);
    ctx.AddMetadata("x-big", std::string(kib * 1024, 'a'));
    v1::GetInfoResponse info;
    grpc::Status s = stub->GetInfo(&ctx, {}, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << kib << " KiB";
    EXPECT_THAT(s.error_message(), HasSubstr("exceeds the limit of 16384 bytes")) << kib;
  }
  // Many small entries count too, and an Apply refused this way changes nothing.
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, 5000);
    for (int i = 0; i < 40; ++i) ctx.AddMetadata(absl::StrCat("x-", i), std::string(500, 'b'));
    v1::ApplyCrossConnectsResponse resp;
    grpc::Status s = stub->ApplyCrossConnects(&ctx, Req(1, 1, {{5, 6}}), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  EXPECT_EQ(Info(*stub).highest_epoch(), 0u);

  // The Watch on the same connection saw none of it and gets the next change.
  ASSERT_TRUE(Apply(*stub, Req(1, 1, {{1, 2}})).status.ok());
  ASSERT_TRUE(reader->Read(&e)) << "the Watch on the same connection died: "
                                << reader->Finish().error_message();
  EXPECT_EQ(e.kind(), v1::WatchEvent::CHANGE);
  EXPECT_THAT(PairsOf(e.circuits()), ElementsAre(Pair(1, 2)));
  watch_ctx.TryCancel();
  reader->Finish();
}

// A body that is not the request message: INVALID_ARGUMENT naming the
// method and the type (gRPC alone says INTERNAL with no message).
TEST(OcsdLimitsTest, MalformedBodyIsInvalidArgument) {
  auto d = StartDaemon({"--ports", "8"});
  ASSERT_NE(d, nullptr);
  auto channel = grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials());
  // Field 1 as length-delimited with 5 bytes announced, 2 present; and a lone
  // tag byte with no value.
  for (const std::string& body : {std::string("\x0a\x05"
                                              "ab"),
                                  std::string("\xff")}) {
    for (const auto& [method, type] : std::vector<std::pair<std::string, std::string>>{
             {"/mixnet.ocs.v1.OcsDriver/ApplyCrossConnects",
              "mixnet.ocs.v1.ApplyCrossConnectsRequest"},
             {"/mixnet.ocs.v1.OcsDriver/GetInfo", "mixnet.ocs.v1.GetInfoRequest"},
             {"/mixnet.ocs.v1.OcsDriver/Watch", "mixnet.ocs.v1.WatchRequest"}}) {
      grpc::Status s = RawUnaryCall(channel, method, body);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ": " << s.error_code() << " " << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr(method));
      EXPECT_THAT(s.error_message(), HasSubstr(type));
    }
  }
  // A well-formed body on the same channel still works.
  v1::ApplyCrossConnectsRequest good = Req(1, 1, {{3, 4}});
  std::string reply;
  grpc::Status s = RawUnaryCall(channel, "/mixnet.ocs.v1.OcsDriver/ApplyCrossConnects",
                                good.SerializeAsString(), &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(PairsOf(Get(*StubFor(d->address())).actual()), ElementsAre(Pair(3, 4)));
}

}  // namespace
}  // namespace mixnet::testing
