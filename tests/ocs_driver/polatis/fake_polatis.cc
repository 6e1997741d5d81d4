// FakePolatis implementation (see fake_polatis.h): the SCPI command
// interpreter that FakeLineServer's connection threads run.
#include "tests/ocs_driver/polatis/fake_polatis.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mixnet::ocs::testing {
namespace {

using Pattern = std::vector<std::pair<const char*, const char*>>;  // {short, long} per node

// Whether the header nodes match the keyword pattern (each node is either
// the short or the long form, case-insensitive; nodes are lower case here).
bool Is(const std::vector<std::string>& nodes, const Pattern& pattern) {
  if (nodes.size() != pattern.size()) return false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] != pattern[i].first && nodes[i] != pattern[i].second) return false;
  }
  return true;
}

// "1,2,5:7" -> ports; false on syntax errors.
bool Channels(absl::string_view body, std::vector<int>& out) {
  body = absl::StripAsciiWhitespace(body);
  if (body.empty()) return true;
  for (absl::string_view item : absl::StrSplit(body, ',')) {
    std::vector<absl::string_view> r = absl::StrSplit(item, ':');
    int lo = 0;
    int hi = 0;
    if (r.size() > 2 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(r[0]), &lo)) return false;
    hi = lo;
    if (r.size() == 2 && !absl::SimpleAtoi(absl::StripAsciiWhitespace(r[1]), &hi)) return false;
    if (lo > hi || hi - lo > 10000) return false;
    for (int p = lo; p <= hi; ++p) out.push_back(p);
  }
  return true;
}

// "(@1,2),(@17,18)" -> two equal-length lists; false on syntax errors.
bool TwoLists(absl::string_view s, std::vector<int>& in, std::vector<int>& eg) {
  s = absl::StripAsciiWhitespace(s);
  for (int k = 0; k < 2; ++k) {
    s = absl::StripLeadingAsciiWhitespace(s);
    if (k == 1 && !absl::ConsumePrefix(&s, ",")) return false;
    s = absl::StripLeadingAsciiWhitespace(s);
    if (!absl::ConsumePrefix(&s, "(@")) return false;
    size_t close = s.find(')');
    if (close == absl::string_view::npos) return false;
    if (!Channels(s.substr(0, close), k == 0 ? in : eg)) return false;
    s.remove_prefix(close + 1);
  }
  return absl::StripAsciiWhitespace(s).empty();
}

std::string List(const std::vector<int>& ports) {
  return absl::StrCat("(@", absl::StrJoin(ports, ","), ")");
}

}  // namespace

FakePolatis::FakePolatis(FakePolatisOptions options)
    : options_(std::move(options)),
      server_([this](int, const std::string& line) { return Handle(line); }) {}

void FakePolatis::AddError(int code, const std::string& message) {
  errors_.push_back(absl::StrCat(code, ",\"", message, "\""));
}

