// mixnet-ocsd as a real process (sim backend) on an ephemeral TCP port and on
// a unix socket: the API, the table of bad requests, no-ops, partial failures
// and their details, fencing between racing controllers, deadlines, Watch,
// health, garbage on the socket, SIGKILL mid-apply and restart, clean
// shutdown. Label cpu. Test thread plus a few client threads per test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/ocs_driver/daemon_process.h"
#include "tests/ocs_driver/service/ocsd_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

std::unique_ptr<DaemonProcess> StartDaemon(std::vector<std::string> args,
                                           DaemonProcess::Options options = {}) {
  if (std::find(args.begin(), args.end(), "--listen") == args.end()) {
    args.insert(args.end(), {"--listen", "127.0.0.1:0"});
  }
  auto d = DaemonProcess::Start(args, options);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

TEST(OcsdTest, ServesOnEphemeralPort) {
  auto d = StartDaemon({"--ports", "16", "--switch-ms", "5"});
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->address(), HasSubstr("127.0.0.1:"));
  EXPECT_NE(d->address(), "127.0.0.1:0");
  auto stub = StubFor(d->address());
  v1::GetInfoResponse info = Info(*stub);
  EXPECT_EQ(info.backend(), "sim");
  EXPECT_EQ(info.port_count(), 16u);
  EXPECT_EQ(info.switching_time_us(), 5000u);
  EXPECT_EQ(info.highest_epoch(), 0u);

  ApplyOutcome r = Apply(*stub, Req(1, 1, {{2, 1}, {3, 16}}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_FALSE(r.response.noop());
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 2), Pair(3, 16)));
  EXPECT_EQ(r.response.ports_changed(), 4u);
  EXPECT_EQ(r.response.results_size(), 2);
  EXPECT_GE(r.response.backend_us(), 5000u);
  v1::GetCrossConnectsResponse g = Get(*stub);
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(1, 2), Pair(3, 16)));
  EXPECT_THAT(PairsOf(g.desired()), ElementsAre(Pair(1, 2), Pair(3, 16)));
  EXPECT_TRUE(g.in_sync());
  EXPECT_EQ(g.epoch(), 1u);
  EXPECT_EQ(g.config_version(), 1u);

  // Re-wiring: 3-16 stays, 1-2 goes, 4-5 comes; empty = no circuits.
  r = Apply(*stub, Req(1, 2, {{3, 16}, {4, 5}}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.ports_changed(), 4u);
  ASSERT_EQ(r.response.results_size(), 2);
  EXPECT_EQ(r.response.results(0).op(), v1::CircuitResult::REMOVE);
  EXPECT_EQ(r.response.results(1).op(), v1::CircuitResult::ADD);
  r = Apply(*stub, Req(1, 3, {}));
  ASSERT_TRUE(r.status.ok());
  EXPECT_THAT(PairsOf(Get(*stub).actual()), IsEmpty());
  EXPECT_TRUE(d->Stop().ok());
}

TEST(OcsdTest, ServesOnUnixSocket) {
  TempDir dir;
  const std::string sock = "unix:" + dir.path() + "/ocsd.sock";
  auto d = StartDaemon({"--ports", "8", "--listen", sock});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->address(), sock);
  auto stub = StubFor(d->address());
  EXPECT_EQ(Info(*stub).port_count(), 8u);
  EXPECT_TRUE(Apply(*stub, Req(1, 1, {{1, 2}})).status.ok());
  EXPECT_TRUE(d->Stop().ok());
}

TEST(OcsdTest, RefusesNonLoopbackWithoutTls) {
  auto d = DaemonProcess::Start({"--listen", "0.0.0.0:0"}, {});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("refusing to listen on 0.0.0.0:0"));
  auto ok = DaemonProcess::Start({"--listen", "0.0.0.0:0", "--insecure-listen-any"}, {});
  EXPECT_TRUE(ok.ok()) << ok.status();
  auto half_tls = DaemonProcess::Start({"--tls-cert", "/nonexistent.pem"}, {});
  EXPECT_FALSE(half_tls.ok());
}

