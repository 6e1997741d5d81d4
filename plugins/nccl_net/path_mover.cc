// PathMover (see path_mover.h). Threads: the "mx-nccl-mover" thread, the
// worker agent's event thread (Prepare/Commit/Abort) and NCCL's proxy
// threads (LanesFor, CountPosted, Advance under the comm's mutex).
#include "plugins/nccl_net/path_mover.h"

#include <pthread.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/nccl_net/result.h"
#include "runtime/common/status.h"

namespace mixnet::nccl {

absl::Duration MoveTimeout(absl::Duration connect_timeout) {
  return connect_timeout + absl::Seconds(5);
}

uint64_t StripeConnectionId(uint64_t move_id, size_t stripe) {
  // Move ids are random 64-bit values: the next few are as unlikely to be
  // taken as any other.
  return move_id + 1 + stripe;
}

absl::StatusOr<std::shared_ptr<ConnectionTask>> PathMover::StartStripeDial(
    transport::Device& device, transport::ConnectOptions co, const StripePath& stripe, size_t j,
    bool initiator) const {
  co.connection_id = StripeConnectionId(co.connection_id, j);
  co.initiator = initiator;
  co.peer_name =
      absl::StrCat(co.peer_name, " stripe ", j, " ", stripe.local_nic, " -> ", stripe.remote_nic);
  transport::Device* d = &device;
  // As the lane's own dial: the waiting side on the dialing pool, the
  // initiator on the answering one (helper_pool.h).
  return ConnectionTask::Start(initiator ? HelperPool::Answering() : HelperPool::Dialing(),
                               [d, co](const std::atomic<bool>&) { return d->Connect(co); });
}

namespace {

// Every connection of `lane` is up (its own and its stripes').
bool LaneHealthy(const Lane& lane) {
  if (lane.connection == nullptr || lane.peer_closed || !lane.connection->health().ok()) {
    return false;
  }
  for (const std::unique_ptr<transport::Connection>& s : lane.stripes) {
    if (s == nullptr || !s->health().ok()) return false;
  }
  return true;
}

absl::Status SuspendLane(Lane& lane, bool suspended) {
  absl::Status st = lane.connection->SetSuspended(suspended);
  for (const std::unique_ptr<transport::Connection>& s : lane.stripes) {
    if (s != nullptr && st.ok()) st = s->SetSuspended(suspended);
  }
  return st;
}

}  // namespace

void PathMover::Keep(Comm& c, std::shared_ptr<Lane> lane) {
  if (options_.kept_lanes <= 0 || lane == nullptr || lane == c.home || !LaneHealthy(*lane) ||
      lane->outstanding > 0) {
    return;  // dropped: it closes once its last request is tested
  }
  // One kept lane per set of connections: an older one goes.
  for (auto it = c.kept.begin(); it != c.kept.end();) {
    if ((*it)->path.SameConnections(lane->path)) {
      it = c.kept.erase(it);
      lanes_kept_.fetch_sub(1);
    } else {
      ++it;
    }
  }
  if (lanes_kept_.load() >= options_.kept_lanes) return;
  if (!SuspendLane(*lane, true).ok()) return;
  c.kept.push_back(std::move(lane));
  lanes_kept_.fetch_add(1);
}

std::shared_ptr<Lane> PathMover::TakeKept(Comm& c, uint64_t id, const LanePath* path) {
  for (auto it = c.kept.begin(); it != c.kept.end(); ++it) {
    if (id != 0 ? (*it)->connection_id != id : !(*it)->path.SameConnections(*path)) continue;
    std::shared_ptr<Lane> lane = std::move(*it);
    c.kept.erase(it);
    lanes_kept_.fetch_sub(1);
    if (!SuspendLane(*lane, false).ok()) return nullptr;
    return lane;
  }
  return nullptr;
}

std::string CommName(const Comm& c) {
  return absl::StrCat(c.is_send ? "send comm to " : "recv comm from ",
                      c.peer_host.empty() ? std::string("peer") : c.peer_host, " (",
                      c.lane != nullptr && c.lane->connection != nullptr
                          ? c.lane->connection->peer_name()
                          : std::string("?"),
                      ")");
}

bool LanesFor(Comm& comm, const uint32_t* tags, int n, std::shared_ptr<Lane>* lanes) {
  // Re-sends go first (lane_recovery.h), and a receiver of split parts
  // waits for the sender's RESENT (multipath.h).
  if (comm.recovering || comm.awaiting_resent) return false;
  if (comm.move == nullptr) {
    for (int i = 0; i < n; ++i) lanes[i] = comm.lane;
    return true;
  }
  const Move& m = *comm.move;
  if (!m.switch_known) return false;
  TagCounts extra;  // parts of this post numbered before part i, per tag
  for (int i = 0; i < n; ++i) {
    auto posted = comm.posted.find(tags[i]);
    const uint64_t seq = (posted == comm.posted.end() ? 0 : posted->second) + extra[tags[i]]++;
    auto limit = m.switch_at.find(tags[i]);
    if (limit != m.switch_at.end() && seq < limit->second) {
      lanes[i] = m.old;
    } else if (m.switched && (!m.onto_home || (comm.is_send ? m.done_received : m.done_sent))) {
      // Onto home, later parts wait until every part below the switch point
      // arrived (DONE): a failover of the old lane re-posts and re-sends
      // those on home, which must not carry a later part of their tag
      // before them.
      lanes[i] = comm.lane;
    } else {
      return false;
    }
  }
  return true;
}

void CountPosted(Comm& comm, const uint32_t* tags, int n, const std::shared_ptr<Lane>* lanes) {
  for (int i = 0; i < n; ++i) {
    ++comm.posted[tags[i]];
    ++lanes[i]->outstanding;
  }
}

absl::StatusOr<std::unique_ptr<PathMover>> PathMover::Create(Options options) {
  if (options.spec.FindHost(options.host) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("host '", options.host, "' is not in the cluster spec"));
  }
  auto m = std::unique_ptr<PathMover>(new PathMover(std::move(options)));
  RETURN_IF_ERROR(m->InstallRouting(m->options_.initial, false));
  if (m->options_.static_plan.has_value()) {
    RETURN_IF_ERROR(m->SetRouting(*m->options_.static_plan));
  }
  m->thread_ = std::thread([p = m.get()] { p->Run(); });
  return m;
}

