// FakePolatisTl1 implementation (see fake_polatis_tl1.h): the TL1 command
// interpreter that FakeLineServer's connection threads run.
#include "tests/ocs_driver/polatis/fake_polatis_tl1.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mixnet::ocs::testing {

FakePolatisTl1::FakePolatisTl1(FakePolatisTl1Options options)
    : options_(std::move(options)), server_([this](int connection, const std::string& line) {
        return Handle(connection, line);
      }) {}

std::string FakePolatisTl1::Frame(const std::string& body) {
  std::string out;
  if (autonomous_) {
    autonomous_ = false;
    absl::StrAppend(&out, "\r\n\n   FAKE-OXC 26-11-30 09:30:00\r\nA  ", ++atag_,
                    " REPT EVT PORT\r\n   \"5:LOS\"\r\n;\r\n");
  }
  absl::StrAppend(&out, "\r\n\n   FAKE-OXC 26-11-30 09:30:00\r\n", body, ";\r\n");
  return out;
}

std::string FakePolatisTl1::Deny(const std::string& ctag, const std::string& code,
                                 const std::string& text) {
  return Frame(absl::StrCat("M  ", ctag, " DENY\r\n   ", code, "\r\n   /* ", text, " */\r\n"));
}

std::string FakePolatisTl1::Compld(const std::string& ctag, const std::vector<std::string>& data) {
  std::string body = absl::StrCat("M  ", ctag, " COMPLD\r\n");
  for (const auto& d : data) absl::StrAppend(&body, "   \"", d, "\"\r\n");
  return Frame(body);
}

FakeLineServer::Reply FakePolatisTl1::Handle(int connection, const std::string& raw) {
  FakeLineServer::Reply reply;
  std::string line(absl::StripAsciiWhitespace(raw));
  if (line.empty()) return reply;
  reply.answer = true;
  absl::MutexLock l(&mu_);
  if (!absl::EndsWith(line, ";")) {
    reply.text = Deny("0", "IISP", "command not terminated by ';'");
    return reply;
  }
  line.pop_back();
  std::vector<std::string> f = absl::StrSplit(line, ':');
  const std::string ctag = f.size() > 3 ? f[3] : "0";
  if (f.size() < 4 || ctag.empty()) {
    reply.text = Deny(ctag, "IISP", "expected VERB:TID:AID:CTAG");
    return reply;
  }
  const std::string verb = absl::AsciiStrToUpper(f[0]);
  const std::string& aid = f[2];
  const int n = options_.size;
  if (verb == "ACT-USER") {
    std::string password = f.size() > 5 ? f[5] : "";
    if (aid == options_.user && password == options_.password) {
      logged_in_.insert(connection);
      reply.text = Compld(ctag, {});
    } else {
      reply.text = Deny(ctag, "PIUI", "login incorrect");
    }
    return reply;
  }
  if (!logged_in_.count(connection)) {
    reply.text = Deny(ctag, "PLNA", "login not active");
    return reply;
  }
  if (verb == "CANC-USER") {
    logged_in_.erase(connection);
    reply.text = Compld(ctag, {});
  } else if (verb == "RTRV-NETYPE") {
    std::string model = options_.size_in_model ? absl::StrCat("N-OST-", n, "x", n, "-FAKE")
                                               : std::string("N-OST-FAKE");
    reply.text = Compld(ctag, {absl::StrCat("Polatis,", model, ",OPTICAL SWITCH,7.3.1")});
  } else if (verb == "RTRV-PATCH") {
    std::vector<std::string> data;
    for (const auto& [i, e] : conn_) data.push_back(absl::StrCat(i, ",", e));
    reply.text = Compld(ctag, data);
  } else if (verb == "ENT-PATCH") {
    std::vector<std::string> ports = absl::StrSplit(aid, ',');
    int in = 0;
    int eg = 0;
    if (ports.size() != 2 || !absl::SimpleAtoi(ports[0], &in) || !absl::SimpleAtoi(ports[1], &eg)) {
      reply.text = Deny(ctag, "IIAC", absl::StrCat("bad port pair ", aid));
    } else if (in < 1 || in > n) {
      reply.text = Deny(ctag, "IIAC", absl::StrCat("port ", in, " is not an ingress port"));
    } else if (eg <= n || eg > 2 * n) {
      reply.text = Deny(ctag, "IIAC", absl::StrCat("port ", eg, " is not an egress port"));
    } else if (conn_.count(in)) {
      reply.text = Deny(ctag, "SROF", absl::StrCat("port ", in, " already connected"));
    } else if ([&] {
                 for (const auto& [i, e] : conn_) {
                   if (e == eg) return true;
                 }
                 return false;
               }()) {
      reply.text = Deny(ctag, "SROF", absl::StrCat("port ", eg, " already connected"));
    } else if (failed_ports_.count(in) || failed_ports_.count(eg)) {
      reply.text =
          Deny(ctag, "SROF",
               absl::StrCat("port ", failed_ports_.count(in) ? in : eg, " failed to switch"));
    } else {
      conn_[in] = eg;
      absl::Duration wait = switching_delay_;
      mu_.Unlock();
      server_.SleepUnlessStopped(wait);
      mu_.Lock();
      reply.text = Compld(ctag, {});
    }
  } else if (verb == "DLT-PATCH") {
    int p = 0;
    if (!absl::SimpleAtoi(aid, &p) || p < 1 || p > 2 * n) {
      reply.text = Deny(ctag, "IIAC", absl::StrCat("bad port ", aid));
    } else {
      auto it = conn_.begin();
      while (it != conn_.end() && it->first != p && it->second != p) ++it;
      if (it == conn_.end()) {
        reply.text = Deny(ctag, "SROF", absl::StrCat("port ", p, " is not connected"));
      } else {
        conn_.erase(it);
        absl::Duration wait = switching_delay_;
        mu_.Unlock();
        server_.SleepUnlessStopped(wait);
        mu_.Lock();
        reply.text = Compld(ctag, {});
      }
    }
  } else {
    reply.text = Deny(ctag, "ICNV", absl::StrCat("command not valid: ", verb));
  }
  return reply;
}

std::map<int, int> FakePolatisTl1::Connections() const {
  absl::MutexLock l(&mu_);
  return conn_;
}

void FakePolatisTl1::SetConnection(int ingress, int egress) {
  absl::MutexLock l(&mu_);
  conn_[ingress] = egress;
}

void FakePolatisTl1::FailPort(int port) {
  absl::MutexLock l(&mu_);
  failed_ports_.insert(port);
}

void FakePolatisTl1::SetSwitchingDelay(absl::Duration per_connection) {
  absl::MutexLock l(&mu_);
  switching_delay_ = per_connection;
}

void FakePolatisTl1::SendAutonomousBeforeNextResponse() {
  absl::MutexLock l(&mu_);
  autonomous_ = true;
}

}  // namespace mixnet::ocs::testing
