// The emulated optical circuit switch: a network namespace whose interfaces
// are switch ports (veth ends, named "p<port>" by the emulated fabric). A
// duplex circuit between ports A and B is two ingress redirects programmed
// through rtnetlink (libnl-route-3), never by spawning `tc`:
//   ingress qdisc on A, u32 filter "match u32 0 0" (all protocols) with action
//   "mirred egress redirect dev B"; and the same from B to A.
// A port without a filter drops what it receives (nothing routes inside the
// OCS namespace). A port taken administratively down is a dark fibre: the host
// side of the veth loses carrier.
//
// Every change (Apply, Connect, Disconnect, SetPortsDark) first reads the
// kernel's state (one link dump, one qdisc dump, one filter dump per port),
// then sends all of its filter/qdisc/link requests in one netlink batch
// (one sendmsg, one acknowledgement each; two batches for an Apply with a
// switching time): a full re-wiring of 64 ports takes a few milliseconds
// here. A batch is not a transaction: the kernel runs every request, and a
// failed one does not undo or stop the others (ApplyReporting reports each). Nothing is cached, so
// other writers (another NetnsOcs, `tc`) are seen. Ports must face different namespaces: a circuit
// between the two ends of one veth would loop packets forever.
//
// Threading: a NetnsOcs owns one netlink socket created inside the OCS
// namespace; its methods may be called from any thread and are serialised by
// an internal mutex (one switch write at a time).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "ocs_driver/netns/nl_socket.h"

namespace mixnet::ocs {

// A duplex circuit between two ports (interface names in the OCS namespace).
// List() returns each with a < b in port order (p2 before p10).
struct PortPair {
  std::string a;
  std::string b;
  friend bool operator==(const PortPair&, const PortPair&) = default;
};

// One direction of a circuit as programmed in the kernel: traffic entering
// `from` leaves through `to`.
struct Redirect {
  std::string from;
  std::string to;
  friend bool operator==(const Redirect&, const Redirect&) = default;
};

struct ApplyResult {
  std::vector<std::string> changed_ports;  // ports whose redirect was added/replaced/removed
  int redirects_set = 0;                   // filters added or replaced
  int redirects_removed = 0;
};

// Port order: "p<N>" names by N, others by name, numbered before named.
bool PortLess(absl::string_view x, absl::string_view y);

class NetnsOcs {
 public:
  // "p<port>", the interface name of 1-based switch port `port`.
  static std::string PortName(int port);
  // The port number of a "p<N>" name, or InvalidArgument.
  static absl::StatusOr<int> PortNumber(absl::string_view ifname);

  // Opens the OCS namespace `netns` (must exist): creates the netlink socket
  // inside it. Changes nothing in the kernel.
  static absl::StatusOr<std::unique_ptr<NetnsOcs>> Open(absl::string_view netns);
  ~NetnsOcs();

  const std::string& netns() const { return netns_; }

  // Interfaces of the namespace except lo, in port order.
  absl::StatusOr<std::vector<std::string>> Ports();

  // Adds the ingress qdisc on `port` if missing (Connect does it as needed).
  absl::Status EnsureIngress(absl::string_view port);

  // Installs the duplex circuit a<->b, replacing whatever either port
  // redirected to before; a former peer of a or b that still redirects back
  // to it loses its redirect (no half circuits left behind).
  absl::Status Connect(absl::string_view port_a, absl::string_view port_b);

  // Removes the redirect of `port` and the one of its peer if the peer
  // redirects back. A port with no circuit is a no-op.
  absl::Status Disconnect(absl::string_view port);

  // Sets the ports administratively down (dark = true) or up.
  absl::Status SetPortsDark(const std::vector<std::string>& ports, bool dark);