PathMover::PathMover(Options options) : options_(std::move(options)) {}

PathMover::~PathMover() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

LanePath PathMover::InitialPath(const std::string& local_nic, const std::string& remote_nic) const {
  LanePath p;
  p.local_nic = local_nic;
  p.remote_nic = remote_nic;
  return p;
}

void PathMover::Add(Comm* comm) {
  absl::MutexLock lock(&comms_mu_);
  comms_.insert(comm);
}

void PathMover::Remove(Comm* comm) {
  absl::MutexLock lock(&comms_mu_);
  comms_.erase(comm);
  absl::MutexLock cl(&comm->mu);
  lanes_kept_.fetch_sub(static_cast<int64_t>(comm->kept.size()));
  comm->kept.clear();
}

void PathMover::Send(Comm& c, Lane& lane, const ControlMessage& m, bool ack) {
  ControlSend s;
  s.bytes = EncodeControl(m);
  s.ack = ack;
  absl::StatusOr<std::unique_ptr<transport::Request>> r =
      lane.connection == nullptr
          ? absl::UnavailableError("the lane was closed")
          : lane.connection->Isend(s.bytes.data(), s.bytes.size(), kControlTag);
  if (!r.ok()) {
    const std::string why =
        absl::StrCat(CommName(c), ": cannot send ", ControlTypeName(m.type), " on lane ",
                     lane.path.Describe(), ": ", r.status().ToString());
    if (&lane != c.home.get()) {
      // A guarded lane: fail over to home, once the caller is through with
      // the move state (Advance and Complete run it).
      if (c.failover_due.empty()) c.failover_due = why;
      return;
    }
    LogWarn(why);
    // The home lane carries the comm's last resort: without it the comm is
    // failed.
    c.lane_failed = true;
    return;
  }
  s.request = *std::move(r);
  lane.control_sends.push_back(std::move(s));
}

