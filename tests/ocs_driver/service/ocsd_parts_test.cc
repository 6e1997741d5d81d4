// The pieces of mixnet-ocsd on their own, in process: the sim backend (fault
// injection, hardware file), the state store (round trip, corruption, the
// directory lock), request validation, the listen-address policy and the
// --allow-client list (distinguished names in any order), the Apply
// time window, the daemon's health probe and who holds an epoch.
// Label cpu. Test thread only.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_split.h"

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ocs_driver/service/apply_timing.h"
#include "ocs_driver/service/client_identity.h"
#include "ocs_driver/service/daemon.h"
#include "ocs_driver/service/request_validation.h"
#include "ocs_driver/service/state_saver.h"
#include "ocs_driver/service/state_store.h"
#include "ocs_driver/sim/sim_backend.h"
#include "runtime/common/grpc_tls.h"
#include "tests/common/grpc_probe.h"
#include "tests/ocs_driver/daemon_process.h"
#include "tests/ocs_driver/service/ocsd_test_util.h"

namespace mixnet::ocs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SimBackendTest, ChangesSleepsOnceAndInjectsFaults) {
  auto b =
      OpenSimBackend({.ports = 8, .switching_time = absl::Milliseconds(50), .fail_ports = {8}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Info()->ports, 8);
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  absl::Time start = absl::Now();
  ASSERT_TRUE((*b)->Change({}, {{1, 2}, {3, 4}}, rep).ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(50));
  EXPECT_LT(took, absl::Milliseconds(95)) << "the switching time is slept once per change";
  EXPECT_EQ(out.size(), 2u);
  EXPECT_THAT((*b)->Read().value(), ElementsAre(Circuit{1, 2}, Circuit{3, 4}));

  absl::Status s = (*b)->Change({{1, 2}}, {{1, 5}, {7, 8}}, rep);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_FALSE(out[0].add);
  EXPECT_TRUE(out[1].status.ok());
  EXPECT_TRUE(absl::IsUnavailable(out[2].status));
  EXPECT_THAT((*b)->Read().value(), ElementsAre(Circuit{1, 5}, Circuit{3, 4}));

  start = absl::Now();
  ASSERT_TRUE((*b)->Change({}, {}, rep).ok());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(40)) << "nothing changed, no sleep";
  EXPECT_FALSE(OpenSimBackend({.ports = 1}).ok());
  EXPECT_FALSE(OpenSimBackend({.ports = 8, .fail_ports = {9}}).ok());
}

TEST(SimBackendTest, HardwareFileOutlivesTheBackend) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/hw";
  {
    auto b = OpenSimBackend({.ports = 8, .hardware_file = file});
    ASSERT_TRUE(b.ok());
    ChangeReport rep;
    ASSERT_TRUE((*b)->Change({}, {{2, 7}}, rep).ok());
  }
  auto b = OpenSimBackend({.ports = 8, .hardware_file = file});
  ASSERT_TRUE(b.ok());
  EXPECT_THAT((*b)->Read().value(), ElementsAre(Circuit{2, 7}));
  { std::ofstream(file) << "1 1\n"; }
  EXPECT_TRUE(
      absl::IsInvalidArgument(OpenSimBackend({.ports = 8, .hardware_file = file}).status()));
  { std::ofstream(file) << "1 x\n"; }
  EXPECT_TRUE(
      absl::IsInvalidArgument(OpenSimBackend({.ports = 8, .hardware_file = file}).status()));
}