TEST(OcsdTest, StateDirIsExclusive) {
  TempDir state;
  auto a = StartDaemon({"--ports", "8"}, {.state_dir = state.path()});
  ASSERT_NE(a, nullptr);
  auto b = DaemonProcess::Start({"--listen", "127.0.0.1:0"}, {.state_dir = state.path()});
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("in use by another mixnet-ocsd"));
}

TEST(OcsdTest, BadRequestsAreRefusedAndChangeNothing) {
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "0"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  ASSERT_TRUE(Apply(*stub, Req(5, 3, {{1, 2}, {3, 4}})).status.ok());

  v1::ApplyCrossConnectsRequest half_circuit = Req(5, 4, {});
  half_circuit.add_circuits()->set_port_a(1);  // port_b missing
  v1::ApplyCrossConnectsRequest oversized = Req(5, 4, {{1, 2}});
  oversized.set_controller_id(std::string(100 * 1024, 'x'));
  v1::ApplyCrossConnectsRequest long_id = Req(5, 4, {{1, 2}});
  long_id.set_controller_id(std::string(1000, 'c'));
  v1::ApplyCrossConnectsRequest many = Req(5, 4, {});
  for (int i = 0; i < 5; ++i) {
    v1::Circuit* c = many.add_circuits();
    c->set_port_a(1 + 2 * (i % 4));
    c->set_port_b(2 + 2 * (i % 4));
  }
  struct Case {
    const char* name;
    v1::ApplyCrossConnectsRequest request;
    grpc::StatusCode code;
  };
  const grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  const grpc::StatusCode kStale = grpc::StatusCode::FAILED_PRECONDITION;
  std::vector<Case> cases = {
      {"empty message (epoch and version missing)", v1::ApplyCrossConnectsRequest(), kInvalid},
      {"epoch 0", Req(0, 4, {{1, 2}}), kInvalid},
      {"config_version 0", Req(5, 0, {{1, 2}}), kInvalid},
      {"port 0 as port_a", Req(5, 4, {{0, 2}}), kInvalid},
      {"port 0 as port_b", Req(5, 4, {{1, 0}}), kInvalid},
      {"circuit with port_b missing", half_circuit, kInvalid},
      {"port above port count", Req(5, 4, {{1, 9}}), kInvalid},
      {"port 2^32-1", Req(5, 4, {{1, -1}}), kInvalid},
      {"self-loop", Req(5, 4, {{3, 3}}), kInvalid},
      {"port used twice", Req(5, 4, {{1, 2}, {2, 3}}), kInvalid},
      {"same circuit twice", Req(5, 4, {{1, 2}, {1, 2}}), kInvalid},
      {"same circuit reversed", Req(5, 4, {{1, 2}, {2, 1}}), kInvalid},
      {"more circuits than ports allow", many, kInvalid},
      {"oversized message", oversized, kInvalid},
      {"controller_id too long", long_id, kInvalid},
      {"stale epoch", Req(4, 9, {{5, 6}}), kStale},
      {"stale epoch with valid-looking version", Req(1, 1, {}), kStale},
      {"version going down within the epoch", Req(5, 2, {{5, 6}}), kStale},
      {"same version, different circuits", Req(5, 3, {{5, 6}}), kStale},
  };
  ASSERT_GE(cases.size(), 15u);
  for (const Case& c : cases) {
    ApplyOutcome r = Apply(*stub, c.request);
    EXPECT_EQ(r.status.error_code(), c.code) << c.name << ": " << r.status.error_message();
    EXPECT_FALSE(r.status.error_message().empty()) << c.name;
  }
  v1::GetCrossConnectsResponse g = Get(*stub);
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(1, 2), Pair(3, 4)));
  EXPECT_THAT(PairsOf(g.desired()), ElementsAre(Pair(1, 2), Pair(3, 4)));
  EXPECT_EQ(g.epoch(), 5u);
  EXPECT_EQ(g.config_version(), 3u);
  // A request past gRPC's own 4 MiB limit is refused by gRPC itself.
  v1::ApplyCrossConnectsRequest huge = Req(5, 4, {});
  huge.set_controller_id(std::string(5 * 1024 * 1024, 'h'));
  EXPECT_EQ(Apply(*stub, huge).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Apply(*stub, Req(5, 4, {{5, 6}})).status.ok());  // still serving
}

