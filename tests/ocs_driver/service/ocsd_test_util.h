// Helpers for the mixnet-ocsd tests: a raw OcsDriver stub on a daemon's
// address (no client library, so the daemon is tested on its own), request
// builders and the decoding of partial-failure details. Header-only; the
// calls block the test thread up to their deadlines.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "google/rpc/status.pb.h"
#include "grpcpp/grpcpp.h"
#include "mixnet/ocs/v1/ocs_driver.grpc.pb.h"

namespace mixnet::testing {

namespace v1 = ::mixnet::ocs::v1;
using Pairs = std::vector<std::pair<int, int>>;

inline std::unique_ptr<v1::OcsDriver::Stub> StubFor(const std::string& address) {
  return v1::OcsDriver::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

inline void SetDeadline(grpc::ClientContext& ctx, int ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

inline v1::ApplyCrossConnectsRequest Req(uint64_t epoch, uint64_t version, const Pairs& circuits,
                                         const std::string& controller = "test") {
  v1::ApplyCrossConnectsRequest r;
  r.set_epoch(epoch);
  r.set_config_version(version);
  r.set_controller_id(controller);
  for (const auto& [a, b] : circuits) {
    v1::Circuit* c = r.add_circuits();
    c->set_port_a(static_cast<uint32_t>(a));
    c->set_port_b(static_cast<uint32_t>(b));
  }
  return r;
}

inline Pairs PairsOf(const google::protobuf::RepeatedPtrField<v1::Circuit>& v) {
  Pairs out;
  for (const v1::Circuit& c : v) out.emplace_back(c.port_a(), c.port_b());
  return out;
}

struct ApplyOutcome {
  grpc::Status status;
  v1::ApplyCrossConnectsResponse response;  // on success, or decoded from the details
  bool has_details = false;
};

inline ApplyOutcome Apply(v1::OcsDriver::Stub& stub, const v1::ApplyCrossConnectsRequest& req,
                          int deadline_ms = 10000) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, deadline_ms);
  ApplyOutcome out;
  out.status = stub.ApplyCrossConnects(&ctx, req, &out.response);
  if (!out.status.ok() && !out.status.error_details().empty()) {
    google::rpc::Status details;
    if (details.ParseFromString(out.status.error_details()) && details.details_size() > 0 &&
        details.details(0).UnpackTo(&out.response)) {
      out.has_details = true;
    }
  }
  return out;
}

inline v1::GetCrossConnectsResponse Get(v1::OcsDriver::Stub& stub) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, 10000);
  v1::GetCrossConnectsResponse r;
  grpc::Status s = stub.GetCrossConnects(&ctx, {}, &r);
  if (!s.ok()) r.set_epoch(~0ull);  // makes any comparison fail loudly
  return r;
}

inline v1::GetInfoResponse Info(v1::OcsDriver::Stub& stub) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, 10000);
  v1::GetInfoResponse r;
  grpc::Status s = stub.GetInfo(&ctx, {}, &r);
  if (!s.ok()) r.set_backend("error: " + s.error_message());
  return r;
}

}  // namespace mixnet::testing
