// Rendezvous: a small key/value store ranks use to exchange addresses.
// FileStore (a shared directory, one host) and TcpStore (served by one rank,
// many hosts). Keys are written once; Get waits until the key exists or the
// timeout passes (DeadlineExceeded naming the key). Thread-safe.
//
// Semantics shared by every store: keys are non-empty byte strings of at most
// kMaxKeyBytes; values are byte strings (NULs allowed) of at most
// kMaxValueBytes; Set overwrites; Add keeps its counter as a decimal string
// that Get returns. Implementations: file_store.cc, tcp_store_{server,client}.cc,
// store.cc (PrefixStore, OpenStore).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mixnet::rendezvous {

// Limits enforced by every store (InvalidArgument beyond them). The TCP server
// also rejects frames beyond them before allocating anything.
inline constexpr size_t kMaxKeyBytes = 64 * 1024;
inline constexpr size_t kMaxValueBytes = 64 * 1024 * 1024;

class Store {
 public:
  virtual ~Store() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
  // Adds `delta` to an integer counter (created at 0) and returns the new value.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
};

// Keys become files under `dir` (created if missing), written atomically.
absl::StatusOr<std::unique_ptr<Store>> CreateFileStore(const std::string& dir);

// Connects to a TcpStoreServer at host:port, retrying until `timeout`.
// Failing that: Unavailable naming host:port and the last connect error
// (InvalidArgument when the host does not resolve). The store is thread-safe:
// concurrent calls use separate pooled connections, so a waiting Get does not
// block other threads. I/O timeout: max(timeout, 1s) without progress (a Get's
// reply may take its own timeout on top). A lost server is Unavailable, a
// silent one DeadlineExceeded; both name host:port. No automatic retries after
// the first connection (a dead server fails each call at once).
absl::StatusOr<std::unique_ptr<Store>> ConnectTcpStore(const std::string& host, int port,
                                                       absl::Duration timeout);

// Serves a store on `bind_address:port` (port 0 picks one) from a background thread
// until destroyed.
class TcpStoreServer {
 public:
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& bind_address,
                                                               int port);
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
};

// Prefixes every key, so several jobs (or communicators) can share one store.
// Key "k" becomes "<prefix>/k" in `base`, which is not owned and must outlive it.
std::unique_ptr<Store> PrefixStore(std::string prefix, Store* base);

// Parses "file:DIR" or "tcp://HOST:PORT" (MIXNET-style URL). For tcp, the rank
// given `serve` true starts the server in-process and keeps it alive in the
// returned store.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url, bool serve,
                                                 absl::Duration timeout);

}  // namespace mixnet::rendezvous
