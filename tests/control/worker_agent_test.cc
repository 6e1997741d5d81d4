// WorkerAgent against a scripted in-process controller (a real gRPC server on
// a unix socket implementing mixnet.control.v1.Controller): registration and
// snapshot, PREPARE/COMMIT/ABORT driving a recording TopologyFollower with
// acknowledgements, stale epochs ignored, a PREPARE that misses its deadline
// acknowledged with the error, traffic reports delivered, a controller restart
// (the worker keeps its topology, re-registers and installs the newer
// snapshot), and no hang without a controller.
//
// Threads: the test thread drives; gRPC server threads run the fake service;
// the agent runs its own two threads.
#include "runtime/control/worker_agent.h"

#include <unistd.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "mixnet/control/v1/controller.grpc.pb.h"
#include "runtime/control/topology_proto.h"
#include "tests/control/recording_follower.h"

namespace mixnet::control {
namespace {

using v1::TopologyEvent;

router::Topology Topo(uint64_t epoch, std::vector<std::pair<int, int>> ports) {
  router::Topology t;
  t.epoch = epoch;
  for (auto [a, b] : ports) t.circuits.push_back(cluster::CircuitSpec{"ocs0", a, b});
  return t;
}

TopologyEvent Event(TopologyEvent::Kind kind, const router::Topology& t, uint32_t deadline_ms = 0) {
  TopologyEvent ev;
  ev.set_kind(kind);
  *ev.mutable_topology() = TopologyToProto(t);
  ev.set_deadline_ms(deadline_ms);
  return ev;
}

// The scripted controller: returns `topology` at Register and as the first
// event of each watch, then whatever the test pushes.
class FakeController final : public v1::Controller::Service {
 public:
  explicit FakeController(router::Topology t) : topology_(std::move(t)) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    absl::MutexLock l(&mu_);
    registrations_.push_back(*req);
    *resp->mutable_topology() = TopologyToProto(topology_);
    resp->set_controller_id("fake");
    resp->set_region("r0");
    return grpc::Status::OK;
  }

  grpc::Status ReportTraffic(grpc::ServerContext*, grpc::ServerReader<v1::TrafficReport>* reader,
                             v1::ReportTrafficResponse* resp) override {
    v1::TrafficReport r;
    uint64_t n = 0;
    while (reader->Read(&r)) {
      absl::MutexLock l(&mu_);
      reports_.push_back(r);
      ++n;
    }
    resp->set_reports_accepted(n);
    return grpc::Status::OK;
  }

  grpc::Status WatchTopology(grpc::ServerContext* ctx, const v1::WatchTopologyRequest*,
                             grpc::ServerWriter<TopologyEvent>* writer) override {
    {
      absl::MutexLock l(&mu_);
      ++watchers_;
    }
    if (!writer->Write(Event(TopologyEvent::SNAPSHOT, Snapshot()))) return grpc::Status::OK;
    while (!ctx->IsCancelled()) {
      TopologyEvent ev;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]()
                         ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty() || closing_; };
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(20));
        if (closing_) break;
        if (events_.empty()) continue;
        ev = events_.front();
        events_.pop_front();
      }
      if (!writer->Write(ev)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status AckTopology(grpc::ServerContext*, const v1::AckTopologyRequest* req,
                           v1::AckTopologyResponse*) override {
    absl::MutexLock l(&mu_);
    acks_.push_back(*req);
    return grpc::Status::OK;
  }

  void Push(TopologyEvent ev) {
    absl::MutexLock l(&mu_);
    events_.push_back(std::move(ev));
  }
  void Close() {
    absl::MutexLock l(&mu_);
    closing_ = true;
  }
  router::Topology Snapshot() {
    absl::MutexLock l(&mu_);
    return topology_;
  }
  // Waits for `n` acks; returns them.
  std::vector<v1::AckTopologyRequest> WaitAcks(size_t n, absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return acks_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    return acks_;
  }
  std::vector<v1::TrafficReport> WaitReports(size_t n, absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return reports_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    return reports_;
  }
  std::vector<v1::RegisterRequest> registrations() {
    absl::MutexLock l(&mu_);
    return registrations_;
  }

 private:
  absl::Mutex mu_;
  router::Topology topology_ ABSL_GUARDED_BY(mu_);
  std::deque<TopologyEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::AckTopologyRequest> acks_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::TrafficReport> reports_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

using ::mixnet::testing::RecordingFollower;

class WorkerAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("mx_agent_", getpid(), "_", counter_++);
    std::filesystem::create_directories(dir_);
    address_ = absl::StrCat("unix:", (dir_ / "ctl.sock").string());
  }
  void TearDown() override {
    agent_.reset();
    StopServer();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(router::Topology t) {
    service_ = std::make_unique<FakeController>(std::move(t));
    grpc::ServerBuilder b;
    b.AddListeningPort(address_, grpc::InsecureServerCredentials());
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr) << "cannot listen on " << address_;
  }
  void StopServer() {
    if (service_ != nullptr) service_->Close();
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
    if (server_ != nullptr) server_->Wait();
    server_.reset();
    service_.reset();
    std::filesystem::remove(dir_ / "ctl.sock");
  }
  void StartAgent() {
    WorkerAgentOptions o;
    o.controller = address_;
    o.host = "h0";
    o.worker_id = "h0/test";
    o.ranks = {0};
    o.nics = {cluster::NicSpec{"eps0", cluster::NicRole::kEps, "10.0.0.1", 16, 1.0, "", 0}};
    o.rpc_timeout = absl::Seconds(2);
    auto a = WorkerAgent::Start(o);
    ASSERT_TRUE(a.ok()) << a.status();
    agent_ = *std::move(a);
  }

  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string address_;
  std::unique_ptr<FakeController> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WorkerAgent> agent_;
};