// A bad sim setup is refused with an error naming the setting or the file
// and line; there is no fallback to an empty switch.
TEST(SimBackendTest, BadSettingsAndHardwareFilesAreRefusedNamingTheField) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/hw";
  auto refused = [&](const SimOptions& o, const std::string& text) {
    absl::StatusOr<std::unique_ptr<OcsBackend>> b = OpenSimBackend(o);
    EXPECT_FALSE(b.ok()) << text;
    for (absl::string_view part : absl::StrSplit(text, '|')) {
      EXPECT_THAT(std::string(b.status().message()), HasSubstr(std::string(part)));
    }
  };
  refused({.ports = 1}, "--ports must be >= 2");
  refused({.ports = 8, .switching_time = absl::Milliseconds(-1)}, "--switch-ms");
  refused({.ports = 8, .fail_ports = {9}}, "--sim-fail-ports|9|1..8");
  const std::pair<const char*, const char*> bad_files[] = {
      {"1 2\n3\n", "line 2|'3' is not a circuit"},     // an odd port out
      {"1 2 3\n", "line 1|'1 2 3' is not a circuit"},  // three on a line
      {"1 2\n\n3 x\n", "line 3|'3 x'"},                // not a number
      {"1 9\n", "line 1|second port 9 is out of range 1..8 (--ports)"},
      {"1 2\n2 3\n", "line 2|port 2 is already in circuit 2-1"},
      {"4 4\n", "line 1|circuit from port 4 to itself"},
  };
  for (const auto& [text, error] : bad_files) {
    { std::ofstream(file) << text; }
    refused({.ports = 8, .hardware_file = file}, absl::StrCat(file, "|", error));
  }
  // A file that cannot be written is refused at start, not at the first change.
  refused({.ports = 8, .hardware_file = dir.path() + "/no/such/dir/hw"},
          absl::StrCat(dir.path(), "/no/such/dir/hw"));
  // Blank lines and spacing are fine; a new file is created at start.
  { std::ofstream(file) << "\n 1\t2 \n\n3 4\n"; }
  auto b = OpenSimBackend({.ports = 8, .hardware_file = file});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT((*b)->Read().value(), ElementsAre(Circuit{1, 2}, Circuit{3, 4}));
  const std::string fresh = dir.path() + "/fresh";
  ASSERT_TRUE(OpenSimBackend({.ports = 8, .hardware_file = fresh}).ok());
  EXPECT_EQ(access(fresh.c_str(), F_OK), 0);
}

TEST(SimBackendTest, HardwareFileNotRewrittenMakesTheStateUnknown) {
  testing::TempDir dir;
  const std::string sub = dir.path() + "/sub";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  auto b = OpenSimBackend({.ports = 8, .hardware_file = sub + "/hw"});
  ASSERT_TRUE(b.ok()) << b.status();
  std::filesystem::remove_all(sub);  // the "hardware" can no longer be written
  ChangeReport rep;
  absl::Status s = (*b)->Change({}, {{1, 2}}, rep);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(rep.after.has_value());
  EXPECT_THAT(std::string(rep.read_back.message()), HasSubstr("not rewritten"));
}

TEST(StateStoreTest, RoundTripCorruptionAndLock) {
  testing::TempDir dir;
  const std::string sdir = dir.path() + "/a/b";
  auto store = StateStore::Open(sdir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_FALSE(store->Load().value().has_value());
  PersistedState s{7, 12, {{1, 4}, {2, 3}}, "ctl"};
  ASSERT_TRUE(store->Save(s).ok());
  EXPECT_EQ(store->Load().value(), s);
  s.epoch = 8;
  s.desired.clear();
  ASSERT_TRUE(store->Save(s).ok());
  EXPECT_EQ(store->Load().value(), s);

  auto second = StateStore::Open(sdir);
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();

  { std::ofstream(store->path()) << "{\"epoch\": 1, \"config_"; }
  absl::StatusOr<std::optional<PersistedState>> bad = store->Load();
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(store->path()));
  { std::ofstream(store->path()) << R"({"epoch":1,"config_version":1,"desired":[[3,3]]})"; }
  EXPECT_TRUE(absl::IsInvalidArgument(store->Load().status()));
}

