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

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

class SimBackend : public OcsBackend {
 public:
  explicit SimBackend(SimOptions options) : options_(std::move(options)) {}

  // Loads the hardware file ("a b" per line) when it exists.
  absl::Status Load() {
    if (options_.hardware_file.empty()) return absl::OkStatus();
    std::ifstream in(options_.hardware_file);
    if (!in) {
      if (access(options_.hardware_file.c_str(), F_OK) != 0) return absl::OkStatus();
      return ErrnoStatus(options_.hardware_file, "open");
    }
    int a = 0, b = 0;
    while (in >> a >> b) {
      if (a < 1 || b < 1 || a > options_.ports || b > options_.ports || a == b || peer_.count(a) ||
          peer_.count(b)) {
        return absl::InvalidArgumentError(absl::StrCat("sim hardware file ", options_.hardware_file,
                                                       ": bad circuit ", a, " ", b));
      }
      peer_[a] = b;
      peer_[b] = a;
    }
    if (!in.eof()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sim hardware file ", options_.hardware_file, ": not \"a b\" lines"));
    }
    return absl::OkStatus();
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
                      std::vector<CircuitOutcome>& outcomes) override {
    outcomes.clear();
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
    if (changed) {
      if (absl::Status s = Save(); !s.ok() && first.ok()) first = s;
      absl::SleepFor(options_.switching_time);
    }
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
    return absl::InvalidArgumentError("sim: negative switching time");
  }
  for (int p : options.fail_ports) {
    if (p < 1 || p > options.ports) {
      return absl::InvalidArgumentError(
          absl::StrCat("sim: fail port ", p, " out of range 1..", options.ports));
    }
  }
  auto backend = std::make_unique<SimBackend>(options);
  RETURN_IF_ERROR(backend->Load());
  return backend;
}

std::unique_ptr<OcsBackend> MakeSimBackend(const SimOptions& options) {
  absl::StatusOr<std::unique_ptr<OcsBackend>> b = OpenSimBackend(options);
  if (b.ok()) return std::move(*b);
  log::Error("sim backend: {}; starting empty", b.status().ToString());
  SimOptions plain = options;
  plain.hardware_file.clear();
  plain.ports = std::max(plain.ports, 2);
  plain.fail_ports.clear();
  return std::make_unique<SimBackend>(plain);
}

}  // namespace mixnet::ocs