void PathMover::PollControl(Comm& c, Lane& lane) {
  if (lane.connection == nullptr) return;
  while (!lane.control_sends.empty() && lane.control_sends.front().request->Done()) {
    lane.control_sends.pop_front();
  }
  if (lane.control_recv == nullptr && !lane.peer_closed) {
    absl::StatusOr<std::unique_ptr<transport::Request>> r =
        lane.connection->Irecv(lane.control_buf.data(), lane.control_buf.size(), kControlTag);
    if (!r.ok()) {
      if (&lane == c.home.get()) {
        c.lane_failed = true;
      } else {
        GuardedLaneEnded(c, lane, r.status());
      }
      return;
    }
    lane.control_recv = *std::move(r);
  }
  while (lane.control_recv != nullptr && lane.control_recv->Done()) {
    absl::Status st = lane.control_recv->status();
    const size_t size = lane.control_recv->bytes();
    lane.control_recv.reset();
    if (!st.ok()) {
      if (&lane != c.home.get()) {
        GuardedLaneEnded(c, lane, st);
        return;
      }
      // The home lane ending is the peer closing its comm (teardown) when
      // idle, a failure otherwise (data requests fail too and NCCL sees why).
      const std::string what =
          absl::StrCat(CommName(c), ": lane ", lane.path.Describe(), " ended: ", st.ToString());
      if (c.live.empty() && c.move == nullptr) {
        LogInfo(what);
      } else {
        LogWarn(what);
      }
      c.lane_failed = true;
      return;
    }
    absl::StatusOr<ControlMessage> m = DecodeControl(lane.control_buf.data(), size);
    absl::StatusOr<std::unique_ptr<transport::Request>> again =
        lane.connection->Irecv(lane.control_buf.data(), lane.control_buf.size(), kControlTag);
    if (again.ok()) lane.control_recv = *std::move(again);
    if (!m.ok()) {
      LogWarn(absl::StrCat(CommName(c), ": ", m.status().ToString()));
      continue;
    }
    HandleControl(c, lane, *m);
    if (lane.connection == nullptr) return;  // a failover closed it
  }
}

void PathMover::StartMove(Comm& c, const LanePath& target) {
  auto m = std::make_unique<Move>();
  m->id = RandomId();
  m->target = target;
  m->epoch = installed_epoch_.load();
  m->old = c.lane;
  m->started = absl::Now();
  // Back onto the comm's own EPS connection: no new one (both ends keep it).
  m->onto_home = c.home != nullptr && c.home != c.lane && c.home->connection != nullptr &&
                 target.SameAs(c.home->path);
  for (const auto& [tag, n] : c.posted) m->posted_at_start += n;
  ControlMessage msg;
  msg.type = ControlType::kMove;
  msg.move_id = m->id;
  msg.target = target;
  msg.epoch = m->epoch;
  msg.counts = c.posted;
  msg.onto_home = m->onto_home;
  if (!m->onto_home) {
    // A lane a finished move left on this path, kept at both ends?
    for (const std::shared_ptr<Lane>& k : c.kept) {
      if (k->path.SameConnections(target) && LaneHealthy(*k)) {
        m->offered = k;
        msg.reuse_id = k->connection_id;
        break;
      }
    }
  }
  if (target.split_min_bytes > 0) c.split_seen = true;  // multipath.h
  c.move = std::move(m);
  Send(c, *c.lane, msg);
  moves_started_.fetch_add(1);
  LogInfo(absl::StrCat(CommName(c), ": moving from ", c.lane->path.Describe(), " to ",
                       target.Describe(), " (epoch ", msg.epoch, ")"));
}