TEST_F(WorkerAgentTest, RegistersAndInstallsTheSnapshotWhenFollowed) {
  StartServer(Topo(5, {{1, 3}}));
  StartAgent();
  absl::StatusOr<router::Topology> t = agent_->WaitRegistered(absl::Seconds(10));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->epoch, 5u);
  ASSERT_EQ(t->circuits.size(), 1u);
  EXPECT_EQ(t->circuits[0].port_b, 3);
  std::vector<v1::RegisterRequest> regs = service_->registrations();
  ASSERT_FALSE(regs.empty());
  EXPECT_EQ(regs[0].host(), "h0");
  EXPECT_EQ(regs[0].nics(0).role(), "eps");

  RecordingFollower f;
  agent_->Follow(&f);
  EXPECT_TRUE(f.WaitFor("commit 5 circuits 1", absl::Seconds(5)));
  EXPECT_EQ(f.installed_epoch(), 5u);
  EXPECT_EQ(agent_->stats().installed_epoch, 5u);
  agent_->Follow(nullptr);
}

TEST_F(WorkerAgentTest, DrivesPrepareCommitAbortAndAcknowledges) {
  StartServer(Topo(1, {{1, 3}}));
  StartAgent();
  ASSERT_TRUE(agent_->WaitRegistered(absl::Seconds(10)).ok());
  RecordingFollower f;
  agent_->Follow(&f);
  ASSERT_TRUE(f.WaitFor("commit 1 circuits 1", absl::Seconds(5)));

  service_->Push(Event(TopologyEvent::PREPARE, Topo(2, {{1, 5}}), 1000));
  std::vector<v1::AckTopologyRequest> acks = service_->WaitAcks(1, absl::Seconds(5));
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].phase(), v1::AckTopologyRequest::PREPARED);
  EXPECT_EQ(acks[0].epoch(), 2u);
  EXPECT_EQ(acks[0].error_code(), 0);
  EXPECT_EQ(f.installed_epoch(), 1u);  // nothing installed before COMMIT

  service_->Push(Event(TopologyEvent::COMMIT, Topo(2, {{1, 5}}), 1000));
  acks = service_->WaitAcks(2, absl::Seconds(5));
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[1].phase(), v1::AckTopologyRequest::COMMITTED);
  EXPECT_EQ(acks[1].epoch(), 2u);
  EXPECT_EQ(f.installed_epoch(), 2u);

  service_->Push(Event(TopologyEvent::PREPARE, Topo(3, {{1, 7}}), 1000));
  service_->Push(Event(TopologyEvent::ABORT, Topo(3, {})));
  ASSERT_TRUE(f.WaitFor("abort 3", absl::Seconds(5)));
  EXPECT_EQ(f.installed_epoch(), 2u);
  EXPECT_EQ(f.calls(), (std::vector<std::string>{"commit 1 circuits 1", "prepare 2",
                                                 "commit 2 circuits 1", "prepare 3", "abort 3"}));
  WorkerAgentStats s = agent_->stats();
  EXPECT_EQ(s.prepares, 2u);
  EXPECT_EQ(s.aborts, 1u);
  EXPECT_EQ(s.installed_epoch, 2u);
  agent_->Follow(nullptr);
}