// The saver's save is the store's: durable once Wait returns OK, its error
// when the save fails, nothing to wait for before a Start, and a save still
// unwaited at destruction is finished, not dropped.
TEST(StateSaverTest, SavesOnItsThreadAndReportsTheOutcome) {
  testing::TempDir dir;
  const std::string sdir = dir.path() + "/s";
  auto store = StateStore::Open(sdir);
  ASSERT_TRUE(store.ok()) << store.status();
  const PersistedState a{3, 4, {{1, 2}}, "ctl-a"}, b{5, 1, {{1, 6}, {2, 3}}, "ctl-b"};
  {
    StateSaver saver(&*store);
    EXPECT_TRUE(saver.Wait().ok());  // nothing started
    saver.Start(a);
    ASSERT_TRUE(saver.Wait().ok());
    EXPECT_EQ(store->Load().value(), a);
    EXPECT_TRUE(saver.Wait().ok());  // waited already
    saver.Start(b);                  // not waited for: the destructor finishes it
  }
  EXPECT_EQ(store->Load().value(), b);

  // A directory that is gone: the save fails, naming the file, and the next
  // save after it is done again (nothing stuck).
  StateSaver saver(&*store);
  std::filesystem::remove_all(sdir);
  saver.Start(a);
  absl::Status failed = saver.Wait();
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.message()), HasSubstr(sdir));
  std::filesystem::create_directories(sdir);
  saver.Start(a);
  EXPECT_TRUE(saver.Wait().ok());
  EXPECT_EQ(store->Load().value(), a);
}

// A sim switch whose reads fail while `fail_reads` is set.
class FlakyReadBackend : public OcsBackend {
 public:
  FlakyReadBackend(std::unique_ptr<OcsBackend> inner, std::shared_ptr<std::atomic<bool>> fail)
      : inner_(std::move(inner)), fail_(std::move(fail)) {}
  absl::StatusOr<BackendInfo> Info() override { return inner_->Info(); }
  absl::StatusOr<std::vector<Circuit>> Read() override {
    if (fail_->load()) return absl::UnavailableError("flaky: the switch does not answer");
    return inner_->Read();
  }
  absl::Status Change(const std::vector<Circuit>& remove, const std::vector<Circuit>& add,
                      ChangeReport& report) override {
    return inner_->Change(remove, add, report);
  }

 private:
  std::unique_ptr<OcsBackend> inner_;
  std::shared_ptr<std::atomic<bool>> fail_;
};

// An in-process mixnet-ocsd over an 8-port FlakyReadBackend, its state in
// `dir`/state, listening on `dir`/ocsd.sock.
absl::StatusOr<std::unique_ptr<Daemon>> StartFlakyDaemon(
    const std::string& dir, std::shared_ptr<std::atomic<bool>> fail,
    absl::Duration health_probe = DaemonOptions{}.health_probe) {
  absl::StatusOr<std::unique_ptr<OcsBackend>> sim = OpenSimBackend({.ports = 8});
  if (!sim.ok()) return sim.status();
  absl::StatusOr<StateStore> store = StateStore::Open(dir + "/state");
  if (!store.ok()) return store.status();
  DaemonOptions o;
  o.listen = "unix:" + dir + "/ocsd.sock";
  o.health_probe = health_probe;
  return Daemon::Start(std::make_unique<FlakyReadBackend>(*std::move(sim), std::move(fail)),
                       *std::move(store), o);
}

