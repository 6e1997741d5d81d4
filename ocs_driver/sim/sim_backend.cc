// The in-memory `sim` OCS backend (see sim_backend.h). Runs on the service's
// device thread (one call at a time).
#include "ocs_driver/sim/sim_backend.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

class SimBackend : public OcsBackend {
 public:
  explicit SimBackend(SimOptions options) : options_(std::move(options)) {}

  // Loads the hardware file (one circuit "a b" per line; blank lines are
  // ignored) when it exists, then rewrites it, so that a file that cannot be
  // written fails now, at start-up, and not at the first change.
  absl::Status Load() {
    const std::string& file = options_.hardware_file;
    if (file.empty()) return absl::OkStatus();
    auto bad = [&](int line, absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("sim hardware file ", file, " line ", line, ": ", why));
    };
    std::ifstream in(file);
    if (in) {
      std::string text;
      int number = 0;
      while (std::getline(in, text)) {
        ++number;
        std::vector<absl::string_view> fields =
            absl::StrSplit(text, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
        if (fields.empty()) continue;
        int ab[2] = {0, 0};
        if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &ab[0]) ||
            !absl::SimpleAtoi(fields[1], &ab[1])) {
          return bad(number, absl::StrCat("'", absl::CEscape(text.substr(0, 80)),
                                          "' is not a circuit \"a b\" (two port numbers)"));
        }
        for (int i = 0; i < 2; ++i) {
          if (ab[i] < 1 || ab[i] > options_.ports) {
            return bad(number, absl::StrCat(i == 0 ? "first" : "second", " port ", ab[i],
                                            " is out of range 1..", options_.ports, " (--ports)"));
          }
          if (peer_.count(ab[i])) {
            return bad(number, absl::StrCat("port ", ab[i], " is already in circuit ", ab[i], "-",
                                            peer_[ab[i]]));
          }
        }
        if (ab[0] == ab[1])
          return bad(number, absl::StrCat("circuit from port ", ab[0], " to itself"));
        peer_[ab[0]] = ab[1];
        peer_[ab[1]] = ab[0];
      }
      if (in.bad() || !in.eof())
        return ErrnoStatus(absl::StrCat("sim hardware file ", file), "read");
    } else if (access(file.c_str(), F_OK) == 0) {
      return ErrnoStatus(absl::StrCat("sim hardware file ", file), "open");
    }
    return Annotate(Save(), absl::StrCat("sim hardware file ", file, " cannot be written"));
  }

  absl::StatusOr<BackendInfo> Info() override {
    BackendInfo info;
    info.backend = "sim";
    info.vendor = "MixNet";
    info.model = "sim";
    info.serial = "sim-0";
    info.firmware = "1";
    info.ports = options_.ports;
    info.switching_time = options_.switching_time;
    return info;
  }

  absl::StatusOr<std::vector<Circuit>> Read() override { return Circuits(); }

  absl::Status Change(const std::vector<Circuit>& remove, const std::vector<Circuit>& add,
                      ChangeReport& report) override {
    report = ChangeReport{};
    std::vector<CircuitOutcome>& outcomes = report.outcomes;
    absl::Status first;
    bool changed = false;
    for (const Circuit& c : remove) {
      CircuitOutcome o{c, false, absl::OkStatus()};
      auto it = peer_.find(c.a);
      if (it == peer_.end() || it->second != c.b) {
        o.status = absl::NotFoundError(absl::StrCat("sim: no circuit ", c.a, "-", c.b));
      } else {
        peer_.erase(c.a);
        peer_.erase(c.b);
        changed = true;
      }
      if (first.ok()) first = o.status;
      outcomes.push_back(o);
    }
    for (const Circuit& c : add) {
      CircuitOutcome o{c, true, absl::OkStatus()};
      if (options_.fail_ports.count(c.a) || options_.fail_ports.count(c.b)) {
        o.status = absl::UnavailableError(absl::StrCat("sim: injected hardware fault on port ",
                                                       options_.fail_ports.count(c.a) ? c.a : c.b));
      } else if (c.a < 1 || c.b > options_.ports || c.a == c.b) {
        o.status = absl::InvalidArgumentError(absl::StrCat("sim: bad circuit ", c.a, "-", c.b));
      } else if (peer_.count(c.a) || peer_.count(c.b)) {
        o.status = absl::FailedPreconditionError(
            absl::StrCat("sim: port of ", c.a, "-", c.b, " already connected"));
      } else {
        peer_[c.a] = c.b;
        peer_[c.b] = c.a;
        changed = true;
      }
      if (first.ok()) first = o.status;
      outcomes.push_back(o);
    }
    absl::Status saved;
    if (changed) {
      saved = Save();
      absl::SleepFor(options_.switching_time);
    }
    if (!saved.ok()) {
      // The "hardware" (the file) may not hold what memory holds: unknown.
      report.read_back = Annotate(saved, "sim hardware file not rewritten");
      return first.ok() ? report.read_back : first;
    }
    report.after = Circuits();
    return first;
  }

 private:
  std::vector<Circuit> Circuits() const {
    std::vector<Circuit> out;
    for (const auto& [a, b] : peer_) {
      if (a < b) out.push_back(Circuit{a, b});
    }
    return out;
  }

  // Rewrites the hardware file atomically (temp, fsync, rename).
  absl::Status Save() {
    if (options_.hardware_file.empty()) return absl::OkStatus();
    std::ostringstream text;
    for (const Circuit& c : Circuits()) text << c.a << " " << c.b << "\n";
    const std::string tmp = options_.hardware_file + ".tmp";
    const std::string data = text.str();
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(tmp, "open");
    bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    ok = ok && fsync(fd) == 0;
    close(fd);
    if (!ok) return ErrnoStatus(tmp, "write");
    if (rename(tmp.c_str(), options_.hardware_file.c_str()) != 0) {
      return ErrnoStatus(options_.hardware_file, "rename");
    }
    return absl::OkStatus();
  }

  const SimOptions options_;
  std::map<int, int> peer_;  // port -> peer, both directions
};

}  // namespace

absl::StatusOr<std::unique_ptr<OcsBackend>> OpenSimBackend(const SimOptions& options) {
  if (options.ports < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim: --ports must be >= 2, got ", options.ports));
  }
  if (options.switching_time < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("sim: --switch-ms must be >= 0, got ",
                                                   absl::FormatDuration(options.switching_time)));
  }
  for (int p : options.fail_ports) {
    if (p < 1 || p > options.ports) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim: --sim-fail-ports: port ", p, " is out of range 1..", options.ports, " (--ports)"));
    }
  }
  auto backend = std::make_unique<SimBackend>(options);
  RETURN_IF_ERROR(backend->Load());
  return backend;
}

}  // namespace mixnet::ocs