void PathMover::HandleControl(Comm& c, Lane& on, const ControlMessage& m) {
  if (m.type == ControlType::kAck || m.type == ControlType::kLost ||
      m.type == ControlType::kRecover || m.type == ControlType::kResent) {
    HandleRecovery(c, m);
    return;
  }
  if (m.type == ControlType::kRelayOpen || m.type == ControlType::kRelayReady) {
    HandleRelayControl(c, on, m);
    return;
  }
  Move* move = c.move.get();
  const bool ours = move != nullptr && move->id == m.move_id;
  switch (m.type) {
    case ControlType::kMove: {
      ControlMessage reply;
      reply.move_id = m.move_id;
      if (c.is_send || move != nullptr) {
        reply.type = ControlType::kRefuse;
        reply.reason = c.is_send ? "MOVE sent to a send comm" : "a move is already in progress";
        Send(c, on, reply);
        return;
      }
      absl::StatusOr<transport::Device*> device = options_.device(m.target.remote_nic);
      if (!device.ok()) {
        reply.type = ControlType::kRefuse;
        reply.reason = absl::StrCat("host ", options_.host, " cannot use NIC ", m.target.remote_nic,
                                    ": ", device.status().ToString());
        Send(c, on, reply);
        return;
      }
      auto mv = std::make_unique<Move>();
      mv->id = m.move_id;
      mv->target.local_nic = m.target.remote_nic;
      mv->target.remote_nic = m.target.local_nic;
      mv->target.direct = m.target.direct;
      mv->target.circuit = m.target.circuit;
      mv->target.split_min_bytes = m.target.split_min_bytes;
      mv->target.gbps = m.target.gbps;
      for (const StripePath& sp : m.target.stripes) {
        StripePath mine = sp;  // seen from this end (a relay's hops as they are)
        std::swap(mine.local_nic, mine.remote_nic);
        mv->target.stripes.push_back(std::move(mine));
      }
      // Split headers come on home from the first split part on.
      if (m.target.split_min_bytes > 0) c.split_seen = true;
      mv->epoch = m.epoch;
      mv->old = c.lane;
      mv->started = absl::Now();
      for (const auto& [tag, n] : c.posted) mv->posted_at_start += n;
      mv->switch_at = SwitchPoint(m.counts, c.posted);
      mv->switch_known = true;
      if (m.onto_home && c.home != nullptr && c.home != c.lane && c.home->connection != nullptr &&
          c.home->connection->health().ok()) {
        // Onto the home lane both ends keep: nothing to dial; LANE_UP goes
        // out at the next Advance.
        mv->onto_home = true;
        mv->next = c.home;
        reply.type = ControlType::kReady;
        reply.onto_home = true;
        reply.counts = c.posted;
        c.move = std::move(mv);
        Send(c, on, reply);
        return;
      }
      if (m.reuse_id != 0) {
        // The sender offers a lane both ends kept: take ours if it is sound.
        std::shared_ptr<Lane> kept = TakeKept(c, m.reuse_id, nullptr);
        if (kept != nullptr && LaneHealthy(*kept)) {
          mv->reused = true;
          kept->path = mv->target;  // its connections, the new split rule
          mv->next = std::move(kept);
          reply.type = ControlType::kReady;
          reply.reuse_id = m.reuse_id;
          reply.counts = c.posted;
          c.move = std::move(mv);
          Send(c, on, reply);
          return;
        }
      }
      transport::ConnectOptions co;
      co.connection_id = m.move_id;
      co.initiator = false;
      co.traffic_class = c.traffic_class;
      co.peer_name = absl::StrCat(on.connection->peer_name(), " via ", mv->target.Describe());
      co.timeout = options_.connect_timeout;
      transport::Device* d = *device;
      absl::StatusOr<std::shared_ptr<ConnectionTask>> dial =
          // The waiting side: waits for the sender's dial (helper_pool.h).
          ConnectionTask::Start(HelperPool::Dialing(),
                                [d, co](const std::atomic<bool>&) { return d->Connect(co); });
      if (!dial.ok()) {
        reply.type = ControlType::kRefuse;
        reply.reason = dial.status().ToString();
        Send(c, on, reply);
        return;
      }
      mv->dial = *std::move(dial);
      // A striped target: one more connection per stripe, each awaited on
      // its own NIC (ids follow the move's: StripeConnectionId).
      for (size_t j = 0; j < mv->target.stripes.size(); ++j) {
        const StripePath& sp = mv->target.stripes[j];
        absl::StatusOr<transport::Device*> sd = options_.device(sp.local_nic);
        absl::StatusOr<std::shared_ptr<ConnectionTask>> wait =
            sd.ok() ? StartStripeDial(**sd, co, sp, j, false) : sd.status();
        if (!wait.ok()) {
          mv->dial->Cancel();
          for (const std::shared_ptr<ConnectionTask>& t : mv->stripe_dials) t->Cancel();
          reply.type = ControlType::kRefuse;
          reply.reason = absl::StrCat("host ", options_.host, " cannot wait on NIC ", sp.local_nic,
                                      " for stripe ", j, ": ", wait.status().ToString());
          Send(c, on, reply);
          return;
        }
        mv->stripe_dials.push_back(*std::move(wait));
        reply.stripe_addresses.push_back((*sd)->address());
      }
      reply.type = ControlType::kReady;
      reply.address = d->address();
      reply.counts = c.posted;
      c.move = std::move(mv);
      Send(c, on, reply);
      return;
    }
    case ControlType::kReady: {
      if (!ours || move->switch_known || !c.is_send) return;
      move->switch_at = SwitchPoint(c.posted, m.counts);
      move->switch_known = true;
      if (move->onto_home && m.onto_home && c.home != nullptr && c.home->connection != nullptr) {
        move->next = c.home;  // the receiver kept its end of home too
        return;
      }
      move->onto_home = false;  // the receiver waits for a dial instead
      if (move->offered != nullptr) {
        const uint64_t id = move->offered->connection_id;
        move->offered.reset();
        std::shared_ptr<Lane> kept = TakeKept(c, id, nullptr);
        if (m.reuse_id == id && kept != nullptr) {
          move->reused = true;
          kept->path = move->target;  // its connections, the new split rule
          move->next = std::move(kept);
          return;
        }
        // The receiver no longer has it: ours goes (closed with `kept`).
      }
      absl::StatusOr<transport::Device*> device = options_.device(move->target.local_nic);
      if (!device.ok()) {
        Abandon(c, device.status().ToString(), true);
        return;
      }
      transport::ConnectOptions co;
      co.remote_address = m.address;
      co.connection_id = move->id;
      co.initiator = true;
      co.traffic_class = c.traffic_class;
      co.peer_name = absl::StrCat(on.connection->peer_name(), " via ", move->target.Describe());
      co.timeout = options_.connect_timeout;
      transport::Device* d = *device;
      absl::StatusOr<std::shared_ptr<ConnectionTask>> dial =
          // The initiator: a dial that waits for nothing but the network.
          ConnectionTask::Start(HelperPool::Answering(),
                                [d, co](const std::atomic<bool>&) { return d->Connect(co); });
      if (!dial.ok()) {
        Abandon(c, dial.status().ToString(), true);
        return;
      }
      move->dial = *std::move(dial);
      if (m.stripe_addresses.size() != move->target.stripes.size()) {
        Abandon(c,
                absl::StrCat("READY named ", m.stripe_addresses.size(), " stripe address(es) for ",
                             move->target.stripes.size(), " stripe(s)"),
                true);
        return;
      }
      for (size_t j = 0; j < move->target.stripes.size(); ++j) {
        const StripePath& sp = move->target.stripes[j];
        if (sp.relay()) {
          // Through the relay host, which dials the receiver (path_mover_relay.cc).
          AskRelay(c, j, m.stripe_addresses[j]);
          move->stripe_dials.push_back(nullptr);
          continue;
        }
        absl::StatusOr<transport::Device*> sd = options_.device(sp.local_nic);
        transport::ConnectOptions so = co;
        so.remote_address = m.stripe_addresses[j];
        absl::StatusOr<std::shared_ptr<ConnectionTask>> stripe =
            sd.ok() ? StartStripeDial(**sd, so, sp, j, true) : sd.status();
        if (!stripe.ok()) {
          Abandon(c, stripe.status().ToString(), true);
          return;
        }
        move->stripe_dials.push_back(*std::move(stripe));
      }
      return;
    }
    case ControlType::kRefuse:
      if (ours) Abandon(c, absl::StrCat("the receiver refused: ", m.reason), false);
      return;
    case ControlType::kLaneUp:
      if (ours) {
        move->peer_up = true;
        MaybeSwitch(c);
      }
      return;
    case ControlType::kLaneFailed:
      if (ours) Abandon(c, absl::StrCat("the peer's end failed: ", m.reason), false);
      return;
    case ControlType::kDone:
      if (ours && c.is_send) {
        move->done_received = true;
        MaybeRetire(c);
      }
      return;
    default:
      return;
  }
}

