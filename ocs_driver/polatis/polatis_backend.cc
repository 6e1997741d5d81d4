// PolatisBackend: OcsBackend over Polatis SCPI (see polatis_backend.h for the
// port mapping and the Change sequence). Runs on the service's calling thread.
#include "ocs_driver/polatis/polatis_backend.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ocs_driver/polatis/line_client.h"
#include "ocs_driver/polatis/scpi_format.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {

namespace {

using polatis::CircuitText;

class PolatisBackend : public OcsBackend {
 public:
  explicit PolatisBackend(const PolatisOptions& o)
      : options_(o),
        client_(LineClientOptions{.host = o.host,
                                  .port = o.port,
                                  .connect_timeout = o.reply_timeout,
                                  .command_pacing = o.command_pacing,
                                  .pace_only_after_unanswered = true,
                                  .reply_timeout = o.reply_timeout}) {}

  absl::StatusOr<BackendInfo> Info() override {
    client_.AllowReconnect();
    ASSIGN_OR_RETURN(std::string idn_reply, Query("*IDN?"));
    auto idn = scpi::ParseIdentity(idn_reply);
    if (!idn.ok()) return Garbage("*IDN?", idn.status());
    RETURN_IF_ERROR(EnsureSize());  // read by OpenPolatisBackend; not again
    BackendInfo info;
    info.backend = "polatis";
    info.vendor = absl::StrContains(absl::AsciiStrToLower(idn->manufacturer), "polatis")
                      ? std::string("HUBER+SUHNER Polatis")
                      : idn->manufacturer;
    info.model = idn->model;
    info.serial = idn->serial;
    info.firmware = idn->firmware;
    info.ports = ports_;
    info.switching_time = polatis::kSwitchingTime;
    return info;
  }

  absl::StatusOr<std::vector<Circuit>> Read() override {
    client_.AllowReconnect();
    const bool reused = client_.connected();
    auto read = ReadConnections();
    if (!read.ok() && absl::IsUnavailable(read.status()) && reused && !client_.connected()) {
      // A connection that died while idle (the switch closed it, the close
      // not yet seen): once more on a new one.
      log::Warn("polatis {}: {}; reading again on a new connection", client_.peer(),
                read.status().ToString());
      client_.AllowReconnect();
      read = ReadConnections();
    }
    ASSIGN_OR_RETURN(auto connections, std::move(read));
    std::vector<std::string> leftovers;
    std::vector<Circuit> circuits = polatis::CircuitsOf(connections, ingress_, ports_, &leftovers);
    for (const auto& l : leftovers) {
      log::Warn("polatis {}: {} (not a circuit; left alone unless a change needs its ports)",
                client_.peer(), l);
    }
    return circuits;
  }

  absl::Status Change(const std::vector<Circuit>& remove, const std::vector<Circuit>& add,
                      ChangeReport& report) override;

  absl::Status ReadSize() {
    ASSIGN_OR_RETURN(std::string reply, Query(":oxc:swit:size?"));
    auto size = scpi::ParseSize(reply);
    if (!size.ok()) return Garbage(":oxc:swit:size?", size.status());
    if (size->first != size->second) {
      log::Warn("polatis {}: {}x{} switch is not square; using {} duplex ports", client_.peer(),
                size->first, size->second, std::min(size->first, size->second));
    }
    ingress_ = size->first;
    ports_ = std::min(size->first, size->second);
    return absl::OkStatus();
  }

 private:
  // The result of one add/sub phase.
  struct Phase {
    absl::Status transport;                // I/O, timeout or garbage; OK otherwise
    std::vector<scpi::ErrorEntry> errors;  // device errors reported by :syst:err?
  };

  absl::StatusOr<std::string> Query(absl::string_view command,
                                    absl::Duration timeout = absl::ZeroDuration()) {
    return client_.Query(command, timeout);
  }

  // A reply that does not parse: the stream cannot be trusted any more.
  absl::Status Garbage(absl::string_view command, const absl::Status& parse) {
    client_.Close();
    return absl::InternalError(absl::StrCat("polatis ", client_.peer(), ": unexpected reply to '",
                                            command, "': ", parse.message(),
                                            " (connection closed; next call reconnects)"));
  }

  absl::Status EnsureSize() {
    if (ports_ > 0) return absl::OkStatus();
    return ReadSize();
  }

