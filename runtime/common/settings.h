// Every MIXNET_* environment variable the runtime reads, in one place.
// The table below is the single source of truth: Settings fields, defaults,
// parsing and the README list all come from it. Read once per process
// (thread-safe static init); tests build their own with Settings::FromEnv.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mixnet {

// X(type, field, ENV_NAME, default, description)
#define MIXNET_SETTINGS_TABLE(X)                                                                 \
  X(std::string, log_level, "MIXNET_LOG_LEVEL", "info",                                          \
    "spdlog level: trace, debug, info, warn, error, off")                                        \
  X(std::string, transport, "MIXNET_TRANSPORT", "tcp", "data-plane transport: tcp or verbs")     \
  X(std::string, socket_ifname, "MIXNET_SOCKET_IFNAME", "",                                      \
    "comma list of interfaces for TCP (like NCCL_SOCKET_IFNAME): prefix match, ^ excludes, "     \
    "= exact; empty picks the spec's NICs or lo")                                                \
  X(int64_t, timeout_ms, "MIXNET_TIMEOUT_MS", 30000,                                             \
    "deadline of every data-plane wait; a peer silent this long is declared lost")               \
  X(int64_t, connect_timeout_ms, "MIXNET_CONNECT_TIMEOUT_MS", 60000,                             \
    "deadline for rendezvous and connection set-up")                                             \
  X(int64_t, sockets_per_path, "MIXNET_SOCKETS_PER_PATH", 2,                                     \
    "TCP sockets per path; chunks are striped across them")                                      \
  X(int64_t, chunk_bytes, "MIXNET_CHUNK_BYTES", 256 << 10, "striping unit across sockets")       \
  X(int64_t, socket_buffer_bytes, "MIXNET_SOCKET_BUFFER_BYTES", 4 << 20,                         \
    "SO_SNDBUF/SO_RCVBUF of data sockets (0 keeps the kernel's autotuning)")                     \
  X(int64_t, eager_bytes, "MIXNET_EAGER_BYTES", 64 << 10,                                        \
    "TCP messages up to this size are sent eagerly; larger ones wait for the receiver")          \
  X(int64_t, local_eager_bytes, "MIXNET_LOCAL_EAGER_BYTES", 16 << 10,                            \
    "intra-host transport: messages up to this size travel in the socket; larger ones are "      \
    "copied once, straight from the sender's memory")                                            \
  X(std::string, intra_host, "MIXNET_INTRA_HOST", "local",                                       \
    "path between ranks on one host: local (Unix socket; large messages copied once, straight "  \
    "from the sender's memory) or nic (the data-plane transport over the host's NIC)")           \
  X(std::string, router, "MIXNET_ROUTER", "v2",                                                  \
    "routing of a worker's collectives: v2 (split each peer's bytes over its circuits and EPS "  \
    "by the weights of the controller's plan, when the controller sends them) or v1 (circuits "  \
    "if any, else EPS)")                                                                         \
  X(int64_t, relay_chunk_bytes, "MIXNET_RELAY_CHUNK_BYTES", 256 << 10,                           \
    "router v2 relays: the unit a relay rank receives and forwards (store and forward per "      \
    "chunk)")                                                                                    \
  X(int64_t, relay_buffer_bytes, "MIXNET_RELAY_BUFFER_BYTES", 16 << 20,                          \
    "router v2 relays: the most a rank holds for forwarding in one collective (at least one "    \
    "chunk per stream it forwards); the origin waits when it is full")                           \
  X(int64_t, suspended_paths, "MIXNET_SUSPENDED_PATHS", 256,                                     \
    "collectives: direct (circuit) connections a rank keeps open, suspended, while their "       \
    "circuits are out of the topology, so a circuit that comes back reuses its connection; the " \
    "least recently suspended beyond this many are closed; 0: close at once")                    \
  X(int64_t, pull_chunk_bytes, "MIXNET_PULL_CHUNK_BYTES", 0,                                     \
    "collectives: a receiver balances a peer's bytes over the pair's paths itself, asking "      \
    "each path for pieces of this size (e.g. 131072) as earlier ones arrive and moving the "     \
    "rest of a lagging path's share to a faster one; 0 (off): each path carries its share")      \
  X(std::string, progress_cpus, "MIXNET_PROGRESS_CPUS", "auto",                                  \
    "CPUs for the transport progress threads: auto (the process's allowed CPUs), a list like "   \
    "0,2,8-11, or none (left to the scheduler); device k of the i-th of L ranks on a machine "   \
    "gets entry (i + k*L) mod n; in the NCCL plugin only a list pins (NIC k: entry k mod n)")    \
  X(int64_t, progress_spin_us, "MIXNET_PROGRESS_SPIN_US", 500,                                   \
    "TCP/local progress threads poll (yielding the CPU) this long after their last event "       \
    "before sleeping in epoll_wait; 0: always sleep")                                            \
  X(std::string, ib_device, "MIXNET_IB_DEVICE", "",                                              \
    "verbs device name (an override); empty: the adapter behind the NIC's interface "            \
    "(sysfs), else the first")                                                                   \
  X(int64_t, ib_port, "MIXNET_IB_PORT", 0,                                                       \
    "verbs port number; 0: the port behind the NIC's interface, else 1")                         \
  X(int64_t, ib_gid_index, "MIXNET_IB_GID_INDEX", -1,                                            \
    "verbs GID index; -1: auto (RoCE: the v2 entry holding the NIC's IPv4 address, else the "    \
    "first RoCE v2 IPv4 entry; InfiniBand: 0)")                                                  \
  X(int64_t, ib_tc, "MIXNET_IB_TC", 0,                                                           \
    "verbs: traffic class (GRH TClass, DSCP << 2) of RoCE/global queue pairs, 0..255; NCCL's "   \
    "per-communicator class wins when it passes one")                                            \
  X(int64_t, ib_sl, "MIXNET_IB_SL", 0, "verbs: InfiniBand service level of queue pairs, 0..15")  \
  X(int64_t, control_tc, "MIXNET_CONTROL_TC", -1,                                                \
    "TCP: traffic class (IPv4 TOS byte, DSCP << 2) of each connection's control socket (the "    \
    "rendezvous go-ahead, announcements, small messages), 0..255, so that switches with a "      \
    "strict-priority queue for it pass them ahead of bulk data (as NCCL_IB_FIFO_TC); -1: the "   \
    "data's class. Only with two or more sockets per connection")                                \
  X(int64_t, ib_unexpected_bytes, "MIXNET_IB_UNEXPECTED_BYTES", 4 << 20,                         \
    "verbs: eager payload (messages up to 8144 bytes) a connection copies for receives not yet " \
    "posted; beyond it they wait in their receive slots and the sender waits for credits. "      \
    "Larger messages stay at the sender until their receive is posted")                          \
  X(int64_t, ib_reg_cache_bytes, "MIXNET_IB_REG_CACHE_BYTES", int64_t{1} << 30,                  \
    "verbs: bytes of idle memory registrations kept for reuse, least recently used dropped "     \
    "first; only on-demand-paging (ODP) registrations are kept, pinned ones end with their "     \
    "last request (a freed and reused address would keep stale pages)")                          \
  X(std::string, cluster_spec, "MIXNET_CLUSTER_SPEC", "", "path of the cluster spec YAML")       \
  X(std::string, host, "MIXNET_HOST", "", "this process's host name in the cluster spec")        \
  X(std::string, store, "MIXNET_STORE", "",                                                      \
    "rendezvous store of a job a launcher started (file:DIR or tcp://HOST:PORT); empty: a TCP "  \
    "store on the launcher's master host (launcher_env.h)")                                      \
  X(int64_t, store_port, "MIXNET_STORE_PORT", 0,                                                 \
    "port of that TCP store; 0: MASTER_PORT + 1, else 29501")                                    \
  X(int64_t, nccl_max_recvs, "MIXNET_NCCL_MAX_RECVS", 8,                                         \
    "NCCL plugin: largest n of a grouped irecv reported to NCCL (1..8)")                         \
  X(int64_t, nccl_speed_mbps, "MIXNET_NCCL_SPEED_MBPS", 0,                                       \
    "NCCL plugin: NIC speed reported to NCCL in Mbit/s; 0 reads sysfs (100000 if unknown)")      \
  X(int64_t, nccl_max_requests, "MIXNET_NCCL_MAX_REQUESTS", 256,                                 \
    "NCCL plugin: requests in flight per comm before isend/irecv ask NCCL to retry (>= 32)")     \
  X(int64_t, nccl_split_min_bytes, "MIXNET_NCCL_SPLIT_MIN_BYTES", 64 << 10,                      \
    "NCCL plugin, router v2 multipath: the smallest part split over a circuit and EPS "          \
    "(4096..2^30); smaller parts stay whole on the circuit")                                     \
  X(std::string, nccl_gpu_direct, "MIXNET_NCCL_GPU_DIRECT", "auto",                              \
    "NCCL plugin over verbs: GPUDirect RDMA (the NIC reads and writes GPU memory): auto "        \
    "(offer GPU pointers when the probe finds dma-buf or peer memory, else host memory), on "    \
    "(the same, but init fails with the reason when it finds neither), off (host memory)")       \
  X(std::string, cuda_driver, "MIXNET_CUDA_DRIVER", "libcuda.so.1",                              \
    "NCCL plugin: the CUDA driver library its GPUDirect probe opens (dlopen)")                   \
  X(std::string, nccl_static_demand, "MIXNET_NCCL_STATIC_DEMAND", "",                            \
    "NCCL plugin without a controller: JSON demand matrix giving router v2's multipath split")   \
  X(int64_t, nccl_report_ms, "MIXNET_NCCL_REPORT_MS", 1000,                                      \
    "NCCL plugin with a controller: period of its traffic reports (bytes per peer host); 0: "    \
    "none")                                                                                      \
  X(int64_t, nccl_warm_paths_ms, "MIXNET_NCCL_WARM_PATHS_MS", 120000,                            \
    "NCCL plugin with a controller: once it has a send comm to every other host of its region, " \
    "it asks for the controller's warm-up sweep (WarmPaths) and waits this long for its end on " \
    "a thread of its own; 0: it does not ask")                                                   \
  X(int64_t, path_stall_ms, "MIXNET_PATH_STALL_MS", 1000,                                        \
    "a direct (OCS) path whose data or keepalives go unanswered this long is dropped; its "      \
    "bytes are re-sent over EPS")                                                                \
  X(std::string, controller, "MIXNET_CONTROLLER", "",                                            \
    "controller address (host:port or unix:/path) the worker agent registers with; empty: none") \
  X(std::string, controller_tls_ca, "MIXNET_CONTROLLER_TLS_CA", "",                              \
    "the CA (PEM) that signs the controller's certificate; any of the TLS variables: TLS")       \
  X(std::string, controller_tls_cert, "MIXNET_CONTROLLER_TLS_CERT", "",                          \
    "this worker's client certificate (PEM) for the controller's mTLS; it names the host")       \
  X(std::string, controller_tls_key, "MIXNET_CONTROLLER_TLS_KEY", "",                            \
    "the private key (PEM) of MIXNET_CONTROLLER_TLS_CERT")                                       \
  X(std::string, controller_tls_server_name, "MIXNET_CONTROLLER_TLS_SERVER_NAME", "",            \
    "the name checked against the controller's certificate instead of the address's host")       \
  X(int64_t, lock_checks, "MIXNET_LOCK_CHECKS", 0,                                               \
    "1: abseil's lock-order (deadlock) checks on every Mutex, as Debian's abseil build has "     \
    "them; 0: off from the first transport device on (abseil's release behaviour)")

struct Settings {
#define MIXNET_SETTINGS_FIELD_(type, field, env, def, doc) type field = def;
  MIXNET_SETTINGS_TABLE(MIXNET_SETTINGS_FIELD_)
#undef MIXNET_SETTINGS_FIELD_

  // Reads every variable through `getenv_fn` (std::getenv by default). A value
  // that does not parse is an InvalidArgument naming the variable.
  static absl::StatusOr<Settings> FromEnv(
      const std::function<std::optional<std::string>(const char*)>& getenv_fn = {});

  struct Doc {
    std::string name, default_value, description;
  };
  static std::vector<Doc> Documentation();
};

// Process-wide settings, read from the environment on first use. A malformed
// variable is logged and its default used.
const Settings& GetSettings();

}  // namespace mixnet
