// Wire format of the TCP store: length-prefixed binary frames, little-endian.
//
//   request  (24 bytes + key + value):
//     u32 magic "MXRV" | u8 op | 3 x u8 zero | u32 key_len | u32 value_len | i64 arg
//     arg: Get -> timeout in ms (-1 = none), Add -> delta, Set -> 0
//   response (24 bytes + payload):
//     u32 magic "MXRV" | u8 absl::StatusCode | 3 x u8 zero | u32 payload_len | u32 zero
//     | i64 arg
//     payload: Get -> the value, errors -> the message; arg: Add -> the new value
//
// Lengths are checked against kMaxKeyBytes / kMaxValueBytes before anything is
// allocated. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace mixnet::rendezvous::internal {

inline constexpr uint32_t kWireMagic = 0x5652584d;  // "MXRV" in little-endian byte order
inline constexpr size_t kWireHeaderBytes = 24;
// Error messages are cut to this size on the wire.
inline constexpr size_t kMaxErrorMessageBytes = 4096;

enum class WireOp : uint8_t { kSet = 1, kGet = 2, kAdd = 3 };

struct RequestHeader {
  WireOp op = WireOp::kSet;
  uint32_t key_len = 0;
  uint32_t value_len = 0;
  int64_t arg = 0;
};

struct ResponseHeader {
  absl::StatusCode code = absl::StatusCode::kOk;
  uint32_t payload_len = 0;
  int64_t arg = 0;
};

// Header followed by the key (the value is sent separately to avoid a copy).
std::string EncodeRequestPrefix(WireOp op, absl::string_view key, size_t value_len, int64_t arg);
// Header followed by the payload.
std::string EncodeResponse(absl::StatusCode code, absl::string_view payload, int64_t arg);

// Decode kWireHeaderBytes bytes; InvalidArgument on a bad magic, op, code or length.
absl::Status DecodeRequestHeader(const char* p, RequestHeader* out);
absl::Status DecodeResponseHeader(const char* p, ResponseHeader* out);

}  // namespace mixnet::rendezvous::internal