void PathMover::Abandon(Comm& c, const std::string& why, bool tell_peer) {
  Move& m = *c.move;
  if (m.switched) return;  // never after switching: the peer may have switched too
  if (tell_peer && !m.local_up) {
    ControlMessage msg;
    msg.type = ControlType::kLaneFailed;
    msg.move_id = m.id;
    msg.reason = why;
    Send(c, *m.old, msg);
  }
  if (m.dial != nullptr) m.dial->Cancel();
  for (const std::shared_ptr<ConnectionTask>& d : m.stripe_dials) {
    if (d != nullptr) d->Cancel();
  }
  LogWarn(absl::StrCat(CommName(c), ": move to ", m.target.Describe(), " abandoned, staying on ",
                       c.lane->path.Describe(), ": ", why));
  c.move.reset();
  moves_abandoned_.fetch_add(1);
  // Back off before trying again (the routing may well ask at once): 50 ms,
  // doubling per failure in a row, at most ~13 s.
  c.retry_after = absl::Now() + absl::Milliseconds(50) * (1 << std::min(c.failed_moves, 8));
  ++c.failed_moves;
}

void PathMover::MaybeSwitch(Comm& c) {
  Move& m = *c.move;
  if (m.switched || !m.local_up || !m.peer_up) return;
  c.lane = std::move(m.next);
  m.switched = true;
  const bool kept = m.reused || m.onto_home;
  if (kept) lanes_reused_.fetch_add(1);
  LogInfo(absl::StrCat(
      CommName(c), ": switched to ", c.lane->path.Describe(),
      kept ? (m.onto_home ? " (home: no new connection)" : " (a kept lane: no new connection)")
           : ""));
}