// Writes `bytes` to host:port on a fresh TCP connection and reads what comes
// back (up to 1 s) so the daemon sees the junk before we go on.
void SendJunk(const std::string& address, const std::string& bytes) {
  const size_t colon = address.rfind(':');
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(colon + 1), &port));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  while (read(fd, buf, sizeof(buf)) > 0) {
  }
  close(fd);
}

TEST(OcsdTest, GarbageOnTheSocketDoesNotHurt) {
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "0"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  ASSERT_TRUE(Apply(*stub, Req(1, 1, {{1, 2}})).status.ok());
  std::string junk(4096, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 7919) % 251);
  SendJunk(d->address(), junk);
  SendJunk(d->address(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  // A valid HTTP/2 preface followed by a frame with a bogus length and type.
  static constexpr char kBadFrame[] = "\xff\xff\xff\x09\x00\x00\x00\x00\x01garbage";
  SendJunk(d->address(), std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                             std::string(kBadFrame, sizeof(kBadFrame) - 1));
  EXPECT_EQ(Info(*stub).port_count(), 8u);
  EXPECT_TRUE(Apply(*stub, Req(1, 2, {{3, 4}})).status.ok());
  EXPECT_THAT(PairsOf(Get(*stub).actual()), ElementsAre(Pair(3, 4)));
  EXPECT_TRUE(d->Stop().ok());
}

// A bad sim hardware file stops the daemon at start, naming file and line
// (never an empty switch with an error in the log only).
TEST(OcsdTest, BadSimHardwareFileRefusesToStart) {
  TempDir dir;
  const std::string file = dir.path() + "/hw";
  { std::ofstream(file) << "1 2\n3\n"; }
  auto d = DaemonProcess::Start(
      {"--ports", "8", "--sim-hardware-file", file, "--listen", "127.0.0.1:0"}, {});
  ASSERT_FALSE(d.ok()) << "started with a malformed hardware file";
  EXPECT_THAT(std::string(d.status().message()), HasSubstr(file + " line 2"));
  { std::ofstream(file) << "1 2\n"; }
  d = DaemonProcess::Start({"--ports", "8", "--sim-hardware-file", file, "--sim-fail-ports", "9",
                            "--listen", "127.0.0.1:0"},
                           {});
  ASSERT_FALSE(d.ok()) << "started with a fail port out of range";
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--sim-fail-ports"));
}

TEST(OcsdTest, SameVersionAndContentsIsANoOp) {
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "300"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  ASSERT_TRUE(Apply(*stub, Req(2, 7, {{1, 2}})).status.ok());
  const absl::Time start = absl::Now();
  ApplyOutcome r = Apply(*stub, Req(2, 7, {{2, 1}}));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(250)) << "a no-op must not switch";
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(r.response.noop());
  EXPECT_EQ(r.response.results_size(), 0);
  EXPECT_EQ(r.response.backend_us(), 0u);
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 2)));
  // A new version of the same set: recorded, nothing to switch.
  r = Apply(*stub, Req(2, 8, {{1, 2}}));
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.response.noop());
  EXPECT_EQ(Info(*stub).config_version(), 8u);
}

