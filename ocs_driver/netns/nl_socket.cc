// rtnetlink socket per namespace and libnl error translation (see nl_socket.h).
#include "ocs_driver/netns/nl_socket.h"

#include <linux/netlink.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/action.h>
#include <netlink/route/addr.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <netlink/socket.h>
#include <sys/socket.h>

#include <sys/time.h>

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/status.h"

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif

namespace mixnet::netns {

void NlDeleter::operator()(nl_cache* p) const { nl_cache_free(p); }
void NlDeleter::operator()(rtnl_link* p) const { rtnl_link_put(p); }
void NlDeleter::operator()(rtnl_qdisc* p) const { rtnl_qdisc_put(p); }
void NlDeleter::operator()(rtnl_class* p) const { rtnl_class_put(p); }
void NlDeleter::operator()(rtnl_cls* p) const { rtnl_cls_put(p); }
void NlDeleter::operator()(rtnl_act* p) const { rtnl_act_put(p); }
void NlDeleter::operator()(rtnl_addr* p) const { rtnl_addr_put(p); }
void NlDeleter::operator()(nl_addr* p) const { nl_addr_put(p); }
void NlDeleter::operator()(nl_msg* p) const { nlmsg_free(p); }
void NlDeleter::operator()(rtnl_route* p) const { rtnl_route_put(p); }
void NlDeleter::operator()(rtnl_rule* p) const { rtnl_rule_put(p); }

namespace {

// Extracts NLMSGERR_ATTR_MSG from an error message's trailing TLVs, if any.
std::string ExtAckMessage(const nlmsghdr* nlh, const nlmsgerr* e) {
  if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS)) return "";
  size_t offset = sizeof(nlmsghdr) + sizeof(nlmsgerr);
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) offset += e->msg.nlmsg_len - sizeof(nlmsghdr);
  const char* base = reinterpret_cast<const char*>(nlh);
  while (offset + sizeof(nlattr) <= nlh->nlmsg_len) {
    const auto* a = reinterpret_cast<const nlattr*>(base + offset);
    if (a->nla_len < sizeof(nlattr) || offset + a->nla_len > nlh->nlmsg_len) break;
    if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
      const char* s = base + offset + NLA_HDRLEN;
      return std::string(s, strnlen(s, a->nla_len - NLA_HDRLEN));
    }
    offset += NLA_ALIGN(a->nla_len);
  }
  return "";
}

int ErrorCallback(sockaddr_nl*, nlmsgerr* e, void* arg) {
  auto* self = static_cast<NlSocket*>(arg);
  const nlmsghdr* nlh =
      reinterpret_cast<const nlmsghdr*>(reinterpret_cast<char*>(e) - NLMSG_HDRLEN);
  self->RecordKernelError(-e->error, ExtAckMessage(nlh, e));
  return NL_STOP;  // libnl then returns the error converted to -NLE_*.
}

// Acknowledgement bookkeeping of one SendBatch.
struct BatchState {
  std::map<uint32_t, size_t> index_by_seq;
  std::vector<bool> done;
  std::vector<int> err;
  std::vector<std::string> extack;
  size_t pending = 0;

  void Complete(uint32_t seq, int error, std::string ack_msg) {
    auto it = index_by_seq.find(seq);
    if (it == index_by_seq.end() || done[it->second]) return;
    done[it->second] = true;
    err[it->second] = error;
    extack[it->second] = std::move(ack_msg);
    --pending;
  }
};

int BatchAck(nl_msg* msg, void* arg) {
  static_cast<BatchState*>(arg)->Complete(nlmsg_hdr(msg)->nlmsg_seq, 0, "");
  return NL_OK;
}

int BatchError(sockaddr_nl*, nlmsgerr* e, void* arg) {
  const nlmsghdr* nlh =
      reinterpret_cast<const nlmsghdr*>(reinterpret_cast<char*>(e) - NLMSG_HDRLEN);
  static_cast<BatchState*>(arg)->Complete(nlh->nlmsg_seq, -e->error, ExtAckMessage(nlh, e));
  return NL_SKIP;  // keep reading the other replies
}