  // Makes the switch hold exactly `desired` (declarative): validates it (ports
  // exist, no port twice, no self-loop: InvalidArgument before any change),
  // removes redirects that are not wanted, then sets the changed ones. When
  // `dark_for` > 0 (the switching time) every changed port carries nothing for
  // `dark_for` first: its redirect is removed, its link stays up (no carrier
  // flap on the hosts). Unchanged circuits are not touched.
  absl::StatusOr<ApplyResult> Apply(const std::vector<PortPair>& desired,
                                    absl::Duration dark_for = absl::ZeroDuration());

  // What ApplyReporting did.
  struct ApplyReport {
    ApplyResult result;
    // Ports whose requests failed, with the first failure of each (from the
    // kernel's acknowledgement of that request): a failed removal leaves the
    // port's old redirect, a failed set leaves the port dark.
    std::map<std::string, absl::Status> failed;
    // One-way redirects (not half of a duplex circuit) that were removed.
    std::vector<Redirect> cleared;
  };
  // Apply without stopping at the first failure: netlink batches are not
  // transactions (with `dark_for` > 0 there are two, with the sleep between),
  // so every request is sent and its outcome recorded in `report`. Returns
  // the first failure (validation errors before anything is sent; then a
  // request's or the socket's error), OK when every request succeeded.
  absl::Status ApplyReporting(const std::vector<PortPair>& desired, absl::Duration dark_for,
                              ApplyReport& report);

  // ApplyReporting of (the duplex circuits held now) minus `remove` plus
  // `add`, read in the same snapshot that the change is computed from (one
  // read of the kernel where List then ApplyReporting take two).
  absl::Status ChangeReporting(const std::vector<PortPair>& remove,
                               const std::vector<PortPair>& add, absl::Duration dark_for,
                               ApplyReport& report);
  // The duplex circuits read back from the kernel's filters, sorted. One-way
  // redirects (a half circuit) are not circuits; see ListRedirects.
  absl::StatusOr<std::vector<PortPair>> List();
  // Every ingress mirred redirect in the namespace, sorted by `from`.
  absl::StatusOr<std::vector<Redirect>> ListRedirects();

 private:
  // What the kernel holds now, read in one pass.
  struct Snapshot {
    std::map<std::string, int> index;             // port -> ifindex (lo excluded)
    std::set<int> ingress;                        // ifindexes with an ingress qdisc
    std::map<std::string, std::string> redirect;  // from -> to
  };

  NetnsOcs(std::string netns, std::unique_ptr<netns::NlSocket> sock);

  absl::StatusOr<Snapshot> ReadSnapshot(bool with_qdiscs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The duplex circuits of `snap` (both directions redirected), sorted.
  static std::vector<PortPair> DuplexCircuits(const Snapshot& snap);
  // ApplyReporting's change, computed from `snap` (read under this lock).
  absl::Status ApplyToSnapshotLocked(const Snapshot& snap, const std::vector<PortPair>& desired,
                                     absl::Duration dark_for, ApplyReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int> IndexIn(const Snapshot& snap, absl::string_view port) const;
  // Requests for NlSocket::SendBatch.
  absl::Status AddIngress(std::vector<netns::NlSocket::Request>& batch, absl::string_view port,
                          int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AddRedirect(std::vector<netns::NlSocket::Request>& batch, absl::string_view from,
                           int from_index, absl::string_view to, int to_index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AddFlush(std::vector<netns::NlSocket::Request>& batch, absl::string_view port,
                        int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AddLinkState(std::vector<netns::NlSocket::Request>& batch, absl::string_view port,
                            int index, bool up) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SendDark(const Snapshot& snap, const std::vector<std::string>& ports, bool dark)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `batch` (then clears it), recording each failed request against
  // its port (`ports`, parallel to `batch`) in report.failed.
  absl::Status SendTracked(std::vector<netns::NlSocket::Request>& batch,
                           const std::vector<std::string>& ports, ApplyReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string netns_;
  absl::Mutex mu_;
  std::unique_ptr<netns::NlSocket> sock_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet::ocs
