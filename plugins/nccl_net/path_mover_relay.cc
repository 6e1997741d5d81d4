// PathMover's relay stripes (see path_mover.h and relay_forwarder.h): router
// v2's two-hop paths for the NCCL plugin. The origin A of a comm to C moves
// it onto a lane whose relay stripes each run A -> B -> C:
//  1. MOVE names the relay stripes; C waits for each on its NIC (as for any
//     stripe) and READY carries its address there.
//  2. A asks B with RELAY_OPEN on the home lane of a send comm of its own
//     to B (any NCCL comm: the relay is the host's, not the comm's), sent
//     by the mover thread, which holds no comm's mutex then.
//  3. B starts waiting for A's dial on its relay_in_nic and dials C from its
//     relay_out_nic with the stripe's connection id, and answers RELAY_READY
//     with its address (or a reason). A dials B. Once both of B's
//     connections are up, B's relay service forwards.
//  4. The lane switches as any striped lane does, once every connection of
//     it is up at both ends (LANE_UP); a relay that cannot be made fails the
//     move (C's wait times out, or B refuses), and the comm stays.
// Exactly once: C counts a part arrived only with every stripe piece in, so
// a relay hop that dies fails the comm over like a cut circuit
// (lane_recovery.h).
// Threads: the mover thread (RunRelays) and whoever advances a comm
// (comm.mu held); relays_mu_ is taken last.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugins/nccl_net/path_mover.h"
#include "plugins/nccl_net/result.h"