int AcceptAnySeq(nl_msg*, void*) { return NL_OK; }

}  // namespace

absl::StatusOr<std::unique_ptr<NlSocket>> NlSocket::Open(absl::string_view netns) {
  nl_sock* sock = nullptr;
  int rc = 0;
  absl::Status st = RunInNamespace(netns, [&]() -> absl::Status {
    sock = nl_socket_alloc();
    if (sock == nullptr) return absl::ResourceExhaustedError("nl_socket_alloc failed");
    rc = nl_connect(sock, NETLINK_ROUTE);
    return absl::OkStatus();
  });
  if (!st.ok()) {
    if (sock != nullptr) nl_socket_free(sock);
    return st;
  }
  if (rc < 0) {
    nl_socket_free(sock);
    return absl::InternalError(
        absl::StrCat(netns.empty() ? "current namespace" : netns,
                     ": nl_connect(NETLINK_ROUTE) failed: ", nl_geterror(rc)));
  }
  std::unique_ptr<NlSocket> s(new NlSocket(sock, std::string(netns)));
  int one = 1;
  setsockopt(nl_socket_get_fd(sock), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
  nl_socket_set_buffer_size(sock, 1 << 20, 1 << 20);
  timeval tv{10, 0};  // a lost reply must not hang the caller forever
  setsockopt(nl_socket_get_fd(sock), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  nl_cb* cb = nl_socket_get_cb(sock);  // takes a reference
  nl_cb_err(cb, NL_CB_CUSTOM, ErrorCallback, s.get());
  nl_cb_put(cb);
  return s;
}

NlSocket::~NlSocket() { nl_socket_free(sock_); }

std::string NlSocket::NetnsLabel() const {
  return netns_.empty() ? "current namespace" : absl::StrCat("namespace ", netns_);
}

void NlSocket::RecordKernelError(int err, std::string extack) {
  last_errno_ = err;
  last_extack_ = std::move(extack);
}

absl::Status NlSocket::Error(int rc, absl::string_view what, absl::string_view call) {
  if (rc >= 0) return absl::OkStatus();
  std::string msg =
      absl::StrCat(NetnsLabel(), ": ", what, ": ", call, " failed: ", nl_geterror(rc));
  int err = last_errno_;
  if (err != 0) {
    absl::StrAppend(&msg, " (kernel: ", ErrnoText(err), ", errno ", err);
    if (!last_extack_.empty()) absl::StrAppend(&msg, "; ", last_extack_);
    absl::StrAppend(&msg, ")");
  }
  last_errno_ = 0;
  last_extack_.clear();
  switch (-rc) {
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV:
      return absl::NotFoundError(msg);
    case NLE_EXIST:
      return absl::AlreadyExistsError(msg);
    case NLE_PERM:
    case NLE_NOACCESS:
      return absl::PermissionDeniedError(msg);
    case NLE_INVAL:
    case NLE_RANGE:
      return absl::InvalidArgumentError(msg);
    case NLE_OPNOTSUPP:
      return absl::UnimplementedError(msg);
    case NLE_NOMEM:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<NlPtr<nl_cache>> NlSocket::LinkCache() {
  nl_cache* cache = nullptr;
  int rc = rtnl_link_alloc_cache(sock_, AF_UNSPEC, &cache);
  RETURN_IF_ERROR(Error(rc, "links", "rtnl_link_alloc_cache"));
  return NlPtr<nl_cache>(cache);
}

absl::StatusOr<int> NlSocket::IfIndex(absl::string_view ifname) {
  std::string name(ifname);
  rtnl_link* link = nullptr;
  int rc = rtnl_link_get_kernel(sock_, 0, name.c_str(), &link);
  if (rc < 0) {
    last_errno_ = 0;
    last_extack_.clear();
    if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV) {
      return absl::NotFoundError(absl::StrCat(NetnsLabel(), ": no interface named '", ifname, "'"));
    }
    return Error(rc, ifname, "rtnl_link_get_kernel");
  }
  int index = rtnl_link_get_ifindex(link);
  rtnl_link_put(link);
  return index;
}

}  // namespace mixnet::netns

namespace mixnet::netns {

absl::Status NlSocket::SendBatch(std::vector<Request>& requests, bool (*tolerate)(int err),
                                 std::vector<absl::Status>* results) {
  // At most this many requests per sendmsg, so their acknowledgements (each
  // echoing its request) always fit the 1 MiB receive buffer.
  constexpr size_t kChunk = 128;
  BatchState state;
  state.done.assign(requests.size(), false);
  state.err.assign(requests.size(), 0);
  state.extack.assign(requests.size(), "");
  nl_cb* sock_cb = nl_socket_get_cb(sock_);  // takes a reference
  nl_cb* cb = nl_cb_clone(sock_cb);
  nl_cb_put(sock_cb);
  if (cb == nullptr) {
    absl::Status s = absl::ResourceExhaustedError("nl_cb_clone failed");
    if (results != nullptr) results->assign(requests.size(), s);
    return s;
  }
  nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, BatchAck, &state);
  nl_cb_err(cb, NL_CB_CUSTOM, BatchError, &state);
  nl_cb_set(cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, AcceptAnySeq, nullptr);

  absl::Status io;
  std::string buf;
  for (size_t start = 0; start < requests.size() && io.ok(); start += kChunk) {
    const size_t end = std::min(requests.size(), start + kChunk);
    buf.clear();
    for (size_t i = start; i < end; ++i) {
      nl_msg* msg = requests[i].msg.get();
      nl_complete_msg(sock_, msg);  // port id, sequence number, NLM_F_REQUEST | NLM_F_ACK
      nlmsghdr* h = nlmsg_hdr(msg);
      h->nlmsg_flags |= NLM_F_ACK;
      state.index_by_seq[h->nlmsg_seq] = i;
      ++state.pending;
      buf.append(reinterpret_cast<const char*>(h), h->nlmsg_len);
      buf.resize(NLMSG_ALIGN(buf.size()), '\0');
    }
    int rc = nl_sendto(sock_, buf.data(), buf.size());
    if (rc < 0) {
      io = Error(rc, absl::StrCat(end - start, " requests"), "nl_sendto(batch)");
      break;
    }
    while (state.pending > 0) {
      rc = nl_recvmsgs(sock_, cb);
      if (rc < 0) {
        io = Error(rc, absl::StrCat(state.pending, " unacknowledged requests"),
                   "nl_recvmsgs(batch acks)");
        break;
      }
    }
  }
  nl_cb_put(cb);
  last_errno_ = 0;
  last_extack_.clear();

  auto request_error = [&](size_t i) {
    const int err = state.err[i];
    std::string msg = absl::StrCat(NetnsLabel(), ": ", requests[i].what, ": ", requests[i].call,
                                   " failed: ", ErrnoText(err), " (errno ", err);
    if (!state.extack[i].empty()) absl::StrAppend(&msg, "; ", state.extack[i]);
    absl::StrAppend(&msg, ")");
    return absl::Status(ErrnoStatus("", "", err).code(), msg);
  };
  if (results != nullptr) {
    results->assign(requests.size(), absl::OkStatus());
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!state.done[i]) {
        (*results)[i] = io.ok() ? absl::UnknownError("not acknowledged") : io;
      } else if (state.err[i] != 0 && (tolerate == nullptr || !tolerate(state.err[i]))) {
        (*results)[i] = request_error(i);
      }
    }
  }
  RETURN_IF_ERROR(io);

  absl::Status first;
  int failures = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    int err = state.err[i];
    if (err == 0 || (tolerate != nullptr && tolerate(err))) continue;
    if (++failures > 1) continue;
    first = request_error(i);
  }
  if (failures > 1) {
    return absl::Status(first.code(),
                        absl::StrCat(first.message(), " and ", failures - 1, " more failures"));
  }
  return first;
}

}  // namespace mixnet::netns
