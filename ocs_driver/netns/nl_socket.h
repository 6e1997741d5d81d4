// A libnl-route-3 rtnetlink socket bound to one network namespace, plus the
// small RAII and error helpers the netns OCS backend and the emulated fabric
// share. A socket is created inside its namespace on a helper thread and then
// used from whichever thread owns it (one at a time: not thread-safe).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct nl_sock;
struct nl_cache;
struct rtnl_link;
struct rtnl_qdisc;
struct rtnl_class;
struct rtnl_cls;
struct rtnl_act;
struct rtnl_addr;
struct nl_addr;
struct nl_msg;
struct rtnl_route;
struct rtnl_rule;

namespace mixnet::netns {

// unique_ptr deleters for libnl objects.
struct NlDeleter {
  void operator()(nl_cache* p) const;
  void operator()(rtnl_link* p) const;
  void operator()(rtnl_qdisc* p) const;
  void operator()(rtnl_class* p) const;
  void operator()(rtnl_cls* p) const;
  void operator()(rtnl_act* p) const;
  void operator()(rtnl_addr* p) const;
  void operator()(nl_addr* p) const;
  void operator()(nl_msg* p) const;
  void operator()(rtnl_route* p) const;
  void operator()(rtnl_rule* p) const;
};
template <typename T>
using NlPtr = std::unique_ptr<T, NlDeleter>;

class NlSocket {
 public:
  // A NETLINK_ROUTE socket inside namespace `netns` (the caller's namespace
  // when empty), with extended acks enabled so kernel messages reach errors.
  static absl::StatusOr<std::unique_ptr<NlSocket>> Open(absl::string_view netns);
  ~NlSocket();
  NlSocket(const NlSocket&) = delete;
  NlSocket& operator=(const NlSocket&) = delete;

  nl_sock* get() const { return sock_; }
  const std::string& netns() const { return netns_; }
  std::string NetnsLabel() const;  // "namespace X" or "current namespace"

  // Turns a libnl return code (< 0) into a status naming `what` (a port, a
  // link), the libnl call and the kernel's errno and extended-ack message
  // when the kernel sent one. OK for rc >= 0.
  absl::Status Error(int rc, absl::string_view what, absl::string_view call);

  // The interface index of `ifname` in this namespace; NotFound naming it.
  absl::StatusOr<int> IfIndex(absl::string_view ifname);

  // A fresh dump of links in this namespace.
  absl::StatusOr<NlPtr<nl_cache>> LinkCache();

  // One request of a batch: a message from libnl's rtnl_*_build_*_request
  // and what to name in an error (e.g. "port p3 -> p7", "rtnl_cls_add(...)").
  struct Request {
    NlPtr<nl_msg> msg;
    std::string what;
    std::string call;
  };
  // Sends all requests in as few sendmsg calls as possible (the kernel runs
  // them in order; one failing does not stop the others) and waits for every
  // acknowledgement. `tolerate(errno)` marks kernel errors that count as
  // success (e.g. ENOENT for a delete). Returns the first failure, naming its
  // request, with the number of other failures. With `results`, it also gets
  // one status per request from its acknowledgement (requests that were not
  // acknowledged, because sending or receiving failed, get that I/O error).
  absl::Status SendBatch(std::vector<Request>& requests, bool (*tolerate)(int err) = nullptr,
                         std::vector<absl::Status>* results = nullptr);

  // Called from libnl's error callback: remembers the last kernel error.
  void RecordKernelError(int err, std::string extack);

 private:
  NlSocket(nl_sock* sock, std::string netns) : sock_(sock), netns_(std::move(netns)) {}

  nl_sock* sock_;
  std::string netns_;
  int last_errno_ = 0;
  std::string last_extack_;
};

}  // namespace mixnet::netns
