// What verbs endpoints tell each other: the Device::address() blob (where the
// TCP bootstrap listener is, plus the port's LID/GID for messages and checks)
// and the fixed-size handshake message exchanged over that TCP socket when a
// Connection is set up (QP number, PSN, LID, GID, MTU, receive window).
// Pure encode/decode; callable from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace mixnet::transport::verbs {

using Gid = std::array<uint8_t, 16>;

// "fe80:0000:...:0001" (8 groups of 4 hex digits).
std::string GidToString(const Gid& gid);
absl::StatusOr<Gid> GidFromString(absl::string_view text);

// Device::address(): "verbs1|<ipv4>|<tcp port>|<device>|<ib port>|<lid>|<gid>".
struct VerbsAddress {
  std::string ip;
  uint16_t tcp_port = 0;
  std::string device;
  uint8_t ib_port = 1;
  uint16_t lid = 0;
  Gid gid{};

  std::string Encode() const;
  // InvalidArgument naming the bad field.
  static absl::StatusOr<VerbsAddress> Decode(absl::string_view blob);
  std::string ToString() const;  // "mlx5_0:1 (bootstrap 10.0.0.1:4711)"
};

// One side's queue-pair description, sent during connection set-up.
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // 24 bits
  uint16_t lid = 0;
  uint8_t mtu = 0;         // enum ibv_mtu
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  Gid gid{};
  uint32_t recv_window = 0;  // credits the peer starts with
  uint32_t slot_bytes = 0;   // size of each pre-posted receive buffer
  // Its receives may be GPU memory: send it every message with a payload by
  // rendezvous (ConnectOptions::device_receives). A flag bit in the
  // handshake; peers from before it send zero there (host receives).
  bool device_receives = false;
  std::string name;  // "mlx5_0:1" (at most 47 bytes are sent)
};

inline constexpr uint32_t kHandshakeMagic = 0x4D585642u;  // "MXVB"
inline constexpr uint32_t kHandshakeVersion = 1;
inline constexpr size_t kHandshakeBytes = 128;

// Status values of a handshake reply.
inline constexpr uint32_t kHandshakeOk = 0;
inline constexpr uint32_t kHandshakeRefused = 1;

struct Handshake {
  uint64_t connection_id = 0;
  uint32_t status = kHandshakeOk;
  QpInfo qp;

  // Exactly kHandshakeBytes bytes.
  std::string Encode() const;
  // DataLoss on a bad magic, version or size.
  static absl::StatusOr<Handshake> Decode(absl::string_view bytes);
};

// Bytes exchanged on the bootstrap socket after the handshake.
inline constexpr char kReadyByte = 'R';  // both QPs are ready to receive
inline constexpr char kByeByte = 'B';    // orderly close of the connection

}  // namespace mixnet::transport::verbs