void PathMover::MaybeRetire(Comm& c) {
  Move& m = *c.move;
  if (!m.switched) return;
  if (!c.is_send) {
    if (!m.done_sent) {
      if (m.old->outstanding > 0) return;
      for (const auto& [tag, limit] : m.switch_at) {
        auto it = c.posted.find(tag);
        if ((it == c.posted.end() ? 0 : it->second) < limit) return;
      }
      ControlMessage msg;
      msg.type = ControlType::kDone;
      msg.move_id = m.id;
      Send(c, *m.old, msg);
      m.done_sent = true;
    }
    // Close the old lane only once DONE left (closing with it queued would
    // cut it off).
    for (const ControlSend& s : m.old->control_sends) {
      if (!s.request->Done()) return;
    }
  } else if (!m.done_received || m.old->outstanding > 0) {
    return;
  }
  ++c.moves;
  c.failed_moves = 0;
  moves_done_.fetch_add(1);
  Keep(c, m.old);  // for a later move back (home stays the comm's anyway)
  uint64_t below = 0;
  for (const auto& [tag, limit] : m.switch_at) below += limit;
  LogInfo(absl::StrCat(CommName(c), ": move ", m.id, " done in ",
                       absl::FormatDuration(absl::Now() - m.started), ", left ",
                       m.old->path.Describe(), "; ", below - m.posted_at_start,
                       " parts were posted on it after the move began"));
  c.move.reset();
}