// Router v2 weights: a COMMIT's routing goes to the follower after the
// Commit; a DECISION that keeps the topology hands its routing over at once;
// one that switches does not (its COMMIT brings it); a refused one is counted.
TEST_F(WorkerAgentTest, HandsRoutingToTheFollower) {
  StartServer(Topo(1, {{1, 3}}));
  StartAgent();
  ASSERT_TRUE(agent_->WaitRegistered(absl::Seconds(10)).ok());
  RecordingFollower f;
  agent_->Follow(&f);
  ASSERT_TRUE(f.WaitFor("commit 1 circuits 1", absl::Seconds(5)));
  v1::Routing routing;
  routing.set_version(2);
  routing.add_hosts("h0");
  routing.add_hosts("h1");
  for (double b : {0.0, 5.0, 7.0, 0.0}) routing.add_bytes(b);

  TopologyEvent commit = Event(TopologyEvent::COMMIT, Topo(2, {{1, 5}}), 1000);
  *commit.mutable_routing() = routing;
  service_->Push(commit);
  ASSERT_TRUE(f.WaitFor("routing v2 hosts 2 bytes 4", absl::Seconds(5))) << f.Calls();
  TopologyEvent switching = Event(TopologyEvent::DECISION, Topo(3, {}));
  switching.set_reconfigure(true);
  *switching.mutable_routing() = routing;
  service_->Push(switching);
  TopologyEvent keep = Event(TopologyEvent::DECISION, Topo(0, {}));
  keep.set_reconfigure(false);
  *keep.mutable_routing() = routing;
  keep.mutable_routing()->add_hosts("h2");  // tells this one apart
  // The follower reads refuse_routing after recording the call: refuse only
  // once the COMMIT's routing call has returned (the agent has counted it).
  for (const absl::Time give_up = absl::Now() + absl::Seconds(5);
       agent_->stats().routings < 1 && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(agent_->stats().routings, 1u);
  f.refuse_routing = true;
  service_->Push(keep);
  ASSERT_TRUE(f.WaitFor("routing v2 hosts 3 bytes 4", absl::Seconds(5))) << f.Calls();
  EXPECT_EQ(f.calls(),
            (std::vector<std::string>{"commit 1 circuits 1", "commit 2 circuits 1",
                                      "routing v2 hosts 2 bytes 4", "routing v2 hosts 3 bytes 4"}));
  // The agent counts after the follower's call returns: wait for it.
  WorkerAgentStats s = agent_->stats();
  for (const absl::Time give_up = absl::Now() + absl::Seconds(5);
       s.routings < 2 && absl::Now() < give_up; s = agent_->stats()) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(s.routings, 2u);
  EXPECT_EQ(s.routing_errors, 1u);
  agent_->Follow(nullptr);
}

TEST_F(WorkerAgentTest, IgnoresEventsOfOlderEpochs) {
  StartServer(Topo(6, {}));
  StartAgent();
  ASSERT_TRUE(agent_->WaitRegistered(absl::Seconds(10)).ok());
  RecordingFollower f;
  agent_->Follow(&f);
  ASSERT_TRUE(f.WaitFor("commit 6 circuits 0", absl::Seconds(5)));
  service_->Push(Event(TopologyEvent::PREPARE, Topo(4, {{1, 3}}), 1000));
  service_->Push(Event(TopologyEvent::COMMIT, Topo(5, {{1, 3}}), 1000));
  // A marker event after them, so the stale ones have been handled.
  service_->Push(Event(TopologyEvent::ABORT, Topo(9, {})));
  ASSERT_TRUE(f.WaitFor("abort 9", absl::Seconds(5)));
  EXPECT_EQ(f.installed_epoch(), 6u);
  EXPECT_EQ(agent_->stats().stale_events, 2u);
  EXPECT_TRUE(service_->WaitAcks(1, absl::Milliseconds(100)).empty());
  agent_->Follow(nullptr);
}

TEST_F(WorkerAgentTest, PrepareThatMissesItsDeadlineIsAcknowledgedWithTheError) {
  StartServer(Topo(1, {}));
  StartAgent();
  ASSERT_TRUE(agent_->WaitRegistered(absl::Seconds(10)).ok());
  RecordingFollower f;
  f.block_prepare = true;
  agent_->Follow(&f);
  const absl::Time start = absl::Now();
  service_->Push(Event(TopologyEvent::PREPARE, Topo(2, {{1, 3}}), 300));
  std::vector<v1::AckTopologyRequest> acks = service_->WaitAcks(1, absl::Seconds(5));
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(acks[0].error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_NE(acks[0].error_message().find("ocs0 port 1"), std::string::npos);
  EXPECT_EQ(agent_->stats().prepare_timeouts, 1u);
  agent_->Follow(nullptr);
}

TEST_F(WorkerAgentTest, DeliversTrafficReports) {
  StartServer(Topo(1, {}));
  StartAgent();
  for (int i = 0; i < 3; ++i) {
    TrafficRow row;
    row.iteration = 7;
    row.key = GateKey{i, 0, Direction::kDispatch};
    row.peer_hosts = {"h0", "h1"};
    row.bytes = {0, 1000.0 * (i + 1)};
    row.observed_ms = 1.25 * i;  // row 0: not measured
    agent_->Report(row);
  }
  std::vector<v1::TrafficReport> got = service_->WaitReports(3, absl::Seconds(10));
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].layer(), i);
    EXPECT_EQ(got[i].iteration(), 7);
    EXPECT_EQ(got[i].host(), "h0");
    EXPECT_EQ(got[i].direction(), v1::DISPATCH);
    ASSERT_EQ(got[i].bytes_size(), 2);
    EXPECT_EQ(got[i].bytes(1), 1000.0 * (i + 1));
    EXPECT_EQ(got[i].observed_ms(), 1.25 * i);
  }
  // The agent counts a row after its Write returns, which may be after the
  // service has read it: wait for the count.
  for (const absl::Time give_up = absl::Now() + absl::Seconds(5);
       agent_->stats().reports_sent < 3 && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(agent_->stats().reports_sent, 3u);
}