TEST(OcsdTest, PartialFailureReportsEachCircuitAndTheStateReadBack) {
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "0", "--sim-fail-ports", "7"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  ASSERT_TRUE(Apply(*stub, Req(1, 1, {{1, 2}})).status.ok());
  ApplyOutcome r = Apply(*stub, Req(1, 2, {{3, 4}, {8, 7}}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(r.status.error_message(), HasSubstr("port 7"));
  ASSERT_TRUE(r.has_details)
      << "error details missing or not a google.rpc.Status with the response";
  ASSERT_EQ(r.response.results_size(), 3);
  EXPECT_EQ(r.response.results(0).op(), v1::CircuitResult::REMOVE);
  EXPECT_EQ(r.response.results(0).code(), 0);
  EXPECT_EQ(r.response.results(1).op(), v1::CircuitResult::ADD);
  EXPECT_EQ(r.response.results(1).circuit().port_a(), 3u);
  EXPECT_EQ(r.response.results(1).code(), 0);
  EXPECT_EQ(r.response.results(2).circuit().port_a(), 7u);
  EXPECT_EQ(r.response.results(2).circuit().port_b(), 8u);
  EXPECT_EQ(r.response.results(2).code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(r.response.results(2).message(), HasSubstr("injected hardware fault"));
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(3, 4)));
  EXPECT_EQ(r.response.config_version(), 2u);
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(r.status.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));

  v1::GetCrossConnectsResponse g = Get(*stub);
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(3, 4)));
  EXPECT_THAT(PairsOf(g.desired()), ElementsAre(Pair(3, 4), Pair(7, 8)));
  EXPECT_FALSE(g.in_sync());
  // Retrying the same version is not a no-op while out of sync: it drives
  // the switch again (and fails again on the broken port).
  r = Apply(*stub, Req(1, 2, {{3, 4}, {7, 8}}));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(r.has_details);
  ASSERT_EQ(r.response.results_size(), 1);
  EXPECT_EQ(r.response.results(0).circuit().port_a(), 7u);
}

TEST(OcsdTest, RacingControllersAreSerialisedAndOlderEpochsFenced) {
  auto d = StartDaemon({"--ports", "16", "--switch-ms", "100"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  constexpr int kControllers = 4;
  std::vector<std::future<ApplyOutcome>> results;
  const absl::Time start = absl::Now();
  for (int i = 1; i <= kControllers; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      return Apply(*stub, Req(i, 1, {{2 * i - 1, 2 * i}}, absl::StrCat("controller", i)));
    }));
  }
  int applied = 0;
  for (int i = 1; i <= kControllers; ++i) {
    ApplyOutcome r = results[i - 1].get();
    if (r.status.ok()) {
      ++applied;
    } else {
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
          << "controller " << i << ": " << r.status.error_message();
    }
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(applied, 1);
  // One write at a time: every applied change took its 100 ms in turn.
  EXPECT_GE(took, absl::Milliseconds(100) * applied - absl::Milliseconds(5));
  // The newest epoch always wins; the last applied request is controller 4's.
  v1::GetCrossConnectsResponse g = Get(*stub);
  EXPECT_EQ(g.epoch(), static_cast<uint64_t>(kControllers));
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(7, 8)));
  ApplyOutcome late = Apply(*stub, Req(kControllers - 1, 2, {{1, 2}}));
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(late.status.error_message(), HasSubstr("stale epoch 3"));
  EXPECT_THAT(PairsOf(Get(*stub).actual()), ElementsAre(Pair(7, 8)));
}

TEST(OcsdTest, DeadlineHonouredWhileTheSwitchIsBusy) {
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "1000"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  auto slow = std::async(std::launch::async, [&] { return Apply(*stub, Req(1, 1, {{1, 2}})); });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  ApplyOutcome r = Apply(*stub, Req(1, 2, {{3, 4}}), /*deadline_ms=*/200);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(600));
  EXPECT_TRUE(slow.get().status.ok());
  absl::SleepFor(absl::Milliseconds(200));  // the refused call must not run later
  v1::GetCrossConnectsResponse g = Get(*stub);
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(1, 2)));
  EXPECT_EQ(g.config_version(), 1u);
}

