// Encode/decode of the verbs data-plane header (see wire.h). Pure; any thread.
#include "runtime/transport/verbs/wire.h"

#include "absl/strings/str_cat.h"

namespace mixnet::transport::verbs {

void PutLe(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

const char* MsgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kEager:
      return "EAGER";
    case MsgType::kRts:
      return "RTS";
    case MsgType::kCts:
      return "CTS";
    case MsgType::kNack:
      return "NACK";
    case MsgType::kCredit:
      return "CREDIT";
  }
  return "?";
}

void EncodeHeader(const WireHeader& h, uint8_t* out) {
  PutLe(out + 0, kWireMagic, 2);
  out[2] = static_cast<uint8_t>(h.type);
  out[3] = h.reason;
  PutLe(out + 4, h.credits, 4);
  PutLe(out + 8, h.tag, 8);
  PutLe(out + 16, h.length, 8);
  PutLe(out + 24, h.id, 8);
  PutLe(out + 32, h.addr, 8);
  PutLe(out + 40, h.rkey, 4);
  PutLe(out + 44, h.cookie, 4);
}

absl::StatusOr<WireHeader> DecodeHeader(const uint8_t* p, size_t n) {
  if (n < kWireHeaderBytes) {
    return absl::DataLossError(absl::StrCat("message of ", n, " bytes is shorter than the ",
                                            kWireHeaderBytes, "-byte header"));
  }
  if (GetLe(p, 2) != kWireMagic) {
    return absl::DataLossError(absl::StrCat("bad header magic 0x", absl::Hex(GetLe(p, 2))));
  }
  WireHeader h;
  uint8_t type = p[2];
  if (type < static_cast<uint8_t>(MsgType::kEager) ||
      type > static_cast<uint8_t>(MsgType::kCredit)) {
    return absl::DataLossError(absl::StrCat("unknown message type ", type));
  }
  h.type = static_cast<MsgType>(type);
  h.reason = p[3];
  h.credits = static_cast<uint32_t>(GetLe(p + 4, 4));
  h.tag = GetLe(p + 8, 8);
  h.length = GetLe(p + 16, 8);
  h.id = GetLe(p + 24, 8);
  h.addr = GetLe(p + 32, 8);
  h.rkey = static_cast<uint32_t>(GetLe(p + 40, 4));
  h.cookie = static_cast<uint32_t>(GetLe(p + 44, 4));
  const size_t payload = n - kWireHeaderBytes;
  const size_t expected = h.type == MsgType::kEager ? h.length : 0;
  if (payload != expected) {
    return absl::DataLossError(absl::StrCat(MsgTypeName(h.type), " message carries ", payload,
                                            " payload bytes, expected ", expected));
  }
  return h;
}

}  // namespace mixnet::transport::verbs
