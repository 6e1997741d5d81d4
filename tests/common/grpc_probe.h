// Test helpers that probe a gRPC server the way standard tools do, without
// the services' generated stubs: grpc.health.v1 Check, and one server
// reflection round trip (list_services, hand-encoded) returning the raw
// reply, in which the service names appear as plain strings. Also raw unary
// and client-streaming calls with arbitrary bodies (for malformed-request
// tests).
// Header-only; blocking, from the test thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace mixnet::testing {

inline std::chrono::system_clock::time_point ProbeDeadline(int ms = 5000) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// The health status of `service` ("" = the server), or the call's error.
inline absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> HealthOf(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(ProbeDeadline());
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return resp.status();
}

namespace probe_internal {
inline bool Step(grpc::CompletionQueue& cq, void* tag) {
  void* got = nullptr;
  bool ok = false;
  return cq.AsyncNext(&got, &ok, ProbeDeadline()) == grpc::CompletionQueue::GOT_EVENT &&
         got == tag && ok;
}
inline std::string Flatten(const grpc::ByteBuffer& in) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!in.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}
inline void Drain(grpc::CompletionQueue& cq) {
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}
}  // namespace probe_internal

// One ServerReflectionInfo exchange with `list_services: ""` (field 7,
// bytes 0x3a 0x00); the reply's bytes.
inline absl::StatusOr<std::string> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(ProbeDeadline());
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto tag = [](intptr_t n) { return reinterpret_cast<void*>(n); };
  std::string reply;
  absl::Status failed;
  call->StartCall(tag(1));
  if (!probe_internal::Step(cq, tag(1))) failed = absl::UnavailableError("reflection: no call");
  if (failed.ok()) {
    grpc::Slice slice(std::string("\x3a\x00", 2));
    grpc::ByteBuffer out(&slice, 1);
    call->Write(out, tag(2));
    if (!probe_internal::Step(cq, tag(2))) failed = absl::UnavailableError("reflection: write");
  }
  if (failed.ok()) {
    grpc::ByteBuffer in;
    call->Read(&in, tag(3));
    if (probe_internal::Step(cq, tag(3))) {
      reply = probe_internal::Flatten(in);
    } else {
      failed = absl::UnimplementedError("reflection: no reply (service not served?)");
    }
  }
  call->WritesDone(tag(4));
  probe_internal::Step(cq, tag(4));
  grpc::Status status;
  call->Finish(&status, tag(5));
  probe_internal::Step(cq, tag(5));
  probe_internal::Drain(cq);
  if (!status.ok() && failed.ok()) {
    failed = absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("reflection: ", status.error_message()));
  }
  if (!failed.ok()) return failed;
  return reply;
}

// A unary call of `method` ("/pkg.Service/Method") with `body` as the raw
// request bytes; the status (the reply's bytes in *reply when given).
inline grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& method, const std::string& body,
                                 std::string* reply = nullptr) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(ProbeDeadline());
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  if (!probe_internal::Step(cq, reinterpret_cast<void*>(1))) {
    status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "probe: no answer");
  }
  if (reply != nullptr && status.ok()) *reply = probe_internal::Flatten(response);
  probe_internal::Drain(cq);
  return status;
}

// A client-streaming call of `method` writing each of `bodies` as raw
// message bytes, then half-closing; the final status. A write the server
// no longer takes (it already answered) ends the writing.
inline grpc::Status RawClientStreamCall(const std::shared_ptr<grpc::Channel>& channel,
                                        const std::string& method,
                                        const std::vector<std::string>& bodies) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(ProbeDeadline());
  auto call = stub.PrepareCall(&ctx, method, &cq);
  auto tag = [](intptr_t n) { return reinterpret_cast<void*>(n); };
  call->StartCall(tag(1));
  bool open = probe_internal::Step(cq, tag(1));
  for (size_t i = 0; open && i < bodies.size(); ++i) {
    grpc::Slice slice(bodies[i]);
    grpc::ByteBuffer out(&slice, 1);
    call->Write(out, tag(2));
    open = probe_internal::Step(cq, tag(2));
  }
  if (open) {
    call->WritesDone(tag(3));
    probe_internal::Step(cq, tag(3));
  }
  grpc::ByteBuffer reply;  // the one reply, if any: read before Finish
  call->Read(&reply, tag(5));
  probe_internal::Step(cq, tag(5));
  grpc::Status status;
  call->Finish(&status, tag(4));
  if (!probe_internal::Step(cq, tag(4))) {
    status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "probe: no status");
  }
  probe_internal::Drain(cq);
  return status;
}

}  // namespace mixnet::testing
