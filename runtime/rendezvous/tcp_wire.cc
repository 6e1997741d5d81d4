// Encoding and validation of TCP store frames (see tcp_wire.h). Any thread.
#include "runtime/rendezvous/tcp_wire.h"

#include "absl/strings/str_cat.h"
#include "runtime/rendezvous/store.h"

namespace mixnet::rendezvous::internal {
namespace {

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

std::string Header(uint8_t op_or_code, uint32_t len1, uint32_t len2, int64_t arg) {
  std::string h(kWireHeaderBytes, '\0');
  PutU32(h.data(), kWireMagic);
  h[4] = static_cast<char>(op_or_code);
  PutU32(h.data() + 8, len1);
  PutU32(h.data() + 12, len2);
  PutU64(h.data() + 16, static_cast<uint64_t>(arg));
  return h;
}

absl::Status CheckCommon(const char* p) {
  uint32_t magic = GetU32(p);
  if (magic != kWireMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad frame magic 0x", absl::Hex(magic), " (not a MixNet tcp store peer?)"));
  }
  if (p[5] != 0 || p[6] != 0 || p[7] != 0) {
    return absl::InvalidArgumentError("bad frame: reserved bytes are not zero");
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeRequestPrefix(WireOp op, absl::string_view key, size_t value_len, int64_t arg) {
  std::string out = Header(static_cast<uint8_t>(op), static_cast<uint32_t>(key.size()),
                           static_cast<uint32_t>(value_len), arg);
  out.append(key.data(), key.size());
  return out;
}

std::string EncodeResponse(absl::StatusCode code, absl::string_view payload, int64_t arg) {
  if (code != absl::StatusCode::kOk && payload.size() > kMaxErrorMessageBytes) {
    payload = payload.substr(0, kMaxErrorMessageBytes);
  }
  std::string out =
      Header(static_cast<uint8_t>(code), static_cast<uint32_t>(payload.size()), 0, arg);
  out.append(payload.data(), payload.size());
  return out;
}

absl::Status DecodeRequestHeader(const char* p, RequestHeader* out) {
  if (absl::Status s = CheckCommon(p); !s.ok()) return s;
  uint8_t op = static_cast<uint8_t>(p[4]);
  if (op < static_cast<uint8_t>(WireOp::kSet) || op > static_cast<uint8_t>(WireOp::kAdd)) {
    return absl::InvalidArgumentError(absl::StrCat("bad request: unknown op ", op));
  }
  out->op = static_cast<WireOp>(op);
  out->key_len = GetU32(p + 8);
  out->value_len = GetU32(p + 12);
  out->arg = static_cast<int64_t>(GetU64(p + 16));
  if (out->key_len == 0 || out->key_len > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad request: key length ", out->key_len, " (must be 1..", kMaxKeyBytes, ")"));
  }
  if (out->value_len > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad request: value length ", out->value_len, " exceeds ", kMaxValueBytes));
  }
  if (out->op != WireOp::kSet && out->value_len != 0) {
    return absl::InvalidArgumentError("bad request: Get/Add carry no value");
  }
  return absl::OkStatus();
}

absl::Status DecodeResponseHeader(const char* p, ResponseHeader* out) {
  if (absl::Status s = CheckCommon(p); !s.ok()) return s;
  uint8_t code = static_cast<uint8_t>(p[4]);
  if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(absl::StrCat("bad response: unknown status code ", code));
  }
  out->code = static_cast<absl::StatusCode>(code);
  out->payload_len = GetU32(p + 8);
  out->arg = static_cast<int64_t>(GetU64(p + 16));
  size_t limit = out->code == absl::StatusCode::kOk ? kMaxValueBytes : kMaxErrorMessageBytes;
  if (out->payload_len > limit || GetU32(p + 12) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad response: payload length ", out->payload_len, " exceeds ", limit));
  }
  return absl::OkStatus();
}

}  // namespace mixnet::rendezvous::internal
