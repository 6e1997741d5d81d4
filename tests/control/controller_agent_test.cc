// End to end over the control plane (label cpu): the in-process controller
// with a sim OCS daemon, and four real WorkerAgents (runtime/control/
// worker_agent.h) driving recording TopologyFollowers: a round reaches every
// follower and the switch, a follower that cannot drain aborts the round,
// and a restarted controller's newer SNAPSHOT is installed by the agents.
#include <atomic>
#include <optional>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/control/worker_agent.h"
#include "tests/control/agent_rig.h"
#include "tests/control/controller_test_util.h"
#include "tests/control/recording_follower.h"

namespace mixnet::testing {
namespace {

// Every agent's WarmPaths, each on its own thread (the sweep starts when the
// last one asks).
std::vector<control::WarmOutcome> WarmAll(AgentRig& rig, absl::Duration timeout) {
  std::vector<control::WarmOutcome> out(rig.agents.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < rig.agents.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = rig.agents[i]->WarmPaths(timeout); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(ControllerAgentTest, AgentsFollowRoundsAbortsAndARestart) {
  AgentRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start(/*warm_paths=*/true));
  const ControllerSetup& setup = rig.setup;
  std::vector<std::unique_ptr<RecordingFollower>>& followers = rig.followers;
  std::vector<std::unique_ptr<control::WorkerAgent>>& agents = rig.agents;
  ASSERT_NO_FATAL_FAILURE(rig.WaitAllWatching());
  auto report = [&](int64_t iteration, const Pairs& pairs) { rig.Report(iteration, pairs); };
  report(0, {{0, 1}, {2, 3}});
  for (auto& f : followers) {
    EXPECT_TRUE(f->WaitFor("prepare 2")) << f->Calls();
    EXPECT_TRUE(f->WaitFor("commit 2 circuits 2")) << f->Calls();
  }
  auto held = ReadSwitch(rig.sw->address);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->first, (Pairs{{1, 2}, {3, 4}}));
  // An ordinary round is not waited on (TopologyFollower::Settle).
  for (auto& f : followers) EXPECT_EQ(f->Calls().find("settle"), std::string::npos) << f->Calls();
  for (auto& a : agents) {  // each worker timed its part of the round
    const control::WorkerAgentStats s = a->stats();
    EXPECT_GT(s.prepare_p50_ms, 0);
    EXPECT_GT(s.commit_p50_ms, 0);
    EXPECT_GE(s.commit_p99_ms, s.commit_p50_ms);
  }

  // A follower that cannot drain in time: the round is aborted everywhere.
  followers[2]->block_prepare = true;
  report(1, {{0, 2}, {1, 3}});
  for (auto& f : followers) EXPECT_TRUE(f->WaitFor("abort 3")) << f->Calls();
  held = ReadSwitch(rig.sw->address);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->first, (Pairs{{1, 2}, {3, 4}}));
  followers[2]->block_prepare = false;