FakeLineServer::Reply FakePolatis::Handle(const std::string& line) {
  FakeLineServer::Reply a;
  std::string lower = absl::AsciiStrToLower(line);
  if (line.empty()) return a;
  size_t space = lower.find_first_of(" \t");
  std::string header = lower.substr(0, space);
  std::string args = space == std::string::npos ? "" : lower.substr(space + 1);
  bool query = absl::EndsWith(header, "?");
  if (query) header.pop_back();
  std::vector<std::string> nodes;
  if (header[0] == '*') {
    nodes.push_back(header);
  } else {
    absl::string_view h = header;
    absl::ConsumePrefix(&h, ":");
    nodes = absl::StrSplit(h, ':');
  }
  const std::pair<const char*, const char*> kOxc{"oxc", "oxc"};
  const std::pair<const char*, const char*> kSwit{"swit", "switch"};
  const std::pair<const char*, const char*> kConn{"conn", "connect"};
  const std::pair<const char*, const char*> kSyst{"syst", "system"};
  const std::pair<const char*, const char*> kErr{"err", "error"};

  absl::MutexLock l(&mu_);
  auto answer = [&](std::string text) {
    a.answer = true;
    a.text = std::move(text) + "\n";
  };
  const int n = options_.size;
  if (query && Is(nodes, {{"*idn", "*idn"}})) {
    answer(options_.idn);
  } else if (query && Is(nodes, {{"*opc", "*opc"}})) {
    absl::Duration wait = busy_until_ - absl::Now();
    mu_.Unlock();
    server_.SleepUnlessStopped(wait);
    mu_.Lock();
    answer("1");
  } else if (!query && Is(nodes, {{"*cls", "*cls"}})) {
    errors_.clear();
  } else if (query && Is(nodes, {kOxc, kSwit, {"size", "size"}})) {
    answer(absl::StrCat(n, ",", n));
  } else if (query && (Is(nodes, {kOxc, kSwit, kConn, {"stat", "state"}}) ||
                       Is(nodes, {kOxc, kSwit, kConn, {"stat", "states"}}))) {
    std::vector<int> in;
    std::vector<int> eg;
    Settle();
    for (const auto& [i, e] : shown_) {
      in.push_back(i);
      eg.push_back(e);
    }
    answer(absl::StrCat(List(in), ",", List(eg)));
  } else if (query && Is(nodes, {kOxc, kSwit, kConn, {"port", "port"}})) {
    int p = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(args), &p) || p < 1 || p > 2 * n) {
      AddError(-222, absl::StrCat("Data out of range; port ", args));
    } else {
      std::string peer;
      Settle();
      for (const auto& [i, e] : shown_) {
        if (i == p) peer = absl::StrCat(e);
        if (e == p) peer = absl::StrCat(i);
      }
      answer(peer);
    }
  } else if (!query && (Is(nodes, {kOxc, kSwit, kConn, {"add", "add"}}) ||
                        Is(nodes, {kOxc, kSwit, kConn, {"sub", "subtract"}}) ||
                        Is(nodes, {kOxc, kSwit, kConn, {"only", "only"}}))) {
    Modify(nodes[3].substr(0, 3), args);
  } else if (!query && Is(nodes, {kOxc, kSwit, {"disc", "disconnect"}, {"all", "all"}})) {
    busy_until_ =
        std::max(busy_until_, absl::Now()) + switching_delay_ * static_cast<int64_t>(conn_.size());
    for (const auto& [i, e] : conn_) pending_.push_back({busy_until_, i, 0});
    conn_.clear();
  } else if (query && (Is(nodes, {kSyst, kErr}) || Is(nodes, {kSyst, kErr, {"next", "next"}}))) {
    if (errors_.empty()) {
      answer("0,\"No error\"");
    } else {
      answer(errors_.front());
      errors_.erase(errors_.begin());
    }
  } else if (query && Is(nodes, {kSyst, kErr, {"all", "all"}})) {
    answer(errors_.empty() ? std::string("0,\"No error\"") : absl::StrJoin(errors_, ","));
    errors_.clear();
  } else if (Is(nodes, {kOxc, {"boot", "boot"}, {"mode", "mode"}})) {
    if (query) {
      answer(boot_mode_);
    } else if (args == "dark" || args == "rest" || args == "restore" || args == "aut" ||
               args == "autosave") {
      boot_mode_ = absl::AsciiStrToUpper(args);
    } else {
      AddError(-224, "Illegal parameter value");
    }
  } else {
    AddError(-113, absl::StrCat("Undefined header; ", line.substr(0, 60)));
  }
  return a;
}

