// The netns OcsBackend (mixnet-ocsd --backend netns) on a bare OCS namespace
// of 8 ports (four veth pairs inside it, no hosts): a change with a
// switching time is two netlink batches with a sleep between, and batches
// are not transactions. A port that disappears while the changed ports are
// dark makes requests of the second batch fail; every circuit must then be
// reported from the acknowledgements and the read-back (removals that were
// done are done), not with one status for all. Label netns (needs root;
// skips otherwise) and removes its namespace. Test thread plus one thread
// running the change.
#include "ocs_driver/netns/netns_backend.h"

#include <future>

#include "absl/time/clock.h"
#include "emulation/links.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "ocs_driver/netns/netns_ocs.h"
#include "ocs_driver/netns/nl_socket.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::ocs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NetnsBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    ns_ = testing::UniquePrefix("ocst") + "-ocs";
    ASSERT_TRUE(netns::CreateNamespace(ns_).ok());
    // Both ends of each veth are ports here: keep the namespace silent.
    ASSERT_TRUE(netns::SetSysctls(ns_, {{"net/ipv6/conf/all/disable_ipv6", "1"},
                                        {"net/ipv6/conf/default/disable_ipv6", "1"}})
                    .ok());
    auto sock = netns::NlSocket::Open(ns_);
    ASSERT_TRUE(sock.ok()) << sock.status();
    sock_ = std::move(*sock);
    for (int p = 1; p <= 8; p += 2) {
      const std::string a = NetnsOcs::PortName(p), b = NetnsOcs::PortName(p + 1);
      ASSERT_TRUE(emulation::CreateVeth(*sock_, a, ns_, b).ok());
      ASSERT_TRUE(emulation::SetLinkUp(*sock_, a).ok());
      ASSERT_TRUE(emulation::SetLinkUp(*sock_, b).ok());
    }
    auto ocs = NetnsOcs::Open(ns_);
    ASSERT_TRUE(ocs.ok()) << ocs.status();
    ocs_ = std::move(*ocs);
  }
  void TearDown() override {
    backend_.reset();  // their sockets keep the namespace alive
    ocs_.reset();
    sock_.reset();
    if (!ns_.empty()) {
      EXPECT_TRUE(netns::DeleteNamespace(ns_).ok());
    }
  }

  bool HasRedirect(const std::string& port) {
    auto r = ocs_->ListRedirects();
    EXPECT_TRUE(r.ok()) << r.status();
    for (const Redirect& x : r.value_or(std::vector<Redirect>{})) {
      if (x.from == port) return true;
    }
    return false;
  }

  std::string ns_;
  std::unique_ptr<netns::NlSocket> sock_;
  std::unique_ptr<NetnsOcs> ocs_;  // a second handle on the switch, for the test
  std::unique_ptr<OcsBackend> backend_;
};

TEST_F(NetnsBackendTest, FailedSecondBatchIsReportedPerCircuit) {
  ASSERT_TRUE(ocs_->Apply({{"p1", "p3"}, {"p5", "p7"}}).ok());
  auto b = OpenNetnsBackend({ns_, 8, absl::Milliseconds(1500)});
  ASSERT_TRUE(b.ok()) << b.status();
  backend_ = std::move(*b);
  EXPECT_THAT(backend_->Read().value(), ElementsAre(Circuit{1, 3}, Circuit{5, 7}));

  ChangeReport rep;
  auto change = std::async(std::launch::async, [&] {
    return backend_->Change({{1, 3}, {5, 7}}, {{1, 5}, {3, 7}}, rep);
  });
  // The first batch (the removals) is done when port 1 carries nothing; then
  // port 7 goes away (with its veth peer p8) while the ports are dark.
  const absl::Time deadline = absl::Now() + absl::Milliseconds(1000);
  while (HasRedirect("p1") && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_FALSE(HasRedirect("p1")) << "the removals were not sent";
  ASSERT_TRUE(emulation::DeleteLink(*sock_, "p7").ok());
  absl::Status s = change.get();

  EXPECT_FALSE(s.ok());
  ASSERT_EQ(rep.outcomes.size(), 4u);
  EXPECT_FALSE(rep.outcomes[0].add);
  EXPECT_TRUE(rep.outcomes[0].status.ok()) << "removal 1-3: " << rep.outcomes[0].status;
  EXPECT_TRUE(rep.outcomes[1].status.ok()) << "removal 5-7: " << rep.outcomes[1].status;
  EXPECT_TRUE(rep.outcomes[2].status.ok()) << "add 1-5: " << rep.outcomes[2].status;
  EXPECT_EQ(rep.outcomes[3].circuit, (Circuit{3, 7}));
  EXPECT_FALSE(rep.outcomes[3].status.ok());
  EXPECT_THAT(rep.outcomes[3].status.message(), HasSubstr("not held after the change"));
  EXPECT_THAT(rep.outcomes[3].status.message(), HasSubstr("p3"));
  EXPECT_EQ(s, rep.outcomes[3].status);
  ASSERT_TRUE(rep.after.has_value()) << rep.read_back;
  EXPECT_THAT(*rep.after, ElementsAre(Circuit{1, 5}));
  EXPECT_THAT(backend_->Read().value(), ElementsAre(Circuit{1, 5}));
}

}  // namespace
}  // namespace mixnet::ocs
