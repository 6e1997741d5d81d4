// Encode/decode of the verbs address blob and handshake (see address.h).
// Pure; any thread.
#include "runtime/transport/verbs/address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/transport/verbs/wire.h"

namespace mixnet::transport::verbs {
namespace {

constexpr absl::string_view kAddressPrefix = "verbs1";
constexpr size_t kNameBytes = 48;
constexpr uint32_t kFlagDeviceReceives = 1;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

template <typename T>
absl::StatusOr<T> ParseField(absl::string_view text, absl::string_view field, uint64_t max,
                             absl::string_view blob) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("verbs address '", blob, "': bad ", field, " '", text, "'"));
  }
  return static_cast<T>(v);
}

}  // namespace

std::string GidToString(const Gid& gid) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i > 0) out += ':';
    absl::StrAppend(&out, absl::Hex(gid[i] << 8 | gid[i + 1], absl::kZeroPad4));
  }
  return out;
}

absl::StatusOr<Gid> GidFromString(absl::string_view text) {
  std::vector<absl::string_view> groups = absl::StrSplit(text, ':');
  if (groups.size() != 8) {
    return absl::InvalidArgumentError(absl::StrCat("bad GID '", text, "': expected 8 groups"));
  }
  Gid gid{};
  for (size_t g = 0; g < 8; ++g) {
    if (groups[g].size() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad GID '", text, "': group '", groups[g], "' is not 4 hex digits"));
    }
    int v = 0;
    for (char c : groups[g]) {
      int d = HexValue(c);
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad GID '", text, "': '", std::string(1, c), "' is not a hex digit"));
      }
      v = v * 16 + d;
    }
    gid[2 * g] = static_cast<uint8_t>(v >> 8);
    gid[2 * g + 1] = static_cast<uint8_t>(v & 0xff);
  }
  return gid;
}

std::string VerbsAddress::Encode() const {
  return absl::StrCat(kAddressPrefix, "|", ip, "|", tcp_port, "|", device, "|", ib_port, "|", lid,
                      "|", GidToString(gid));
}

std::string VerbsAddress::ToString() const {
  return absl::StrCat(device, ":", ib_port, " (bootstrap ", ip, ":", tcp_port, ")");
}

absl::StatusOr<VerbsAddress> VerbsAddress::Decode(absl::string_view blob) {
  std::vector<absl::string_view> f = absl::StrSplit(blob, '|');
  if (f.size() != 7 || f[0] != kAddressPrefix) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", blob, "' is not a verbs device address (expected ", kAddressPrefix,
                     "|ip|port|device|ib_port|lid|gid; was it made by another transport?)"));
  }
  VerbsAddress a;
  in_addr tmp{};
  std::string ip(f[1]);
  if (inet_pton(AF_INET, ip.c_str(), &tmp) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("verbs address '", blob, "': bad IPv4 address '", f[1], "'"));
  }
  a.ip = ip;
  auto port = ParseField<uint16_t>(f[2], "TCP port", 65535, blob);
  if (!port.ok()) return port.status();
  if (*port == 0) {
    return absl::InvalidArgumentError(absl::StrCat("verbs address '", blob, "': TCP port 0"));
  }
  a.tcp_port = *port;
  if (f[3].empty()) {
    return absl::InvalidArgumentError(absl::StrCat("verbs address '", blob, "': empty device"));
  }
  a.device = std::string(f[3]);
  auto ib_port = ParseField<uint8_t>(f[4], "IB port", 255, blob);
  if (!ib_port.ok()) return ib_port.status();
  a.ib_port = *ib_port;
  auto lid = ParseField<uint16_t>(f[5], "LID", 65535, blob);
  if (!lid.ok()) return lid.status();
  a.lid = *lid;
  auto gid = GidFromString(f[6]);
  if (!gid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("verbs address '", blob, "': ", gid.status().message()));
  }
  a.gid = *gid;
  return a;
}

// Layout (little-endian): magic 4, version 4, connection_id 8, status 4,
// qpn 4, psn 4, lid 2, mtu 1, link_layer 1, gid 16, recv_window 4,
// slot_bytes 4, name 48 (NUL padded), flags 4 (bit 0: device receives),
// zero padding to 128.
std::string Handshake::Encode() const {
  std::string out(kHandshakeBytes, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  PutLe(p + 0, kHandshakeMagic, 4);
  PutLe(p + 4, kHandshakeVersion, 4);
  PutLe(p + 8, connection_id, 8);
  PutLe(p + 16, status, 4);
  PutLe(p + 20, qp.qpn, 4);
  PutLe(p + 24, qp.psn, 4);
  PutLe(p + 28, qp.lid, 2);
  p[30] = qp.mtu;
  p[31] = qp.link_layer;
  std::memcpy(p + 32, qp.gid.data(), 16);
  PutLe(p + 48, qp.recv_window, 4);
  PutLe(p + 52, qp.slot_bytes, 4);
  std::memcpy(p + 56, qp.name.data(), std::min(qp.name.size(), kNameBytes - 1));
  PutLe(p + 104, qp.device_receives ? kFlagDeviceReceives : 0, 4);
  return out;
}

absl::StatusOr<Handshake> Handshake::Decode(absl::string_view bytes) {
  if (bytes.size() != kHandshakeBytes) {
    return absl::DataLossError(
        absl::StrCat("verbs handshake of ", bytes.size(), " bytes, expected ", kHandshakeBytes));
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (GetLe(p, 4) != kHandshakeMagic) {
    return absl::DataLossError(
        "verbs handshake: bad magic (the peer is not a MixNet verbs device)");
  }
  if (GetLe(p + 4, 4) != kHandshakeVersion) {
    return absl::DataLossError(absl::StrCat("verbs handshake: peer speaks version ",
                                            GetLe(p + 4, 4), ", this build ", kHandshakeVersion));
  }
  Handshake h;
  h.connection_id = GetLe(p + 8, 8);
  h.status = static_cast<uint32_t>(GetLe(p + 16, 4));
  h.qp.qpn = static_cast<uint32_t>(GetLe(p + 20, 4));
  h.qp.psn = static_cast<uint32_t>(GetLe(p + 24, 4));
  h.qp.lid = static_cast<uint16_t>(GetLe(p + 28, 2));
  h.qp.mtu = p[30];
  h.qp.link_layer = p[31];
  std::memcpy(h.qp.gid.data(), p + 32, 16);
  h.qp.recv_window = static_cast<uint32_t>(GetLe(p + 48, 4));
  h.qp.slot_bytes = static_cast<uint32_t>(GetLe(p + 52, 4));
  const char* name = reinterpret_cast<const char*>(p + 56);
  h.qp.name.assign(name, strnlen(name, kNameBytes));
  h.qp.device_receives = (GetLe(p + 104, 4) & kFlagDeviceReceives) != 0;
  return h;
}

}  // namespace mixnet::transport::verbs
