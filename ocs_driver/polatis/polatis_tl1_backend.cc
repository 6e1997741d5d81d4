// PolatisTl1Backend: OcsBackend over Polatis TL1 (see polatis_tl1_backend.h).
// Runs on the service's calling thread.
#include "ocs_driver/polatis/polatis_tl1_backend.h"

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ocs_driver/polatis/duplex.h"
#include "ocs_driver/polatis/line_client.h"
#include "ocs_driver/polatis/tl1_format.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

using polatis::CircuitText;

constexpr size_t kMaxBlockLines = 100000;

class PolatisTl1Backend : public OcsBackend {
 public:
  explicit PolatisTl1Backend(const PolatisTl1Options& o)
      : options_(o),
        client_(LineClientOptions{.host = o.host,
                                  .port = o.port,
                                  .connect_timeout = o.reply_timeout,
                                  .command_pacing = o.command_pacing,
                                  .reply_timeout = o.reply_timeout,
                                  .line_ending = "\r\n"}) {}

  // Connects, logs in, learns the size.
  absl::Status Open() {
    RETURN_IF_ERROR(Begin());
    ASSIGN_OR_RETURN(tl1::NeType ne, NeType());
    ports_ = options_.size > 0 ? options_.size : tl1::SizeFromModel(ne.model);
    if (ports_ <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("polatis-tl1 ", client_.peer(),
                                                     ": cannot tell the switch size from model '",
                                                     ne.model, "'; give the size (--ports)"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<BackendInfo> Info() override {
    RETURN_IF_ERROR(Begin());
    ASSIGN_OR_RETURN(tl1::NeType ne, NeType());
    BackendInfo info;
    info.backend = "polatis-tl1";
    info.vendor = absl::StrContains(absl::AsciiStrToLower(ne.vendor), "polatis")
                      ? std::string("HUBER+SUHNER Polatis")
                      : ne.vendor;
    info.model = ne.model;
    info.firmware = ne.version;
    info.ports = ports_;
    info.switching_time = polatis::kSwitchingTime;
    return info;
  }

  absl::StatusOr<std::vector<Circuit>> Read() override {
    RETURN_IF_ERROR(Begin());
    ASSIGN_OR_RETURN(auto connections, Patches());
    std::vector<std::string> leftovers;
    std::vector<Circuit> circuits = polatis::CircuitsOf(connections, ports_, ports_, &leftovers);
    for (const auto& l : leftovers) {
      log::Warn("polatis-tl1 {}: {} (not a circuit; left alone unless a change needs its ports)",
                client_.peer(), l);
    }
    return circuits;
  }

  absl::Status Change(const std::vector<Circuit>& remove, const std::vector<Circuit>& add,
                      ChangeReport& report) override;

 private:
  // Starts a backend call: reconnects (and logs in again) when the
  // connection was lost; no reconnect after this until the next call.
  absl::Status Begin() {
    client_.AllowReconnect();
    client_.DiscardUnsolicited();
    RETURN_IF_ERROR(client_.EnsureConnected());
    if (client_.generation() != logged_in_generation_) {
      std::string ctag = NextCtag();
      // The password is not logged: error texts show the command without it.
      std::string command =
          tl1::FormatCommand("ACT-USER", options_.tid, options_.user, ctag, options_.password);
      std::string shown = tl1::FormatCommand("ACT-USER", options_.tid, options_.user, ctag, "***");
      ASSIGN_OR_RETURN(tl1::Response r, Exchange(command, shown, ctag, options_.reply_timeout));
      if (!r.completed()) {
        client_.Close();
        return absl::PermissionDeniedError(
            absl::StrCat("polatis-tl1 ", client_.peer(), ": login as '", options_.user,
                         "' refused: ", r.status, " ", r.code, " ", r.comment));
      }
      logged_in_generation_ = client_.generation();
    }
    client_.DisallowReconnect();
    return absl::OkStatus();
  }

  std::string NextCtag() {
    ctag_ = ctag_ % 999999 + 1;
    return absl::StrCat(ctag_);
  }

  // Sends `command` and returns the response carrying `ctag`, skipping
  // acknowledgements, autonomous messages and responses to other ctags.
  absl::StatusOr<tl1::Response> Exchange(const std::string& command, const std::string& shown,
                                         const std::string& ctag, absl::Duration timeout) {
    RETURN_IF_ERROR(client_.Send(command, shown));
    absl::Time deadline = absl::Now() + timeout;
    std::vector<std::string> block;
    for (;;) {
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        client_.Close();
        return absl::DeadlineExceededError(
            absl::StrCat("polatis-tl1 ", client_.peer(), ": no response to '", shown, "' within ",
                         absl::FormatDuration(timeout), " (connection closed)"));
      }
      ASSIGN_OR_RETURN(std::string line, client_.ReadLine(shown, left));
      std::string t(absl::StripAsciiWhitespace(line));
      if (t != ";" && t != "<") {
        if (!t.empty()) block.push_back(t);
        if (block.size() > kMaxBlockLines) return Garbage(shown, "response without ';'");
        continue;
      }
      tl1::Response r;
      auto kind = tl1::ParseBlock(block, &r);
      block.clear();
      if (!kind.ok()) return Garbage(shown, kind.status().message());
      if (*kind != tl1::BlockKind::kResponse) continue;
      if (r.ctag != ctag) {
        log::Warn("polatis-tl1 {}: discarding a response with ctag {} while waiting for {}",
                  client_.peer(), r.ctag, ctag);
        continue;
      }
      return r;
    }
  }

  absl::Status Garbage(absl::string_view shown, absl::string_view why) {
    client_.Close();
    return absl::InternalError(absl::StrCat("polatis-tl1 ", client_.peer(),
                                            ": unexpected reply to '", shown, "': ", why,
                                            " (connection closed; next call reconnects)"));
  }

  // A command without secrets: its text is also what errors show.
  absl::StatusOr<tl1::Response> Run(absl::string_view verb, absl::string_view aid,
                                    absl::Duration timeout) {
    std::string ctag = NextCtag();
    std::string command = tl1::FormatCommand(verb, options_.tid, aid, ctag);
    return Exchange(command, command, ctag, timeout);
  }

  static std::string DenyText(const tl1::Response& r) {
    std::string s = absl::StrCat(r.status, r.code.empty() ? "" : " ", r.code);
    if (!r.comment.empty()) absl::StrAppend(&s, " (", r.comment, ")");
    return s;
  }

  absl::StatusOr<tl1::NeType> NeType() {
    ASSIGN_OR_RETURN(tl1::Response r, Run("RTRV-NETYPE", "", options_.reply_timeout));
    if (!r.completed()) {
      return absl::InternalError(
          absl::StrCat("polatis-tl1 ", client_.peer(), ": RTRV-NETYPE refused: ", DenyText(r)));
    }
    auto ne = tl1::ParseNeType(r);
    if (!ne.ok()) return Garbage("RTRV-NETYPE", ne.status().message());
    return ne;
  }

  absl::StatusOr<std::vector<polatis::OneWay>> Patches() {
    ASSIGN_OR_RETURN(tl1::Response r, Run("RTRV-PATCH", "", options_.reply_timeout));
    if (!r.completed()) {
      return absl::InternalError(
          absl::StrCat("polatis-tl1 ", client_.peer(), ": RTRV-PATCH refused: ", DenyText(r)));
    }
    auto p = tl1::ParsePatches(r);
    if (!p.ok()) return Garbage("RTRV-PATCH", p.status().message());
    seen_ = Seen{*p, client_.generation(), client_.commands_sent(), absl::Now()};
    return p;
  }

  // The patches of the Read just before, when no command was sent since on
  // the same connection (less than a second ago); see the SCPI backend.
  std::optional<std::vector<polatis::OneWay>> FreshPatches() const {
    if (!seen_.has_value() || !client_.connected() || seen_->generation != client_.generation() ||
        seen_->commands != client_.commands_sent() || absl::Now() - seen_->at > absl::Seconds(1)) {
      return std::nullopt;
    }
    return seen_->map;
  }

  struct Seen {
    std::vector<polatis::OneWay> map;
    int generation = 0;
    uint64_t commands = 0;
    absl::Time at;
  };
  std::optional<Seen> seen_;

  PolatisTl1Options options_;
  LineClient client_;
  int logged_in_generation_ = -1;
  int ctag_ = 0;
  int ports_ = 0;  // N; egress ports are N+1..2N
};

absl::Status PolatisTl1Backend::Change(const std::vector<Circuit>& remove,
                                       const std::vector<Circuit>& add, ChangeReport& report) {
  report = ChangeReport{};
  std::vector<CircuitOutcome>& outcomes = report.outcomes;
  for (const auto& c : remove) outcomes.push_back({c, false, absl::OkStatus()});
  for (const auto& c : add) outcomes.push_back({c, true, absl::OkStatus()});
  if (outcomes.empty()) return absl::OkStatus();
  auto fail_all = [&](const absl::Status& s) {
    for (auto& o : outcomes) o.status = s;
    report.read_back = s;
    return s;
  };
  std::set<int> touched;
  for (const auto& o : outcomes) {
    if (o.circuit.a < 1 || o.circuit.b > ports_ || o.circuit.a >= o.circuit.b) {
      return fail_all(absl::InvalidArgumentError(
          absl::StrCat("polatis-tl1 ", client_.peer(), ": circuit ", CircuitText(o.circuit),
                       " is not a pair of different ports in 1..", ports_, "; nothing changed")));
    }
    touched.insert({o.circuit.a, o.circuit.b});
  }
  std::optional<std::vector<polatis::OneWay>> map = FreshPatches();
  if (absl::Status s = Begin(); !s.ok()) return fail_all(s);

  // Per outcome: the DENY texts of its commands.
  std::vector<std::vector<std::string>> denied(outcomes.size());
  absl::Status transport;
  bool removals_ok = true;
  // One-way leftovers on the ports of this change would block the
  // additions: removed first (by ingress port).
  if (!map.has_value()) {
    auto m = Patches();
    if (m.ok()) {
      map = *std::move(m);
    } else {
      transport = m.status();
    }
  }
  std::vector<polatis::OneWay> leftovers;
  if (map.has_value()) {
    leftovers = polatis::LeftoversToClear(*map, ports_, ports_, touched, remove);
  }
  std::vector<bool> leftover_deleted(leftovers.size(), false);
  for (size_t i = 0; i < leftovers.size() && transport.ok(); ++i) {
    log::Warn("polatis-tl1 {}: clearing {} on a port of this change", client_.peer(),
              polatis::OneWayText(leftovers[i], ports_));
    auto r = Run("DLT-PATCH", absl::StrCat(leftovers[i].first), options_.completion_timeout);
    if (!r.ok()) {
      transport = r.status();
    } else if (!r->completed()) {
      log::Warn("polatis-tl1 {}: clearing {} denied: {}", client_.peer(),
                polatis::OneWayText(leftovers[i], ports_), DenyText(*r));
    } else {
      leftover_deleted[i] = true;
    }
  }
  for (size_t i = 0; i < remove.size() && transport.ok(); ++i) {
    for (const auto& [in, eg] : polatis::ConnectionsOf(remove[i], ports_)) {
      auto r = Run("DLT-PATCH", absl::StrCat(in), options_.completion_timeout);
      if (!r.ok()) {
        transport = r.status();
        break;
      }
      if (!r->completed()) {
        removals_ok = false;
        denied[i].push_back(absl::StrCat("DLT-PATCH ", in, ": ", DenyText(*r)));
      }
    }
  }
  absl::Status not_attempted;
  if (!transport.ok()) {
    not_attempted = absl::Status(
        transport.code(), absl::StrCat("not attempted: removals failed: ", transport.message()));
  } else if (!removals_ok) {
    not_attempted = absl::AbortedError(absl::StrCat(
        "polatis-tl1 ", client_.peer(), ": not attempted because a removal was denied"));
  } else {
    for (size_t i = 0; i < add.size() && transport.ok(); ++i) {
      for (const auto& [in, eg] : polatis::ConnectionsOf(add[i], ports_)) {
        auto r = Run("ENT-PATCH", absl::StrCat(in, ",", eg), options_.completion_timeout);
        if (!r.ok()) {
          transport = r.status();
          break;
        }
        if (!r->completed()) {
          denied[remove.size() + i].push_back(
              absl::StrCat("ENT-PATCH ", in, ",", eg, ": ", DenyText(*r)));
        }
      }
    }
  }

  // Read back (reconnecting and logging in again if the connection was lost,
  // and once more on a fresh connection if that read fails).
  absl::Status begun = Begin();
  auto held = begun.ok() ? Patches() : absl::StatusOr<std::vector<polatis::OneWay>>(begun);
  if (!held.ok() && begun.ok()) {
    log::Warn("polatis-tl1 {}: read-back failed ({}); trying once more on a new connection",
              client_.peer(), held.status().ToString());
    client_.Close();
    begun = Begin();
    held = begun.ok() ? Patches() : absl::StatusOr<std::vector<polatis::OneWay>>(begun);
  }
  if (!held.ok()) {
    report.read_back = held.status();
    for (auto& o : outcomes) {
      o.status = Annotate(held.status(), absl::StrCat("circuit ", CircuitText(o.circuit),
                                                      " could not be verified (state unknown)"));
    }
    return transport.ok() ? held.status() : transport;
  }
  std::set<polatis::OneWay> have(held->begin(), held->end());
  std::vector<std::string> ignored;
  report.after = polatis::CircuitsOf(*held, ports_, ports_, &ignored);
  // Cleared: gone now, or deleted (COMPLD; a still-broken port may have
  // made the same half again since).
  for (size_t i = 0; i < leftovers.size(); ++i) {
    if (leftover_deleted[i] || !have.count(leftovers[i])) {
      report.cleared.push_back(polatis::OneWayText(leftovers[i], ports_));
    }
  }
  absl::Status first = polatis::VerifyOutcomes(
      have, ports_, outcomes, [&](const CircuitOutcome& o, const std::string& state) {
        size_t index = static_cast<size_t>(&o - outcomes.data());
        const char* what = o.add ? "add" : "remove";
        if (o.add && !not_attempted.ok()) {
          return Annotate(not_attempted, absl::StrCat("add circuit ", CircuitText(o.circuit)));
        }
        if (!denied[index].empty()) {
          return absl::InternalError(absl::StrCat(
              "polatis-tl1 ", client_.peer(), ": ", what, " circuit ", CircuitText(o.circuit),
              " failed: switch answered ", absl::StrJoin(denied[index], "; "), "; ", state));
        }
        if (!transport.ok()) {
          return Annotate(transport,
                          absl::StrCat(what, " circuit ", CircuitText(o.circuit), ": ", state));
        }
        return absl::InternalError(absl::StrCat("polatis-tl1 ", client_.peer(), ": ", what,
                                                " circuit ", CircuitText(o.circuit),
                                                " failed: ", state, " although it was accepted"));
      });
  if (first.ok() && !transport.ok()) {
    log::Warn("polatis-tl1 {}: {}; but the read-back shows every circuit done", client_.peer(),
              transport.ToString());
  }
  return first;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OcsBackend>> OpenPolatisTl1Backend(
    const PolatisTl1Options& options) {
  if (options.host.empty()) return absl::InvalidArgumentError("polatis-tl1: empty host");
  if (options.port < 1 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("polatis-tl1: bad TCP port ", options.port));
  }
  if (options.user.empty()) return absl::InvalidArgumentError("polatis-tl1: no TL1 user");
  if (options.size < 0 || options.command_pacing < absl::ZeroDuration() ||
      options.reply_timeout <= absl::ZeroDuration() ||
      options.completion_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "polatis-tl1: size must be >= 0, pacing >= 0 and the timeouts > 0");
  }
  for (const std::string* f : {&options.user, &options.password, &options.tid}) {
    if (f->find_first_of(":;\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          "polatis-tl1: user, password and tid must not contain ':', ';' or line breaks");
    }
  }
  auto backend = std::make_unique<PolatisTl1Backend>(options);
  RETURN_IF_ERROR(backend->Open());
  return std::unique_ptr<OcsBackend>(std::move(backend));
}

}  // namespace mixnet::ocs