void PathMover::Advance(Comm& c) {
  if (c.lane_failed || c.lane == nullptr) return;
  std::shared_ptr<Lane> lane = c.lane;  // kept alive while its messages are handled
  PollControl(c, *lane);
  if (c.move != nullptr && c.move->old != nullptr && c.move->old != c.lane) {
    std::shared_ptr<Lane> old = c.move->old;
    PollControl(c, *old);
  }
  // The home lane carries ACKs and recoveries while the comm is elsewhere.
  if (c.home != nullptr && c.home != c.lane && (c.move == nullptr || c.move->old != c.home)) {
    std::shared_ptr<Lane> home = c.home;
    PollControl(c, *home);
  }
  PollSplitHeaders(c);  // a receiver's split headers (multipath.h)
  if (c.lane_failed) return;
  RunDueFailover(c);
  if (c.lane_failed) return;
  if (c.recovering) {
    if (absl::Now() - c.recovering_since > MoveTimeout(options_.connect_timeout)) {
      LogWarn(absl::StrCat(CommName(c), ": the receiver did not answer the failover (LOST ",
                           c.recoveries + 1, ") within ",
                           absl::FormatDuration(MoveTimeout(options_.connect_timeout))));
      c.lane_failed = true;
    }
    return;
  }
  if (c.awaiting_resent && absl::Now() - c.awaiting_since > MoveTimeout(options_.connect_timeout)) {
    LogWarn(absl::StrCat(CommName(c), ": the sender did not answer the failover (RECOVER ",
                         c.recoveries, ") with RESENT within ",
                         absl::FormatDuration(MoveTimeout(options_.connect_timeout))));
    c.lane_failed = true;
    return;
  }
  if (!c.is_send) MaybeSendAck(c);
  if (c.move == nullptr) {
    // Idle ticks cost nothing per comm: the route is looked up again only
    // after the routing changed, or after a move (done or abandoned).
    const uint64_t generation = routing_generation_.load();
    if (!c.is_send || c.routed_generation == generation || absl::Now() < c.retry_after) return;
    std::optional<LanePath> want = Desired(c);
    if (want.has_value() && !want->SameAs(c.lane->path)) {
      // A topology whose routing is being installed: decide once it is in.
      if (routing_pending_.load()) return;
      StartMove(c, *want);
    } else {
      c.routed_generation = generation;
    }
    return;
  }
  Move& m = *c.move;
  if (m.dial != nullptr) {
    std::optional<absl::StatusOr<std::unique_ptr<transport::Connection>>> r = m.dial->Poll();
    if (r.has_value()) {
      m.dial.reset();
      if (!r->ok()) {
        Abandon(c, r->status().ToString(), true);
        return;
      }
      m.next = std::make_shared<Lane>();
      m.next->path = m.target;
      m.next->connection_id = m.id;
      m.next->connection = **std::move(r);
    }
  }
  // A striped target's further connections (none for a plain one); relay
  // stripes once their relay host answered.
  if (!m.relay_waits.empty() && !AdvanceRelayDials(c)) return;
  m.stripes_made.resize(m.stripe_dials.size());
  for (size_t j = 0; j < m.stripe_dials.size(); ++j) {
    if (m.stripe_dials[j] == nullptr) continue;
    std::optional<absl::StatusOr<std::unique_ptr<transport::Connection>>> r =
        m.stripe_dials[j]->Poll();
    if (!r.has_value()) continue;
    m.stripe_dials[j].reset();
    if (!r->ok()) {
      Abandon(c,
              absl::StrCat("stripe ", j, " over ", m.target.stripes[j].local_nic, ": ",
                           r->status().ToString()),
              true);
      return;
    }
    m.stripes_made[j] = **std::move(r);
  }
  const bool stripes_up =
      std::all_of(m.stripes_made.begin(), m.stripes_made.end(),
                  [](const std::unique_ptr<transport::Connection>& s) { return s != nullptr; });
  if (!m.local_up && m.next != nullptr && stripes_up) {
    // A kept lane or home brings its own stripes (if any).
    if (!m.reused && !m.onto_home) m.next->stripes = std::move(m.stripes_made);
    m.stripes_made.clear();
    m.stripe_dials.clear();
    m.local_up = true;
    ControlMessage up;
    up.type = ControlType::kLaneUp;
    up.move_id = m.id;
    Send(c, *m.old, up);
    PollControl(c, *m.next);  // posts its control receive
  }
  if (c.move == nullptr) return;
  if (!c.move->local_up && !c.move->switched &&
      (Vanishing(c.move->target) ||
       absl::Now() - c.move->started > MoveTimeout(options_.connect_timeout))) {
    Abandon(c, Vanishing(c.move->target) ? "its circuit is leaving the topology" : "timed out",
            true);
    return;
  }
  MaybeSwitch(c);
  if (c.move != nullptr) MaybeRetire(c);
}

PathMover::Stats PathMover::stats() const {
  Stats s;
  s.moves_started = moves_started_.load();
  s.moves_done = moves_done_.load();
  s.moves_abandoned = moves_abandoned_.load();
  s.failovers = failovers_.load();
  s.parts_resent = parts_resent_.load();
  s.installed_epoch = installed_epoch_.load();
  s.lanes_reused = lanes_reused_.load();
  s.lanes_kept = lanes_kept_.load();
  absl::MutexLock lock(&relays_mu_);
  if (relay_service_ != nullptr) s.relays = relay_service_->counts();
  return s;
}

void PathMover::Run() {
  pthread_setname_np(pthread_self(), "mx-nccl-mover");
  while (!stop_.load()) {
    bool busy = false;
    {
      absl::MutexLock lock(&comms_mu_);
      absl::flat_hash_set<std::string> reachable;  // hosts a relay can be asked on
      for (Comm* c : comms_) {
        absl::MutexLock cl(&c->mu);
        Advance(*c);
        busy |= c->move != nullptr || c->ack_due || c->recovering || c->awaiting_resent;
        if (c->is_send && !c->lane_failed && c->home != nullptr && !c->recovering) {
          reachable.insert(c->peer_host);
        }
      }
      busy |= RunRelays(reachable);
    }
    Report();
    absl::SleepFor(busy ? options_.tick : options_.tick * 10);
  }
}

}  // namespace mixnet::nccl