TEST(OcsdTest, SigkillDuringApplyThenRestartKeepsStateAndCircuits) {
  TempDir state, hw;
  const std::string hw_file = hw.path() + "/switch";
  { std::ofstream(hw_file) << "1 2\n"; }  // the switch already holds 1-2
  const std::vector<std::string> args = {
      "--ports", "8", "--switch-ms", "5000", "--sim-hardware-file", hw_file};
  auto d = StartDaemon(args, {.state_dir = state.path()});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  v1::GetCrossConnectsResponse g = Get(*stub);
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(1, 2))) << "actual state read at start";
  EXPECT_EQ(g.epoch(), 0u);
  EXPECT_THAT(PairsOf(g.desired()), ElementsAre(Pair(1, 2))) << "no saved state: adopted";
  EXPECT_TRUE(g.in_sync());
  auto apply = std::async(std::launch::async, [&] {
    return Apply(*stub, Req(3, 7, {{1, 2}, {5, 6}}));
  });
  absl::SleepFor(absl::Milliseconds(400));  // inside the 5 s switching time
  ASSERT_TRUE(d->Kill(SIGKILL).ok());
  auto st = d->Wait();
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(WIFSIGNALED(*st));
  EXPECT_EQ(apply.get().status.error_code(), grpc::StatusCode::UNAVAILABLE);

  auto again = StartDaemon(args, {.state_dir = state.path()});
  ASSERT_NE(again, nullptr);
  stub = StubFor(again->address());
  v1::GetInfoResponse info = Info(*stub);
  EXPECT_EQ(info.highest_epoch(), 3u);
  EXPECT_EQ(info.config_version(), 7u);
  g = Get(*stub);
  EXPECT_THAT(PairsOf(g.desired()), ElementsAre(Pair(1, 2), Pair(5, 6)));
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(1, 2), Pair(5, 6)));
  EXPECT_TRUE(g.in_sync());
  EXPECT_EQ(Apply(*stub, Req(2, 99, {})).status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  again.reset();

  // A switch that differs from the desired state is left as it is at start.
  { std::ofstream(hw_file) << "3 4\n"; }
  auto third = StartDaemon(args, {.state_dir = state.path()});
  ASSERT_NE(third, nullptr);
  stub = StubFor(third->address());
  g = Get(*stub);
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(3, 4)));
  EXPECT_THAT(PairsOf(g.desired()), ElementsAre(Pair(1, 2), Pair(5, 6)));
  EXPECT_FALSE(g.in_sync());
  EXPECT_EQ(g.epoch(), 3u);
}

TEST(OcsdTest, WatchStreamsSnapshotThenChanges) {
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "0", "--sim-fail-ports", "8"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  ASSERT_TRUE(Apply(*stub, Req(1, 1, {{1, 2}})).status.ok());
  grpc::ClientContext ctx;
  auto reader = stub->Watch(&ctx, {});
  v1::WatchEvent e;
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.kind(), v1::WatchEvent::SNAPSHOT);
  EXPECT_EQ(e.config_version(), 1u);
  EXPECT_THAT(PairsOf(e.circuits()), ElementsAre(Pair(1, 2)));

  ASSERT_TRUE(Apply(*stub, Req(1, 2, {{1, 2}, {3, 4}})).status.ok());
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.kind(), v1::WatchEvent::CHANGE);
  EXPECT_EQ(e.config_version(), 2u);
  EXPECT_THAT(PairsOf(e.circuits()), ElementsAre(Pair(1, 2), Pair(3, 4)));
  EXPECT_THAT(PairsOf(e.added()), ElementsAre(Pair(3, 4)));
  EXPECT_THAT(PairsOf(e.removed()), IsEmpty());
  EXPECT_TRUE(e.error().empty());

  EXPECT_FALSE(Apply(*stub, Req(2, 1, {{5, 6}, {7, 8}})).status.ok());  // 8 is broken
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.epoch(), 2u);
  EXPECT_EQ(e.config_version(), 1u);
  EXPECT_THAT(PairsOf(e.circuits()), ElementsAre(Pair(5, 6)));
  EXPECT_THAT(PairsOf(e.removed()), ElementsAre(Pair(1, 2), Pair(3, 4)));
  EXPECT_THAT(e.error(), HasSubstr("port 8"));

  // Cancelling ends the stream promptly.
  const absl::Time start = absl::Now();
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(d->Stop().ok());
}