bool FakePolatis::Modify(const std::string& verb, const std::string& args) {
  const int n = options_.size;
  std::vector<int> in;
  std::vector<int> eg;
  if (!TwoLists(args, in, eg)) {
    AddError(-102, "Syntax error; expected (@ingress,...),(@egress,...)");
    return false;
  }
  if (in.size() != eg.size()) {
    AddError(-109, "Missing parameter; ingress and egress lists differ in length");
    return false;
  }
  std::set<int> seen;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] < 1 || in[k] > n) {
      AddError(-222, absl::StrCat("Data out of range; port ", in[k], " is not an ingress port"));
      return false;
    }
    if (eg[k] <= n || eg[k] > 2 * n) {
      AddError(-222, absl::StrCat("Data out of range; port ", eg[k], " is not an egress port"));
      return false;
    }
    for (int p : {in[k], eg[k]}) {
      if (!seen.insert(p).second) {
        AddError(-221, absl::StrCat("Settings conflict; port ", p, " used twice"));
        return false;
      }
    }
  }
  std::map<int, int> next = verb == "onl" ? std::map<int, int>{} : conn_;
  std::set<int> egress_used;
  for (const auto& [i, e] : next) egress_used.insert(e);
  for (size_t k = 0; k < in.size(); ++k) {
    if (verb == "sub") {
      auto it = next.find(in[k]);
      if (it == next.end() || it->second != eg[k]) {
        AddError(-221, absl::StrCat("Settings conflict; port ", in[k], " is not connected to port ",
                                    eg[k]));
        return false;
      }
      continue;
    }
    if (next.count(in[k])) {
      AddError(-221, absl::StrCat("Settings conflict; port ", in[k], " already connected"));
      return false;
    }
    if (egress_used.count(eg[k])) {
      AddError(-221, absl::StrCat("Settings conflict; port ", eg[k], " already connected"));
      return false;
    }
  }
  // Valid: apply, except connections on failed ports. :conn:stat? shows
  // each change once the switching is over (Settle).
  std::vector<std::pair<int, int>> ops;  // {ingress, egress}; egress 0: removal
  if (verb == "onl") {
    for (const auto& [i, e] : conn_) ops.push_back({i, 0});
    conn_.clear();
  }
  for (size_t k = 0; k < in.size(); ++k) {
    if (verb != "sub" && (failed_ports_.count(in[k]) || failed_ports_.count(eg[k]))) {
      int bad = failed_ports_.count(in[k]) ? in[k] : eg[k];
      AddError(-300, absl::StrCat("Device-specific error; port ", bad, " failed to switch"));
      continue;
    }
    if (verb == "sub") {
      conn_.erase(in[k]);
      ops.push_back({in[k], 0});
    } else {
      conn_[in[k]] = eg[k];
      ops.push_back({in[k], eg[k]});
    }
  }
  busy_until_ = std::max(busy_until_, absl::Now()) +
                (switching_parallel_ ? (ops.empty() ? absl::ZeroDuration() : switching_delay_)
                                     : switching_delay_ * static_cast<int64_t>(ops.size()));
  for (const auto& [i, e] : ops) pending_.push_back({busy_until_, i, e});
  return true;
}

void FakePolatis::Settle() {
  const absl::Time now = absl::Now();
  size_t kept = 0;
  for (const Pending& p : pending_) {
    if (p.due > now) {
      pending_[kept++] = p;
    } else if (p.egress == 0) {
      shown_.erase(p.ingress);
    } else {
      shown_[p.ingress] = p.egress;
    }
  }
  pending_.resize(kept);
}

std::map<int, int> FakePolatis::Connections() const {
  absl::MutexLock l(&mu_);
  return conn_;
}

void FakePolatis::SetConnection(int ingress, int egress) {
  absl::MutexLock l(&mu_);
  conn_[ingress] = egress;
  shown_[ingress] = egress;
}

void FakePolatis::FailPort(int port) {
  absl::MutexLock l(&mu_);
  failed_ports_.insert(port);
}

void FakePolatis::RepairPorts() {
  absl::MutexLock l(&mu_);
  failed_ports_.clear();
}

void FakePolatis::SetSwitchingDelay(absl::Duration per_connection) {
  absl::MutexLock l(&mu_);
  switching_delay_ = per_connection;
  switching_parallel_ = false;
}

void FakePolatis::SetSwitchingTime(absl::Duration per_command) {
  absl::MutexLock l(&mu_);
  switching_delay_ = per_command;
  switching_parallel_ = true;
}

void FakePolatis::QueueError(int code, std::string message) {
  absl::MutexLock l(&mu_);
  AddError(code, message);
}

std::vector<std::string> FakePolatis::ErrorQueue() const {
  absl::MutexLock l(&mu_);
  return errors_;
}

}  // namespace mixnet::ocs::testing
