// AgentRig (test helper): an in-process controller over one OCS switch ocs0
// (a sim mixnet-ocsd, 1 ms, or a given SwitchDriver such as FakeSwitch),
// and four real WorkerAgents (hosts h0-h3) driving RecordingFollowers.
// Header-only; the test thread plus the agents' and servers' own threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/control/worker_agent.h"
#include "tests/control/controller_test_util.h"
#include "tests/control/recording_follower.h"

namespace mixnet::testing {

struct AgentRig {
  inline static const RegionDef kRegion{"r0", "h", 4, "ocs0", 1};
  inline static const std::vector<std::string> kHosts = {"h0", "h1", "h2", "h3"};

  TempDir dir;
  ControllerSetup setup;
  std::unique_ptr<control::ControllerServer> server;
  std::vector<std::unique_ptr<RecordingFollower>> followers;
  std::vector<std::unique_ptr<control::WorkerAgent>> agents;
  std::optional<SimSwitch> sw;  // without `driver`

  // `driver`: ocs0's SwitchDriver instead of a sim daemon.
  void Start(bool warm_paths, std::shared_ptr<control::SwitchDriver> driver = nullptr) {
    ASSERT_FALSE(dir.path().empty());
    if (driver != nullptr) {
      setup.drivers["ocs0"] = std::move(driver);
    } else {
      auto s = StartSimSwitch(dir.path(), "ocs0");
      ASSERT_TRUE(s.ok()) << s.status();
      sw = std::move(*s);
      setup.switches["ocs0"] = sw->address;
    }
    setup.spec_yaml = MakeSpecYaml({kRegion}, {"ocs0"});
    setup.state_dir = dir.path() + "/ctl";
    setup.listen = "unix:" + dir.path() + "/ctl.sock";
    setup.prepare_deadline = absl::Milliseconds(400);
    setup.warm_paths = warm_paths;
    auto started = StartController(setup);
    ASSERT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
    for (const std::string& h : kHosts) {
      control::WorkerAgentOptions o;
      o.controller = setup.listen;
      o.worker_id = h + "/agent";
      o.host = h;
      auto agent = control::WorkerAgent::Start(o);
      ASSERT_TRUE(agent.ok()) << agent.status();
      absl::StatusOr<router::Topology> t = (*agent)->WaitRegistered(absl::Seconds(10));
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(t->epoch, 1u);  // a fresh controller's first epoch
      followers.push_back(std::make_unique<RecordingFollower>());
      (*agent)->Follow(followers.back().get());
      agents.push_back(std::move(*agent));
    }
  }

  // WaitRegistered may return before the watch stream is up at the
  // controller: waits until all four count as registered.
  void WaitAllWatching() {
    auto stub = cv1::Controller::NewStub(Connect(setup.listen));
    ASSERT_TRUE(WaitUntil([&] { return Status(*stub).regions(0).registered_workers_size() == 4; }));
  }

  // Every agent reports its row of `pairs` (heavy) for layer 0's dispatch.
  void Report(int64_t iteration, const Pairs& pairs) {
    for (int i = 0; i < 4; ++i) {
      control::TrafficRow row;
      row.iteration = iteration;
      row.key.layer = 0;
      row.key.direction = Direction::kDispatch;
      row.peer_hosts = kHosts;
      row.bytes = Row(4, i, pairs);
      agents[i]->Report(row);
    }
  }

  ~AgentRig() {
    agents.clear();
    if (server) server->Shutdown(absl::Seconds(1));
  }
};

}  // namespace mixnet::testing