  absl::StatusOr<std::vector<polatis::OneWay>> ReadConnections() {
    RETURN_IF_ERROR(EnsureSize());
    ASSIGN_OR_RETURN(std::string reply, Query(":oxc:swit:conn:stat?"));
    auto conns = scpi::ParseConnectionLists(reply);
    if (!conns.ok()) return Garbage(":oxc:swit:conn:stat?", conns.status());
    std::vector<polatis::OneWay> out;
    out.reserve(conns->size());
    for (const auto& c : *conns) out.emplace_back(c.ingress, c.egress);
    seen_ = Seen{out, client_.generation(), client_.commands_sent(), absl::Now()};
    return out;
  }

  // The map of the Read just before (the service reads, then changes): when
  // no command was sent since, on the same connection, less than a second
  // ago, a change uses it to find one-way leftovers instead of asking again.
  std::optional<std::vector<polatis::OneWay>> FreshMap() const {
    if (!seen_.has_value() || !client_.connected() || seen_->generation != client_.generation() ||
        seen_->commands != client_.commands_sent() || absl::Now() - seen_->at > absl::Seconds(1)) {
      return std::nullopt;
    }
    return seen_->map;
  }

  // The read-back after a change. When the change went through on this
  // connection (the last *OPC? answered), one :conn:stat?. Otherwise (the
  // connection was lost, a reply timed out or was garbage, or that read
  // failed) once more, reconnecting when needed: *OPC? first, so the map is
  // read only after the switch says the change is complete.
  absl::StatusOr<std::vector<polatis::OneWay>> ReadBack(bool change_went_through) {
    absl::Status first;
    if (change_went_through) {
      auto m = ReadConnections();
      if (m.ok()) return m;
      first = m.status();
      log::Warn("polatis {}: read-back failed ({}); trying once more", client_.peer(),
                first.ToString());
    }
    client_.AllowReconnect();
    auto opc = Query("*OPC?", options_.completion_timeout);
    absl::Status done = opc.status();
    if (opc.ok()) {
      std::string text(absl::StripAsciiWhitespace(*opc));
      if (text != "1" && text != "+1") {
        done = Garbage("*OPC?", absl::InvalidArgumentError(absl::StrCat("'", *opc, "'")));
      }
    }
    if (!done.ok()) {
      return Annotate(done,
                      "the switch did not report the change complete, so its state was "
                      "not read back");
    }
    return ReadConnections();
  }

  // Pops the error queue until it reports code 0.
  absl::StatusOr<std::vector<scpi::ErrorEntry>> DrainErrors() {
    std::vector<scpi::ErrorEntry> errors;
    for (int i = 0; i < 256; ++i) {
      ASSIGN_OR_RETURN(std::string reply, Query(":syst:err?"));
      auto e = scpi::ParseErrorEntry(reply);
      if (!e.ok()) return Garbage(":syst:err?", e.status());
      if (e->code == 0) return errors;
      errors.push_back(*std::move(e));
    }
    log::Warn("polatis {}: error queue still not empty after 256 entries", client_.peer());
    return errors;
  }

  // Sends `verb` (add/sub) for `connections` in batches, waits for *OPC? and
  // drains the error queue.
  Phase RunPhase(absl::string_view verb, const std::vector<scpi::Connection>& connections) {
    Phase phase;
    for (size_t i = 0; i < connections.size(); i += polatis::kMaxConnectionsPerCommand) {
      size_t end = std::min(connections.size(), i + polatis::kMaxConnectionsPerCommand);
      std::vector<scpi::Connection> batch(connections.begin() + i, connections.begin() + end);
      std::string command =
          absl::StrCat(":oxc:swit:conn:", verb, " ", scpi::FormatConnectionLists(batch));
      phase.transport = client_.Send(command);
      if (!phase.transport.ok()) return phase;
    }
    auto opc = Query("*OPC?", options_.completion_timeout);
    if (!opc.ok()) {
      phase.transport = opc.status();
      return phase;
    }
    std::string opc_text(absl::StripAsciiWhitespace(*opc));
    if (opc_text != "1" && opc_text != "+1") {
      phase.transport = Garbage("*OPC?", absl::InvalidArgumentError(absl::StrCat("'", *opc, "'")));
      return phase;
    }
    auto errors = DrainErrors();
    if (!errors.ok()) {
      phase.transport = errors.status();
      return phase;
    }
    phase.errors = *std::move(errors);
    for (const auto& e : phase.errors) {
      log::Warn("polatis {}: {} reported error {},\"{}\"", client_.peer(), std::string(verb),
                e.code, e.message);
    }
    return phase;
  }