// A new epoch's state is saved beside the read before its change: when that
// read fails, the switch is untouched, the call says the state is saved, and
// the same request again applies it.
TEST(OcsServiceTest, ReadFailureBeforeAChangeKeepsTheSavedStateAndARetryApplies) {
  testing::TempDir dir;
  auto fail = std::make_shared<std::atomic<bool>>(false);
  auto daemon = StartFlakyDaemon(dir.path(), fail);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = testing::StubFor((*daemon)->address());
  ASSERT_TRUE(testing::Apply(*stub, testing::Req(1, 1, {{1, 2}})).status.ok());

  fail->store(true);
  testing::ApplyOutcome failed = testing::Apply(*stub, testing::Req(2, 1, {{3, 4}}));
  EXPECT_EQ(failed.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(failed.status.error_message(),
              HasSubstr("the desired state of epoch 2 version 1 is saved"));
  fail->store(false);
  EXPECT_EQ(testing::PairsOf(testing::Get(*stub).actual()), (testing::Pairs{{1, 2}}))
      << "the switch was touched";

  ASSERT_TRUE(testing::Apply(*stub, testing::Req(2, 1, {{3, 4}})).status.ok());
  EXPECT_EQ(testing::PairsOf(testing::Get(*stub).actual()), (testing::Pairs{{3, 4}}));
  (*daemon)->Shutdown();
  daemon->reset();
  auto reopened = StateStore::Open(dir.path() + "/state");
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(reopened->Load().value(), (PersistedState{2, 1, {{3, 4}}, "test"}));
}

// The daemon's prober reads the switch every health_probe: health goes
// NOT_SERVING (both names) while the reads fail, and SERVING again once one
// succeeds; a read held up by nothing turns it within a few periods.
TEST(OcsdHealthTest, NotServingWhileTheSwitchDoesNotAnswer) {
  testing::TempDir dir;
  auto fail = std::make_shared<std::atomic<bool>>(false);
  auto daemon = StartFlakyDaemon(dir.path(), fail, absl::Milliseconds(20));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto channel = grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials());
  using Serving = grpc::health::v1::HealthCheckResponse;
  // Waits (at most 5 s) until both names report `want`.
  auto becomes = [&](Serving::ServingStatus want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline) {
      bool all = true;
      for (const char* service : {"", "mixnet.ocs.v1.OcsDriver"}) {
        auto st = testing::HealthOf(channel, service);
        all &= st.ok() && *st == want;
      }
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  };
  EXPECT_TRUE(becomes(Serving::SERVING));
  fail->store(true);
  EXPECT_TRUE(becomes(Serving::NOT_SERVING)) << "a switch that does not answer";
  fail->store(false);
  EXPECT_TRUE(becomes(Serving::SERVING)) << "the switch answers again";
  (*daemon)->Shutdown();
}

