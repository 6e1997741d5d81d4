// PrefixStore and OpenStore: the store decorators and the URL entry point
// ("file:DIR", "tcp://HOST:PORT"). Runs on the calling thread; the stores
// returned are thread-safe.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "runtime/rendezvous/store.h"
#include "runtime/rendezvous/store_internal.h"
#include "runtime/rendezvous/tcp_socket.h"

namespace mixnet::rendezvous {
namespace {

class PrefixedStore final : public Store {
 public:
  PrefixedStore(std::string prefix, Store* base) : prefix_(std::move(prefix)), base_(base) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    return base_->Set(Full(key), value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    return base_->Get(Full(key), timeout);
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    RETURN_IF_ERROR(internal::CheckKey(key));
    return base_->Add(Full(key), delta);
  }

 private:
  std::string Full(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }

  const std::string prefix_;
  Store* const base_;
};

// The store a serving rank uses: its own server plus a client of it. The client
// is destroyed first.
class ServedStore final : public Store {
 public:
  ServedStore(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<Store> client)
      : server_(std::move(server)), client_(std::move(client)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    return client_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    return client_->Get(key, timeout);
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    return client_->Add(key, delta);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> client_;
};

struct HostAndPort {
  std::string host;
  int port = 0;
};

// "HOST:PORT" or "[IPV6]:PORT".
absl::StatusOr<HostAndPort> ParseHostPort(absl::string_view s, const std::string& url) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("store URL '", url, "': ", why, " (expected tcp://HOST:PORT)"));
  };
  HostAndPort hp;
  absl::string_view port;
  if (absl::StartsWith(s, "[")) {
    size_t close = s.find(']');
    if (close == absl::string_view::npos) return bad("unterminated '['");
    hp.host = std::string(s.substr(1, close - 1));
    if (close + 1 >= s.size() || s[close + 1] != ':') return bad("missing ':PORT'");
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == absl::string_view::npos) return bad("missing ':PORT'");
    hp.host = std::string(s.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) return bad("IPv6 addresses need [brackets]");
    port = s.substr(colon + 1);
  }
  if (hp.host.empty()) return bad("empty host");
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &hp.port) || hp.port > 65535) {
    return bad(absl::StrCat("bad port '", port, "'"));
  }
  return hp;
}

}  // namespace

std::unique_ptr<Store> PrefixStore(std::string prefix, Store* base) {
  return std::make_unique<PrefixedStore>(std::move(prefix), base);
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url, bool serve,
                                                 absl::Duration timeout) {
  if (absl::StartsWith(url, "file:")) {
    absl::string_view dir = absl::string_view(url).substr(5);
    if (absl::StartsWith(dir, "//")) dir.remove_prefix(2);  // file:///abs/dir
    if (dir.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("store URL '", url, "': empty directory (expected file:DIR)"));
    }
    return CreateFileStore(std::string(dir));
  }
  if (absl::StartsWith(url, "tcp://")) {
    ASSIGN_OR_RETURN(HostAndPort hp, ParseHostPort(absl::string_view(url).substr(6), url));
    if (!serve) {
      if (hp.port == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("store URL '", url, "': port 0 is only valid for the serving rank"));
      }
      return ConnectTcpStore(hp.host, hp.port, timeout);
    }
    ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreServer> server,
                     TcpStoreServer::Start(hp.host, hp.port));
    // A wildcard bind address is reached through loopback.
    std::string connect_host = hp.host;
    if (connect_host == "0.0.0.0" || connect_host == "*") connect_host = "127.0.0.1";
    if (connect_host == "::") connect_host = "::1";
    ASSIGN_OR_RETURN(std::unique_ptr<Store> client,
                     ConnectTcpStore(connect_host, server->port(), timeout));
    return std::make_unique<ServedStore>(std::move(server), std::move(client));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("store URL '", url, "': unknown scheme (expected file:DIR or tcp://HOST:PORT)"));
}

}  // namespace mixnet::rendezvous