  // Device errors of `phase` that name a port of `c` (ingress or egress).
  std::vector<std::string> ErrorsNaming(const Phase& phase, const Circuit& c) const {
    std::set<int> mine = {c.a, c.b, ingress_ + c.a, ingress_ + c.b};
    std::vector<std::string> out;
    for (const auto& e : phase.errors) {
      for (int p : scpi::PortsNamedIn(e.message)) {
        if (mine.count(p)) {
          out.push_back(absl::StrCat(e.code, ",\"", e.message, "\""));
          break;
        }
      }
    }
    return out;
  }

  std::vector<std::string> AllErrors(const Phase& phase) const {
    std::vector<std::string> out;
    for (const auto& e : phase.errors) out.push_back(absl::StrCat(e.code, ",\"", e.message, "\""));
    return out;
  }

  struct Seen {
    std::vector<polatis::OneWay> map;
    int generation = 0;
    uint64_t commands = 0;
    absl::Time at;
  };

  PolatisOptions options_;
  LineClient client_;
  int ingress_ = 0;           // ingress port count; egress ports are ingress_+1..
  int ports_ = 0;             // duplex ports
  std::optional<Seen> seen_;  // the last map read
};

absl::Status PolatisBackend::Change(const std::vector<Circuit>& remove,
                                    const std::vector<Circuit>& add, ChangeReport& report) {
  report = ChangeReport{};
  std::vector<CircuitOutcome>& outcomes = report.outcomes;
  for (const auto& c : remove) outcomes.push_back({c, false, absl::OkStatus()});
  for (const auto& c : add) outcomes.push_back({c, true, absl::OkStatus()});
  auto fail_all = [&](const absl::Status& s) {
    for (auto& o : outcomes) o.status = s;
    return s;
  };
  if (outcomes.empty()) return absl::OkStatus();
  std::optional<std::vector<polatis::OneWay>> map = FreshMap();
  client_.AllowReconnect();
  if (absl::Status s = EnsureSize(); !s.ok()) {
    report.read_back = s;
    return fail_all(s);
  }
  std::set<int> touched;
  for (const auto& o : outcomes) {
    if (o.circuit.a < 1 || o.circuit.b > ports_ || o.circuit.a >= o.circuit.b) {
      report.read_back = absl::InvalidArgumentError("not read: the change was refused");
      return fail_all(absl::InvalidArgumentError(
          absl::StrCat("polatis ", client_.peer(), ": circuit ", CircuitText(o.circuit),
                       " is not a pair of different ports in 1..", ports_, "; nothing changed")));
    }
    touched.insert({o.circuit.a, o.circuit.b});
  }

  // Errors left over from before this change must not be blamed on it.
  absl::Status transport;  // the first I/O error, timeout or garbage reply
  {
    auto stale = DrainErrors();
    if (stale.ok()) {
      for (const auto& e : *stale) {
        log::Warn("polatis {}: stale error before change: {},\"{}\"", client_.peer(), e.code,
                  e.message);
      }
    } else {
      transport = stale.status();
    }
  }
  // One-way leftovers on the ports of this change (half a circuit left by an
  // earlier partial failure, a loop, a connection made by hand) would make
  // the additions fail forever ("port already connected"): they go with the
  // removals.
  if (transport.ok() && !map.has_value()) {
    auto m = ReadConnections();
    if (m.ok()) {
      map = *std::move(m);
    } else {
      transport = m.status();
    }
  }
  std::vector<polatis::OneWay> leftovers;
  if (map.has_value()) {
    leftovers = polatis::LeftoversToClear(*map, ingress_, ports_, touched, remove);
  }

  std::vector<scpi::Connection> sub_conns;
  for (const auto& [i, e] : leftovers) {
    sub_conns.push_back({i, e});
    log::Warn("polatis {}: clearing {} on a port of this change", client_.peer(),
              polatis::OneWayText({i, e}, ingress_));
  }
  for (const auto& c : remove) {
    for (const auto& [i, e] : polatis::ConnectionsOf(c, ingress_)) sub_conns.push_back({i, e});
  }
  std::vector<scpi::Connection> add_conns;
  for (const auto& c : add) {
    for (const auto& [i, e] : polatis::ConnectionsOf(c, ingress_)) add_conns.push_back({i, e});
  }

  Phase sub;
  Phase addp;
  bool add_attempted = false;
  absl::Status not_attempted;
  if (transport.ok() && !sub_conns.empty()) {
    sub = RunPhase("sub", sub_conns);
    transport = sub.transport;
  }
  if (!transport.ok()) {
    not_attempted =
        absl::Status(transport.code(), absl::StrCat("not attempted: ", transport.message()));
  } else if (!sub.errors.empty() && !add_conns.empty()) {
    not_attempted = absl::AbortedError(absl::StrCat(
        "polatis ", client_.peer(), ": not attempted because the removals reported device errors: ",
        absl::StrJoin(AllErrors(sub), "; ")));
  } else if (!add_conns.empty()) {
    add_attempted = true;
    addp = RunPhase("add", add_conns);
    transport = addp.transport;
  }

  // Read back once the switch says the change is complete: what it holds
  // decides each circuit.
  auto held = ReadBack(transport.ok());
  if (!held.ok()) {
    report.read_back = held.status();
    for (auto& o : outcomes) {
      if (o.add && !add_attempted) {
        o.status =
            Annotate(not_attempted.ok() ? absl::AbortedError("not attempted") : not_attempted,
                     absl::StrCat("add circuit ", CircuitText(o.circuit)));
        continue;
      }
      const absl::Status& why = transport.ok() ? held.status() : transport;
      o.status = Annotate(why, absl::StrCat("circuit ", CircuitText(o.circuit),
                                            " could not be verified (state unknown)"));
    }
    return transport.ok() ? held.status() : transport;
  }
  std::set<polatis::OneWay> have(held->begin(), held->end());
  std::vector<std::string> ignored;
  report.after = polatis::CircuitsOf(*held, ingress_, ports_, &ignored);
  // Cleared: gone now, or removed by a sub the switch took without an error
  // (a still-broken port may have made the same half again since).
  const bool sub_clean = !sub_conns.empty() && sub.transport.ok() && sub.errors.empty();
  for (const auto& l : leftovers) {
    if (sub_clean || !have.count(l)) report.cleared.push_back(polatis::OneWayText(l, ingress_));
  }
  absl::Status first_failure = polatis::VerifyOutcomes(
      have, ingress_, outcomes, [&](const CircuitOutcome& o, const std::string& state) {
        const Phase& phase = o.add ? addp : sub;
        const char* what = o.add ? "add" : "remove";
        if (o.add && !add_attempted) {
          return Annotate(not_attempted.ok() ? absl::AbortedError("not attempted") : not_attempted,
                          absl::StrCat("add circuit ", CircuitText(o.circuit)));
        }
        if (std::vector<std::string> named = ErrorsNaming(phase, o.circuit); !named.empty()) {
          return absl::InternalError(absl::StrCat(
              "polatis ", client_.peer(), ": ", what, " circuit ", CircuitText(o.circuit),
              " failed: switch reported ", absl::StrJoin(named, "; "), "; ", state));
        }
        if (!phase.transport.ok()) {
          return Annotate(phase.transport,
                          absl::StrCat(what, " circuit ", CircuitText(o.circuit), ": ", state));
        }
        if (!transport.ok()) {
          return Annotate(transport,
                          absl::StrCat(what, " circuit ", CircuitText(o.circuit), ": ", state));
        }
        std::vector<std::string> all = AllErrors(phase);
        return absl::InternalError(absl::StrCat(
            "polatis ", client_.peer(), ": ", what, " circuit ", CircuitText(o.circuit),
            " failed: ", state,
            all.empty() ? std::string("; the switch reported no error")
                        : absl::StrCat("; the switch reported ", absl::StrJoin(all, "; "))));
      });
  if (first_failure.ok()) {
    if (!transport.ok()) {
      log::Warn("polatis {}: {}; but the read-back shows every circuit done", client_.peer(),
                transport.ToString());
    }
    for (const auto& e : AllErrors(sub)) {
      log::Warn("polatis {}: removal error {} but every circuit verified", client_.peer(), e);
    }
    for (const auto& e : AllErrors(addp)) {
      log::Warn("polatis {}: add error {} but every circuit verified", client_.peer(), e);
    }
  }
  return first_failure;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OcsBackend>> OpenPolatisBackend(const PolatisOptions& options) {
  if (options.host.empty()) return absl::InvalidArgumentError("polatis: empty host");
  if (options.port < 1 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("polatis: bad TCP port ", options.port));
  }
  if (options.command_pacing < absl::ZeroDuration() ||
      options.reply_timeout <= absl::ZeroDuration() ||
      options.completion_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("polatis: pacing must be >= 0 and the timeouts > 0");
  }
  auto backend = std::make_unique<PolatisBackend>(options);
  RETURN_IF_ERROR(backend->ReadSize());
  return std::unique_ptr<OcsBackend>(std::move(backend));
}

}  // namespace mixnet::ocs
