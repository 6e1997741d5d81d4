// End to end over the control plane (label cpu): the in-process controller
// with a sim OCS daemon, and four real WorkerAgents (runtime/control/
// worker_agent.h) driving recording TopologyFollowers: a round reaches every
// follower and the switch, a follower that cannot drain aborts the round,
// and a restarted controller's newer SNAPSHOT is installed by the agents.
#include <atomic>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/control/worker_agent.h"
#include "tests/control/controller_test_util.h"
#include "tests/control/recording_follower.h"

namespace mixnet::testing {
namespace {

using Follower = RecordingFollower;

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};
const std::vector<std::string> kHosts = {"h0", "h1", "h2", "h3"};

TEST(ControllerAgentTest, AgentsFollowRoundsAbortsAndARestart) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto sw = StartSimSwitch(dir.path(), "ocs0");
  ASSERT_TRUE(sw.ok()) << sw.status();
  ControllerSetup setup;
  setup.spec_yaml = MakeSpecYaml({kR0}, {"ocs0"});
  setup.switches["ocs0"] = sw->address;
  setup.state_dir = dir.path() + "/ctl";
  setup.listen = "unix:" + dir.path() + "/ctl.sock";
  setup.prepare_deadline = absl::Milliseconds(400);
  auto server = StartController(setup);
  ASSERT_TRUE(server.ok()) << server.status();

  std::vector<std::unique_ptr<Follower>> followers;
  std::vector<std::unique_ptr<control::WorkerAgent>> agents;
  for (const std::string& h : kHosts) {
    control::WorkerAgentOptions o;
    o.controller = setup.listen;
    o.worker_id = h + "/agent";
    o.host = h;
    auto agent = control::WorkerAgent::Start(o);
    ASSERT_TRUE(agent.ok()) << agent.status();
    absl::StatusOr<router::Topology> t = (*agent)->WaitRegistered(absl::Seconds(10));
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->epoch, 1u);
    followers.push_back(std::make_unique<Follower>());
    (*agent)->Follow(followers.back().get());
    agents.push_back(std::move(*agent));
  }
  // WaitRegistered may return before the watch stream is up at the
  // controller: wait until all four count as registered.
  auto stub = cv1::Controller::NewStub(Connect(setup.listen));
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub).regions(0).registered_workers_size() == 4; }));

  auto report = [&](int64_t iteration, const Pairs& pairs) {
    for (int i = 0; i < 4; ++i) {
      control::TrafficRow row;
      row.iteration = iteration;
      row.key.layer = 0;
      row.key.direction = Direction::kDispatch;
      row.peer_hosts = kHosts;
      row.bytes = Row(4, i, pairs);
      agents[i]->Report(row);
    }
  };
  report(0, {{0, 1}, {2, 3}});
  for (auto& f : followers) {
    EXPECT_TRUE(f->WaitFor("prepare 2")) << f->Calls();
    EXPECT_TRUE(f->WaitFor("commit 2 circuits 2")) << f->Calls();
  }
  auto held = ReadSwitch(sw->address);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->first, (Pairs{{1, 2}, {3, 4}}));

  // A follower that cannot drain in time: the round is aborted everywhere.
  followers[2]->block_prepare = true;
  report(1, {{0, 2}, {1, 3}});
  for (auto& f : followers) EXPECT_TRUE(f->WaitFor("abort 3")) << f->Calls();
  held = ReadSwitch(sw->address);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->first, (Pairs{{1, 2}, {3, 4}}));
  followers[2]->block_prepare = false;

  // Restart: the agents reconnect and install the newer epoch's snapshot.
  (*server)->Shutdown(absl::Seconds(1));
  server->reset();
  auto again = StartController(setup);
  ASSERT_TRUE(again.ok()) << again.status();
  const uint64_t epoch = (*again)->controller().GetStatus().highest_epoch();
  EXPECT_GT(epoch, 3u);
  for (auto& f : followers) {
    EXPECT_TRUE(WaitUntil([&] { return f->installed_epoch() == epoch; })) << f->Calls();
  }
  ASSERT_TRUE(WaitUntil([&] {
    return (*again)->controller().GetStatus().regions(0).registered_workers_size() == 4;
  }));
  // And rounds work with the new controller.
  report(2, {{0, 3}, {1, 2}});
  for (auto& f : followers) {
    EXPECT_TRUE(f->WaitFor(absl::StrCat("commit ", epoch + 1, " circuits 2"))) << f->Calls();
  }
  agents.clear();
  (*again)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace mixnet::testing
