// PolatisBackend: OcsBackend over Polatis SCPI (see polatis_backend.h for the
// port mapping and the Change sequence). Runs on the service's calling thread.
#include "ocs_driver/polatis/polatis_backend.h"

#include <algorithm>
#include <map>
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
                                  .reply_timeout = o.reply_timeout}) {}

  absl::StatusOr<BackendInfo> Info() override {
    client_.AllowReconnect();
    ASSIGN_OR_RETURN(std::string idn_reply, Query("*IDN?"));
    auto idn = scpi::ParseIdentity(idn_reply);
    if (!idn.ok()) return Garbage("*IDN?", idn.status());
    RETURN_IF_ERROR(ReadSize());
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
    ASSIGN_OR_RETURN(auto connections, ReadConnections());
    std::vector<std::string> leftovers;
    std::vector<Circuit> circuits = polatis::CircuitsOf(connections, ingress_, ports_, &leftovers);
    for (const auto& l : leftovers) {
      log::Warn("polatis {}: {} (not a circuit; left alone)", client_.peer(), l);
    }
    return circuits;
  }

  absl::Status Change(const std::vector<Circuit>& remove, const std::vector<Circuit>& add,
                      std::vector<CircuitOutcome>& outcomes) override;

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

  absl::StatusOr<std::vector<std::pair<int, int>>> ReadConnections() {
    RETURN_IF_ERROR(EnsureSize());
    ASSIGN_OR_RETURN(std::string reply, Query(":oxc:swit:conn:stat?"));
    auto conns = scpi::ParseConnectionLists(reply);
    if (!conns.ok()) return Garbage(":oxc:swit:conn:stat?", conns.status());
    std::vector<std::pair<int, int>> out;
    out.reserve(conns->size());
    for (const auto& c : *conns) out.emplace_back(c.ingress, c.egress);
    return out;
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

  PolatisOptions options_;
  LineClient client_;
  int ingress_ = 0;  // ingress port count; egress ports are ingress_+1..
  int ports_ = 0;    // duplex ports
};

absl::Status PolatisBackend::Change(const std::vector<Circuit>& remove,
                                    const std::vector<Circuit>& add,
                                    std::vector<CircuitOutcome>& outcomes) {
  outcomes.clear();
  client_.AllowReconnect();
  for (const auto& c : remove) outcomes.push_back({c, false, absl::OkStatus()});
  for (const auto& c : add) outcomes.push_back({c, true, absl::OkStatus()});
  auto fail_all = [&](const absl::Status& s) {
    for (auto& o : outcomes) o.status = s;
    return s;
  };
  if (outcomes.empty()) return absl::OkStatus();
  if (absl::Status s = EnsureSize(); !s.ok()) return fail_all(s);
  for (const auto& o : outcomes) {
    if (o.circuit.a < 1 || o.circuit.b > ports_ || o.circuit.a >= o.circuit.b) {
      return fail_all(absl::InvalidArgumentError(
          absl::StrCat("polatis ", client_.peer(), ": circuit ", CircuitText(o.circuit),
                       " is not a pair of different ports in 1..", ports_, "; nothing changed")));
    }
  }
  // Errors left over from before this change must not be blamed on it.
  {
    auto stale = DrainErrors();
    if (!stale.ok()) return fail_all(stale.status());
    for (const auto& e : *stale) {
      log::Warn("polatis {}: stale error before change: {},\"{}\"", client_.peer(), e.code,
                e.message);
    }
  }

  std::vector<scpi::Connection> sub_conns;
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
  if (!sub_conns.empty()) sub = RunPhase("sub", sub_conns);
  if (!sub.transport.ok()) {
    not_attempted =
        absl::Status(sub.transport.code(),
                     absl::StrCat("not attempted: removals failed: ", sub.transport.message()));
  } else if (!sub.errors.empty() && !add_conns.empty()) {
    not_attempted = absl::AbortedError(absl::StrCat(
        "polatis ", client_.peer(), ": not attempted because the removals reported device errors: ",
        absl::StrJoin(AllErrors(sub), "; ")));
  } else if (!add_conns.empty()) {
    add_attempted = true;
    addp = RunPhase("add", add_conns);
  }
  absl::Status transport = !sub.transport.ok() ? sub.transport : addp.transport;

  // Read back: what the switch holds decides each circuit (reconnecting if
  // the connection was lost during the change).
  client_.AllowReconnect();
  auto held = ReadConnections();
  if (!held.ok()) {
    absl::Status first = transport.ok() ? held.status() : transport;
    for (auto& o : outcomes) {
      o.status = Annotate(held.status(), absl::StrCat("circuit ", CircuitText(o.circuit),
                                                      " could not be verified"));
    }
    return first;
  }
  std::set<polatis::OneWay> have(held->begin(), held->end());
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
        std::vector<std::string> all = AllErrors(phase);
        return absl::InternalError(absl::StrCat(
            "polatis ", client_.peer(), ": ", what, " circuit ", CircuitText(o.circuit),
            " failed: ", state,
            all.empty() ? std::string("; the switch reported no error")
                        : absl::StrCat("; the switch reported ", absl::StrJoin(all, "; "))));
      });
  if (!transport.ok()) return transport;
  if (first_failure.ok()) {
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
