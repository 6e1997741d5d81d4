// Named network namespaces, the way `ip netns` keeps them: a file under
// /var/run/netns bind-mounted onto a namespace, so it outlives the process
// that created it and `ip netns exec` / `ip -n` can find it.
//
// Everything here is usable from any thread. Functions that must act inside a
// namespace (create one, open a socket in one) do it on a short-lived helper
// thread that calls setns(2) and exits, so the caller's thread never changes
// namespace. Sockets created there stay bound to that namespace for life.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mixnet::netns {

// "/var/run/netns".
inline constexpr char kNetnsRunDir[] = "/var/run/netns";

// True when `name` can be a namespace name: 1..200 chars of [A-Za-z0-9_.-],
// not "." or "..".
bool IsValidNamespaceName(absl::string_view name);

// "/var/run/netns/<name>".
std::string NamespacePath(absl::string_view name);

// True when the calling process may create namespaces and links
// (effective uid 0; CAP_SYS_ADMIN + CAP_NET_ADMIN in practice).
bool HavePrivileges();

// Creates a new, empty network namespace named `name`. AlreadyExists when
// the name is taken; PermissionDenied without root.
absl::Status CreateNamespace(absl::string_view name);

// Removes the name (unmount + unlink). The namespace itself dies when the last
// process or socket inside it is gone. NotFound counts as success.
absl::Status DeleteNamespace(absl::string_view name);

// Names under /var/run/netns starting with `prefix` (all names when empty),
// sorted.
absl::StatusOr<std::vector<std::string>> ListNamespaces(absl::string_view prefix = {});

bool NamespaceExists(absl::string_view name);

// Opens /var/run/netns/<name> (O_RDONLY|O_CLOEXEC); the caller closes the fd.
absl::StatusOr<int> OpenNamespaceFd(absl::string_view name);

// Runs `fn` on a new thread that first entered namespace `name` (setns), and
// waits for it. Whatever `fn` creates there (sockets, netlink sockets) stays
// in that namespace. An empty name runs `fn` in the caller's namespace (still
// on a helper thread).
absl::Status RunInNamespace(absl::string_view name, const std::function<absl::Status()>& fn);

// Writes `value` to /proc/sys/<path> inside namespace `name`, e.g.
// SetSysctl("ns", "net/ipv4/conf/all/rp_filter", "0"). A path, not a dotted key,
// so interface names containing dots work.
absl::Status SetSysctl(absl::string_view name, absl::string_view path, absl::string_view value);
// Several writes in one helper thread; stops at the first failure.
absl::Status SetSysctls(absl::string_view name,
                        const std::vector<std::pair<std::string, std::string>>& path_values);
absl::StatusOr<std::string> GetSysctl(absl::string_view name, absl::string_view path);

}  // namespace mixnet::netns