  // Restart: the agents reconnect and install the newer epoch's snapshot.
  rig.server->Shutdown(absl::Seconds(1));
  rig.server.reset();
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

TEST(ControllerAgentTest, WarmSweepLightsEveryPortPairOnceThenRestores) {
  AgentRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start(/*warm_paths=*/true));
  // Three of four ask: nothing moves until the fourth does.
  std::vector<control::WarmOutcome> early(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { early[i] = rig.agents[i]->WarmPaths(absl::Seconds(20)); });
  }
  absl::SleepFor(absl::Milliseconds(300));
  for (auto& f : rig.followers) EXPECT_EQ(f->commits().size(), 1u) << f->Calls();  // the snapshot
  const control::WarmOutcome last = rig.agents[3]->WarmPaths(absl::Seconds(20));
  for (std::thread& t : threads) t.join();
  early.push_back(last);
  // K4's three perfect matchings, then the empty topology it had.
  for (const control::WarmOutcome& o : early) {
    EXPECT_TRUE(o.enabled);
    EXPECT_TRUE(o.complete) << o.reason;
    EXPECT_FALSE(o.timed_out);
    EXPECT_EQ(o.rounds, 4u);
    EXPECT_EQ(o.planned, 4u);
  }
  for (auto& f : rig.followers) {
    const std::vector<router::Topology> c = f->commits();
    ASSERT_EQ(c.size(), 5u) << f->Calls();
    std::set<std::pair<int, int>> lit;
    for (size_t i = 1; i <= 3; ++i) {
      EXPECT_EQ(c[i].epoch, i + 1);
      EXPECT_EQ(c[i].circuits.size(), 2u);
      for (const cluster::CircuitSpec& k : c[i].circuits) lit.emplace(k.port_a, k.port_b);
    }
    EXPECT_EQ(lit, (std::set<std::pair<int, int>>{{1, 2}, {1, 3}, {1, 4}, {2, 3}, {2, 4}, {3, 4}}));
    EXPECT_EQ(c[4].epoch, 5u);
    EXPECT_TRUE(c[4].circuits.empty());
    // Each sweep round's Commit is followed by the follower's Settle, before
    // the next round's PREPARE.
    const std::string calls = f->Calls();
    for (int e = 2; e <= 5; ++e) {
      EXPECT_NE(calls.find(absl::StrCat("commit ", e, " circuits ", e < 5 ? 2 : 0, "; settle ", e,
                                        e < 5 ? absl::StrCat("; prepare ", e + 1) : "")),
                std::string::npos)
          << calls;
    }
  }
  auto held = ReadSwitch(rig.sw->address);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->first.empty());
  for (auto& a : rig.agents) {  // the sweep's rounds are not the job's
    EXPECT_EQ(a->stats().commit_p50_ms, 0);
    EXPECT_EQ(a->stats().prepare_p50_ms, 0);
  }
  const cv1::ControllerStatus st = rig.server->controller().GetStatus();
  EXPECT_EQ(st.regions(0).warm_rounds(), 4u);
  EXPECT_GT(st.regions(0).warm_ms(), 0);
  EXPECT_GT(st.regions(0).warm_round_overhead_ms_p50(), 0);  // the calibration
  EXPECT_EQ(st.regions(0).rounds_committed(), 0u);           // sweep rounds are counted apart
  EXPECT_EQ(st.regions(0).round_samples(), 0u);
  // Asking again once the region is warm answers at once, no new round.
  const control::WarmOutcome again = rig.agents[0]->WarmPaths(absl::Seconds(5));
  EXPECT_TRUE(again.complete) << again.reason;
  EXPECT_EQ(again.rounds, 4u);
  EXPECT_EQ(rig.followers[0]->commits().size(), 5u);
}

TEST(ControllerAgentTest, WarmSweepOffOrStoppedByAWorkerThatCannotPrepare) {
  {
    AgentRig rig;
    ASSERT_NO_FATAL_FAILURE(rig.Start(/*warm_paths=*/false));
    const control::WarmOutcome o = rig.agents[0]->WarmPaths(absl::Seconds(5));
    EXPECT_FALSE(o.enabled);
    EXPECT_FALSE(o.complete);
    EXPECT_FALSE(o.timed_out);
    EXPECT_NE(o.reason.find("--warm-paths off"), std::string::npos) << o.reason;
    EXPECT_LT(o.waited, absl::Seconds(2));
  }
  AgentRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start(/*warm_paths=*/true));
  rig.followers[2]->block_prepare = true;
  for (const control::WarmOutcome& o : WarmAll(rig, absl::Seconds(20))) {
    EXPECT_TRUE(o.enabled);
    EXPECT_FALSE(o.complete);
    EXPECT_EQ(o.rounds, 0u);  // the first round aborted: nothing to restore
    EXPECT_NE(o.reason.find("sweep round 1 of 3"), std::string::npos) << o.reason;
    EXPECT_NE(o.reason.find("h2/agent"), std::string::npos) << o.reason;
  }
  for (auto& f : rig.followers) EXPECT_TRUE(f->WaitFor("abort 2")) << f->Calls();
  EXPECT_EQ(rig.server->controller().GetStatus().regions(0).rounds_aborted(), 1u);
}

}  // namespace
}  // namespace mixnet::testing