// Two controllers never share an epoch: the first id to apply one holds
// it; another id at that epoch is refused and changes nothing, and takes
// over with a higher epoch.
TEST(OcsServiceTest, AnEpochBelongsToTheControllerThatAppliedIt) {
  testing::TempDir dir;
  auto daemon = StartFlakyDaemon(dir.path(), std::make_shared<std::atomic<bool>>(false));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = testing::StubFor((*daemon)->address());
  ASSERT_TRUE(testing::Apply(*stub, testing::Req(3, 1, {{1, 2}}, "ctl-a")).status.ok());
  for (uint64_t version : {1, 2}) {  // the same request, or a newer version
    testing::ApplyOutcome other =
        testing::Apply(*stub, testing::Req(3, version, {{1, 2}}, "ctl-b"));
    EXPECT_EQ(other.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << version;
    EXPECT_THAT(other.status.error_message(), HasSubstr("epoch 3 is held by controller 'ctl-a'"));
  }
  testing::ApplyOutcome other = testing::Apply(*stub, testing::Req(3, 2, {{3, 4}}, "ctl-b"));
  EXPECT_EQ(other.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(testing::PairsOf(testing::Get(*stub).actual()), (testing::Pairs{{1, 2}}));
  EXPECT_TRUE(testing::Apply(*stub, testing::Req(3, 2, {{3, 4}}, "ctl-a")).status.ok());
  EXPECT_TRUE(testing::Apply(*stub, testing::Req(4, 1, {{5, 6}}, "ctl-b")).status.ok());
  const testing::ApplyOutcome old = testing::Apply(*stub, testing::Req(4, 2, {{1, 2}}, "ctl-a"));
  EXPECT_EQ(old.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(testing::PairsOf(testing::Get(*stub).actual()), (testing::Pairs{{5, 6}}));
  (*daemon)->Shutdown();
}

TEST(RequestValidationTest, NormalisesAndNamesTheProblem) {
  auto ok = ValidateApplyRequest(testing::Req(1, 1, {{4, 3}, {2, 1}}), 4);
  ASSERT_TRUE(ok.ok());
  EXPECT_THAT(*ok, ElementsAre(Circuit{1, 2}, Circuit{3, 4}));
  auto twice = ValidateApplyRequest(testing::Req(1, 1, {{1, 2}, {3, 2}}), 4);
  EXPECT_TRUE(absl::IsInvalidArgument(twice.status()));
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("port 2 used twice"));
  auto range = ValidateApplyRequest(testing::Req(1, 1, {{1, 5}}), 4);
  EXPECT_THAT(std::string(range.status().message()), HasSubstr("port 5 out of range 1..4"));
  EXPECT_TRUE(ValidateApplyRequest(testing::Req(1, 1, {}), 4).ok());
}

TEST(ListenPolicyTest, LoopbackAndUnixOnlyWithoutTls) {
  for (const char* ok :
       {"127.0.0.1:50551", "127.0.0.1:0", "localhost:1", "[::1]:5", "unix:/tmp/x"}) {
    EXPECT_TRUE(CheckPlaintextListen(ok, false, false).ok()) << ok;
  }
  for (const char* refused : {"0.0.0.0:50551", "[::]:1", "10.0.0.1:5", ":50551"}) {
    EXPECT_TRUE(absl::IsPermissionDenied(CheckPlaintextListen(refused, false, false))) << refused;
    EXPECT_TRUE(CheckPlaintextListen(refused, true, false).ok()) << refused;
    EXPECT_TRUE(CheckPlaintextListen(refused, false, true).ok()) << refused;
  }
  for (const char* bad : {"nohost", "127.0.0.1:99999", "127.0.0.1:x", "unix:"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(CheckPlaintextListen(bad, false, true))) << bad;
  }
}

// Hand-written names: gRPC reports the subject of a certificate made with
// -subj /CN=ctl-2/O=mixnet as "O=mixnet,CN=ctl-2" (RFC 2253 lists the RDNs
// last-first); the README's "CN=ctl-2,O=mixnet" must match it.
TEST(ClientAllowListTest, SubjectMatchesInEitherOrder) {
  for (const char* entry : {"CN=ctl-2,O=mixnet", "O=mixnet,CN=ctl-2", "cn=ctl-2, o=mixnet",
                            " CN = ctl-2 ; O = mixnet "}) {
    absl::StatusOr<ClientAllowList> list = ClientAllowList::Create({entry});
    ASSERT_TRUE(list.ok()) << entry << ": " << list.status();
    EXPECT_TRUE(list->Allows("O=mixnet,CN=ctl-2", {"ctl-2"})) << entry;
    EXPECT_TRUE(list->Allows("CN=ctl-2,O=mixnet", {"ctl-2"})) << entry;
    EXPECT_FALSE(list->Allows("O=other,CN=ctl-2", {"ctl-2"})) << entry;
    EXPECT_FALSE(list->Allows("O=mixnet,CN=ctl-3", {"ctl-3"})) << entry;
    EXPECT_FALSE(list->Allows("O=mixnet,CN=Ctl-2", {"Ctl-2"})) << entry << ": values are exact";
    EXPECT_FALSE(list->Allows("OU=lab,O=mixnet,CN=ctl-2", {"ctl-2"}))
        << entry << ": every attribute of the subject must be listed";
    EXPECT_FALSE(list->Allows("CN=ctl-2", {"ctl-2"})) << entry;
  }
  // A bare name is the common name.
  absl::StatusOr<ClientAllowList> cn = ClientAllowList::Create({"ctl-2"});
  ASSERT_TRUE(cn.ok());
  EXPECT_TRUE(cn->Allows("O=mixnet,CN=ctl-2", {"ctl-2"}));
  EXPECT_FALSE(cn->Allows("O=mixnet,CN=ctl-22", {"ctl-22"}));
  EXPECT_FALSE(ClientAllowList().Allows("O=mixnet,CN=ctl-2", {"ctl-2"}));
}

TEST(ClientAllowListTest, EscapesQuotesAndMultiValuedRdns) {
  absl::StatusOr<std::vector<DnAttribute>> dn =
      ParseDistinguishedName(R"(CN=a\,b\2C c+UID=7,O="x, y",L=\ sp\ )");
  ASSERT_TRUE(dn.ok()) << dn.status();
  EXPECT_THAT(*dn, ElementsAre(DnAttribute{"CN", "a,b, c"}, DnAttribute{"L", " sp "},
                               DnAttribute{"O", "x, y"}, DnAttribute{"UID", "7"}));
  // UTF-8 as written by an operator vs. the \XX bytes of OpenSSL's RFC 2253
  // printing (what gRPC reports).
  absl::StatusOr<ClientAllowList> list = ClientAllowList::Create({"CN=caf\xC3\xA9"});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->Allows(R"(CN=caf\C3\A9)", {}));
  EXPECT_FALSE(list->Allows(R"(CN=caf\C3\A8)", {}));
  EXPECT_FALSE(ClientAllowList::Create({R"(CN=caf\xC3)"}).ok());
}

TEST(ClientAllowListTest, MalformedEntriesAreRefused) {
  for (const char* bad : {"=x", "CN=a,", "CN=a,,O=b", "CN=a,O", R"(CN=\q)", R"(CN=\)",
                          R"(CN="unterminated)", R"(CN="a"b)", "C N=a", ""}) {
    absl::StatusOr<ClientAllowList> list = ClientAllowList::Create({bad});
    EXPECT_FALSE(list.ok()) << "'" << bad << "' was accepted";
    if (!list.ok()) {
      EXPECT_THAT(std::string(list.status().message()), HasSubstr("--allow-client"));
    }
  }
}

// Nearest rank by hand: the ceil(p * n)-th smallest.
TEST(ApplyTimeWindowTest, MedianP90MaxOverTheLatestSamples) {
  auto ms = [](int v) { return absl::Milliseconds(v); };
  ApplyTimeWindow w;
  EXPECT_EQ(w.Stats().samples, 0u);
  EXPECT_EQ(w.Stats().max, absl::ZeroDuration());
  for (int v : {5, 1, 4, 2, 3}) w.Add(ms(v));
  ApplyTimeStats s = w.Stats();
  EXPECT_EQ(s.samples, 5u);
  EXPECT_EQ(s.median, ms(3));  // ceil(2.5) = 3rd
  EXPECT_EQ(s.p90, ms(5));     // ceil(4.5) = 5th
  EXPECT_EQ(s.max, ms(5));

  ApplyTimeWindow even;
  for (int v : {4, 1, 3, 2}) even.Add(ms(v));
  EXPECT_EQ(even.Stats().median, ms(2));  // ceil(2) = 2nd: the lower middle
  EXPECT_EQ(even.Stats().p90, ms(4));     // ceil(3.6) = 4th

  // 40 samples 1..40 ms: the window keeps the latest 32, 9..40.
  ApplyTimeWindow full;
  for (int v = 1; v <= 40; ++v) full.Add(ms(v));
  s = full.Stats();
  EXPECT_EQ(s.samples, 32u);
  EXPECT_EQ(s.median, ms(24));  // 16th of 9..40
  EXPECT_EQ(s.p90, ms(37));     // ceil(28.8) = 29th
  EXPECT_EQ(s.max, ms(40));
  full.Add(ms(1));                         // 9 falls out, 1 comes in
  EXPECT_EQ(full.Stats().median, ms(24));  // 16th of {1, 10..40}
  EXPECT_EQ(full.Stats().p90, ms(37));
}

}  // namespace
}  // namespace mixnet::ocs