TEST_F(WorkerAgentTest, KeepsItsTopologyWhileTheControllerIsGoneAndInstallsTheNewerOne) {
  StartServer(Topo(3, {{1, 3}}));
  StartAgent();
  ASSERT_TRUE(agent_->WaitRegistered(absl::Seconds(10)).ok());
  RecordingFollower f;
  agent_->Follow(&f);
  ASSERT_TRUE(f.WaitFor("commit 3 circuits 1", absl::Seconds(5)));

  StopServer();
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (agent_->stats().registered && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_FALSE(agent_->stats().registered);
  absl::SleepFor(absl::Milliseconds(300));  // a few reconnect attempts fail meanwhile
  EXPECT_EQ(f.installed_epoch(), 3u);
  EXPECT_EQ(f.calls().size(), 1u);

  StartServer(Topo(10, {{1, 3}, {5, 7}}));
  EXPECT_TRUE(f.WaitFor("commit 10 circuits 2", absl::Seconds(10)));
  EXPECT_GE(agent_->stats().reconnects, 1u);
  std::vector<v1::RegisterRequest> regs = service_->registrations();
  ASSERT_FALSE(regs.empty());
  EXPECT_EQ(regs[0].installed_epoch(), 3u);
  agent_->Follow(nullptr);
}

TEST_F(WorkerAgentTest, WithoutAControllerNothingHangs) {
  StartAgent();  // nobody listens on the socket
  const absl::Time start = absl::Now();
  absl::StatusOr<router::Topology> t = agent_->WaitRegistered(absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(t.status())) << t.status();
  EXPECT_NE(t.status().message().find(address_), std::string::npos) << t.status();
  agent_->Report(TrafficRow{});
  agent_.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(WorkerAgentOptionsTest, RefusesMissingControllerOrHost) {
  WorkerAgentOptions o;
  o.host = "h0";
  EXPECT_TRUE(absl::IsInvalidArgument(WorkerAgent::Start(o).status()));
  o.controller = "unix:/nonexistent";
  o.host.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(WorkerAgent::Start(o).status()));
}

}  // namespace
}  // namespace mixnet::control