TEST(OcsdTest, SigtermWithOpenWatchShutsDownCleanly) {
  auto d = StartDaemon({"--ports", "8"});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  grpc::ClientContext ctx;
  SetDeadline(ctx, 20000);
  auto reader = stub->Watch(&ctx, {});
  v1::WatchEvent e;
  ASSERT_TRUE(reader->Read(&e));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(d->Stop(absl::Seconds(10)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  while (reader->Read(&e)) {
  }
  EXPECT_FALSE(reader->Finish().ok());
}

TEST(OcsdTest, SigtermLetsARunningApplyFinish) {
  TempDir state;
  auto d = StartDaemon({"--ports", "8", "--switch-ms", "500"}, {.state_dir = state.path()});
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  auto apply = std::async(std::launch::async, [&] { return Apply(*stub, Req(1, 1, {{1, 2}})); });
  absl::SleepFor(absl::Milliseconds(150));
  ASSERT_TRUE(d->Stop(absl::Seconds(10)).ok());
  ApplyOutcome r = apply.get();
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 2)));
}

TEST(OcsdTest, HealthService) {
  auto d = StartDaemon({"--ports", "8"});
  ASSERT_NE(d, nullptr);
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials()));
  for (const char* service : {"", "mixnet.ocs.v1.OcsDriver"}) {
    grpc::ClientContext ctx;
    SetDeadline(ctx, 5000);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health->Check(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
  grpc::ClientContext ctx;
  SetDeadline(ctx, 5000);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse resp;
  EXPECT_EQ(health->Check(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Server reflection without its generated stubs: one ServerReflectionInfo
// round trip with a hand-encoded `list_services: ""` request (field 7); the
// reply must name the OcsDriver service.
TEST(OcsdTest, ServerReflectionListsTheService) {
  auto d = StartDaemon({"--ports", "8"});
  ASSERT_NE(d, nullptr);
  grpc::GenericStub stub(grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  SetDeadline(ctx, 5000);
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto step = [&](void* tag) {
    void* got = nullptr;
    bool ok = false;
    const auto st =
        cq.AsyncNext(&got, &ok, std::chrono::system_clock::now() + std::chrono::seconds(5));
    return st == grpc::CompletionQueue::GOT_EVENT && got == tag && ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(step(reinterpret_cast<void*>(1)));
  const std::string request("\x3a\x00", 2);
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  ASSERT_TRUE(step(reinterpret_cast<void*>(2)));
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(3));
  ASSERT_TRUE(step(reinterpret_cast<void*>(3)));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(in.Dump(&slices).ok());
  std::string reply;
  for (const grpc::Slice& s : slices)
    reply.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_THAT(reply, HasSubstr("mixnet.ocs.v1.OcsDriver"));
  EXPECT_THAT(reply, HasSubstr("grpc.health.v1.Health"));
  call->WritesDone(reinterpret_cast<void*>(4));
  ASSERT_TRUE(step(reinterpret_cast<void*>(4)));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  ASSERT_TRUE(step(reinterpret_cast<void*>(5)));
  EXPECT_TRUE(status.ok()) << status.error_message();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace mixnet::testing