namespace mixnet::nccl {

std::vector<router::Path> PathMover::UsableRelays(const std::string& peer) const {
  std::vector<router::Path> paths;
  {
    absl::MutexLock lock(&routing_mu_);
    auto it = relay_split_.find(peer);
    if (it == relay_split_.end()) return {};
    paths = it->second.paths;
  }
  // All or nothing: a split whose relay cannot be made is not the plan's.
  absl::MutexLock lock(&relays_mu_);
  for (const router::Path& p : paths) {
    if (!relay_reachable_.contains(p.relay_host)) return {};
  }
  return paths;
}

void PathMover::AskRelay(Comm& c, size_t j, const std::string& peer_address) {
  Move& m = *c.move;
  const StripePath& sp = m.target.stripes[j];
  if (m.relay_waits.size() < m.target.stripes.size()) m.relay_waits.resize(m.target.stripes.size());
  ControlMessage open;
  open.type = ControlType::kRelayOpen;
  open.move_id = RandomId();
  open.address = peer_address;
  open.relay_in_nic = sp.relay_in_nic;
  open.relay_out_nic = sp.relay_out_nic;
  open.downstream_id = StripeConnectionId(m.id, j);
  open.name =
      absl::StrCat(options_.host, " ", sp.local_nic, " -> ", c.peer_host, " ", sp.remote_nic);
  m.relay_waits[j] = open.move_id;
  absl::MutexLock lock(&relays_mu_);
  relay_outbox_.push_back(RelayOpen{sp.relay_host, std::move(open)});
}

bool PathMover::AdvanceRelayDials(Comm& c) {
  Move& m = *c.move;
  for (size_t j = 0; j < m.relay_waits.size(); ++j) {
    const uint64_t id = m.relay_waits[j];
    if (id == 0) continue;
    RelayAnswer answer;
    {
      absl::MutexLock lock(&relays_mu_);
      auto it = relay_answers_.find(id);
      if (it == relay_answers_.end()) continue;
      answer = std::move(it->second);
      relay_answers_.erase(it);
    }
    m.relay_waits[j] = 0;
    const StripePath& sp = m.target.stripes[j];
    if (!answer.reason.empty()) {
      Abandon(c, absl::StrCat("relay stripe ", j, " through ", sp.relay_host, ": ", answer.reason),
              true);
      return false;
    }
    absl::StatusOr<transport::Device*> device = options_.device(sp.local_nic);
    if (!device.ok()) {
      Abandon(c, device.status().ToString(), true);
      return false;
    }
    transport::ConnectOptions co;
    co.remote_address = answer.address;
    co.connection_id = id;
    co.initiator = true;
    co.traffic_class = c.traffic_class;
    co.timeout = options_.connect_timeout;
    co.peer_name = absl::StrCat("relay ", sp.relay_host, " ", sp.relay_in_nic, " for ", c.peer_host,
                                " (stripe ", j, ")");
    transport::Device* d = *device;
    // The initiator: a dial that waits for nothing but the network.
    absl::StatusOr<std::shared_ptr<ConnectionTask>> dial = ConnectionTask::Start(
        HelperPool::Answering(), [d, co](const std::atomic<bool>&) { return d->Connect(co); });
    if (!dial.ok()) {
      Abandon(c, dial.status().ToString(), true);
      return false;
    }
    m.stripe_dials[j] = *std::move(dial);
  }
  return true;
}

void PathMover::HandleRelayControl(Comm& c, Lane& on, const ControlMessage& m) {
  if (m.type == ControlType::kRelayReady) {
    absl::MutexLock lock(&relays_mu_);
    relay_answers_[m.move_id] = RelayAnswer{m.address, m.reason, absl::Now()};
    return;
  }
  if (m.type != ControlType::kRelayOpen) return;
  ControlMessage reply;
  reply.type = ControlType::kRelayReady;
  reply.move_id = m.move_id;
  absl::StatusOr<transport::Device*> in = options_.device(m.relay_in_nic);
  absl::StatusOr<transport::Device*> out = options_.device(m.relay_out_nic);
  if (!in.ok() || !out.ok()) {
    reply.reason = absl::StrCat("host ", options_.host, " cannot relay ", m.name, " through ",
                                m.relay_in_nic, " and ", m.relay_out_nic, ": ",
                                (!in.ok() ? in.status() : out.status()).ToString());
    Send(c, on, reply);
    return;
  }
  transport::ConnectOptions up;
  up.connection_id = m.move_id;
  up.initiator = false;
  up.traffic_class = c.traffic_class;
  up.timeout = options_.connect_timeout;
  up.peer_name = absl::StrCat("relay origin of ", m.name);
  transport::ConnectOptions down;
  down.remote_address = m.address;
  down.connection_id = m.downstream_id;
  down.initiator = true;
  down.traffic_class = c.traffic_class;
  down.timeout = options_.connect_timeout;
  down.peer_name = absl::StrCat("relay peer of ", m.name);
  transport::Device* din = *in;
  transport::Device* dout = *out;
  // The upstream end waits for the origin's dial (the dialing pool); the
  // downstream one dials the peer, who already waits (helper_pool.h).
  absl::StatusOr<std::shared_ptr<ConnectionTask>> up_task = ConnectionTask::Start(
      HelperPool::Dialing(), [din, up](const std::atomic<bool>&) { return din->Connect(up); });
  absl::StatusOr<std::shared_ptr<ConnectionTask>> down_task =
      ConnectionTask::Start(HelperPool::Answering(),
                            [dout, down](const std::atomic<bool>&) { return dout->Connect(down); });
  if (!up_task.ok() || !down_task.ok()) {
    if (up_task.ok()) (*up_task)->Cancel();
    if (down_task.ok()) (*down_task)->Cancel();
    reply.reason = (!up_task.ok() ? up_task.status() : down_task.status()).ToString();
    Send(c, on, reply);
    return;
  }
  {
    absl::MutexLock lock(&relays_mu_);
    pending_relays_.push_back(PendingRelay{absl::StrCat("relay ", m.name, " via ", options_.host),
                                           *std::move(up_task), *std::move(down_task), nullptr,
                                           nullptr});
  }
  reply.address = din->address();
  Send(c, on, reply);
}

bool PathMover::RunRelays(const absl::flat_hash_set<std::string>& reachable) {
  std::vector<RelayOpen> outbox;
  bool changed = false;
  {
    absl::MutexLock lock(&relays_mu_);
    outbox.swap(relay_outbox_);
    if (reachable != relay_reachable_) {
      relay_reachable_ = reachable;
      changed = true;
    }
  }
  if (changed) routing_generation_.fetch_add(1);  // Desired may differ now
  for (RelayOpen& o : outbox) {
    bool sent = false;
    for (Comm* c : comms_) {
      absl::MutexLock cl(&c->mu);
      if (!c->is_send || c->peer_host != o.relay_host || c->lane_failed || c->home == nullptr ||
          c->recovering) {
        continue;
      }
      Send(*c, *c->home, o.message);
      sent = !c->lane_failed;
      if (sent) break;
    }
    if (!sent) {
      absl::MutexLock lock(&relays_mu_);
      relay_answers_[o.message.move_id] = RelayAnswer{
          "", absl::StrCat("no comm of host ", options_.host, " reaches ", o.relay_host),
          absl::Now()};
    }
  }
  // Relays being made (this host relays for others).
  absl::MutexLock lock(&relays_mu_);
  // Answers whose move ended first (abandoned, timed out) are not taken.
  const absl::Time stale = absl::Now() - 2 * MoveTimeout(options_.connect_timeout);
  absl::erase_if(relay_answers_, [&](const auto& e) { return e.second.at < stale; });
  for (auto it = pending_relays_.begin(); it != pending_relays_.end();) {
    PendingRelay& p = *it;
    absl::Status failed;
    for (auto [task, made] : {std::pair{&p.up, &p.up_made}, std::pair{&p.down, &p.down_made}}) {
      if (*task == nullptr) continue;
      std::optional<absl::StatusOr<std::unique_ptr<transport::Connection>>> r = (*task)->Poll();
      if (!r.has_value()) continue;
      task->reset();
      if (r->ok()) {
        *made = **std::move(r);
      } else if (failed.ok()) {
        failed = r->status();
      }
    }
    if (!failed.ok()) {
      if (p.up != nullptr) p.up->Cancel();
      if (p.down != nullptr) p.down->Cancel();
      LogWarn(absl::StrCat(p.name, ": not made: ", failed.ToString()));
      it = pending_relays_.erase(it);
      continue;
    }
    if (p.up_made == nullptr || p.down_made == nullptr) {
      ++it;
      continue;
    }
    if (relay_service_ == nullptr) {
      relay_service_ = std::make_unique<RelayService>([](const RelayForwarder& f) {
        const std::string what = absl::StrCat(f.name(), ": ", f.stats().pieces, " piece(s), ",
                                              f.stats().bytes, " bytes forwarded");
        if (f.state() == RelayForwarder::State::kFailed) {
          LogWarn(absl::StrCat(what, "; failed: ", f.status().ToString()));
        } else {
          LogInfo(absl::StrCat(what, "; closed"));
        }
      });
    }
    RelayForwarderOptions fo;
    fo.name = p.name;
    fo.max_buffered_bytes = options_.relay_buffer_bytes;
    LogInfo(absl::StrCat(p.name, ": forwarding"));
    relay_service_->Add(std::make_unique<RelayForwarder>(std::move(p.up_made),
                                                         std::move(p.down_made), std::move(fo)));
    it = pending_relays_.erase(it);
  }
  return !pending_relays_.empty();
}

}  // namespace mixnet::nccl
