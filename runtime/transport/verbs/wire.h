// Data-plane wire format of the verbs transport: the fixed 48-byte header at
// the front of every SEND. Pure encode/decode functions (little-endian on the
// wire); callable from any thread.
//
// Messages (see verbs_connection.h for the protocol):
//   EAGER  tag, length, id = send id; `length` payload bytes follow the header.
//   RTS    tag, length, id = send id; the payload stays at the sender.
//   CTS    id = send id, addr/rkey = target buffer, cookie = receive cookie
//          (the immediate value of the RDMA WRITE WITH IMMEDIATE that follows).
//   NACK   id = send id, length = receive capacity, reason = why it failed.
//   CREDIT nothing but the piggybacked credits.
// Every header carries `credits`: receive buffers the sender of the header has
// re-posted since it last said so (the peer may send that many more messages).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace mixnet::transport::verbs {

enum class MsgType : uint8_t {
  kEager = 1,
  kRts = 2,
  kCts = 3,
  kNack = 4,
  kCredit = 5,
};

// Why a NACK was sent.
enum class NackReason : uint8_t {
  kTooSmall = 1,       // the matching receive is smaller than the message
  kReceiverError = 2,  // the receiver could not register its buffer
};

inline constexpr uint16_t kWireMagic = 0x564D;  // "MV"
inline constexpr size_t kWireHeaderBytes = 48;

struct WireHeader {
  MsgType type = MsgType::kCredit;
  uint8_t reason = 0;  // NackReason for kNack
  uint32_t credits = 0;
  uint64_t tag = 0;
  uint64_t length = 0;
  uint64_t id = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t cookie = 0;
};

// Messages that consume one of the receiver's credits. CREDIT messages do not:
// the receiver keeps spare receive buffers for them (see verbs_connection.h).
inline bool ConsumesCredit(MsgType t) { return t != MsgType::kCredit; }

const char* MsgTypeName(MsgType t);

// Writes kWireHeaderBytes bytes at `out`.
void EncodeHeader(const WireHeader& h, uint8_t* out);
// Parses the header at the front of a received buffer of `n` bytes and checks
// it against `n` (magic, type, payload length). DataLoss on garbage.
absl::StatusOr<WireHeader> DecodeHeader(const uint8_t* p, size_t n);

// Little-endian helpers shared with address.cc.
void PutLe(uint8_t* p, uint64_t v, int bytes);
uint64_t GetLe(const uint8_t* p, int bytes);

}  // namespace mixnet::transport::verbs
